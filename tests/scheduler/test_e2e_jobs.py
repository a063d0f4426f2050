"""End to end on a simulated cluster: a real head, real helpers, real jobs.

Every test runs twice, on uvloop as the daemon does (see conftest): over real SSH
(an asyncssh server on loopback, as in the demo cluster: host key checked, key
authentication, the helper shipped and run as a subprocess) and on a
``local: true`` host (the helper as a child process). Every job is a real
process started by the helper's detached supervisor; it is signalled for real,
and its exit code and log are read back from the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from headkit import FAST_TICK_S

from gputui.common.jobenv import Runtime
from gputui.config.loader import parse_config
from gputui.config.models import Config
from gputui.config.scheduler import SchedulerConfig
from gputui.demo.server import SimSshServer, login_env
from gputui.fleet.backoff import LinkTiming
from gputui.fleet.fleet import Fleet
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.fleet_hostops import FleetHosts
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.store.engine import jobs_namespace, open_store
from gputui.scheduler.store.sqlstore import SqlStore

SIM = "4xa100-80gb,name=sim01"


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 45.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` s (the
    hosts are simulated over SSH on a machine the whole suite shares: generous)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout} s (last: {value!r})")
        await asyncio.sleep(0.02)


class Cluster:
    """A head over one simulated host, which can be stopped and started again.

    ``transport`` is ``ssh`` (a real SSH server on loopback) or ``local``.
    """

    def __init__(self, tmp: Path, transport: str) -> None:
        self.tmp = tmp
        self.transport = transport
        self.sock = tmp / "head.sock"
        self.head: Head | None = None
        self.client: AsyncHeadClient | None = None
        self.server: SimSshServer | None = None
        self._config: Config | None = None
        self._data: dict[str, Any] = {}
        self.process: asyncio.subprocess.Process | None = None
        self.head_options: dict[str, Any] = {}
        """More of hosts.yaml's ``head:`` section for ``start_process``."""

    async def serve_host(self) -> None:
        """Bring the simulated host up (for SSH: its server, key and known_hosts)."""
        if self.transport == "local":
            host = {"name": "sim01", "local": True, "pool": "sim", "sim": SIM}
            self._data = {"refresh_interval": 0.5, "hosts": [host]}
            self._config = parse_config(json.dumps(self._data), "e2e-config")
            return
        key = asyncssh.generate_private_key("ssh-ed25519")
        key_path = self.tmp / "id_ed25519"
        key.write_private_key(str(key_path))
        key_path.chmod(0o600)
        user = getpass.getuser()
        env = dict(login_env(user), GPUTUI_JOBS_ROOT=str(self.tmp / "jobs"))
        self.server = SimSshServer(key, user=user, env=env)
        port = await self.server.start()
        known = self.tmp / "known_hosts"
        known.write_text(self.server.known_hosts_line)
        host = {"name": "sim01", "address": "127.0.0.1", "port": port, "pool": "sim", "sim": SIM}
        defaults = {
            "user": user,
            "identity_file": str(key_path),
            "known_hosts": str(known),
            "ssh_config": None,
            "python": sys.executable,
            "connect_timeout": 5,
        }
        self._data = {"defaults": defaults, "refresh_interval": 0.5, "hosts": [host]}
        self._config = parse_config(json.dumps(self._data), "e2e-config")

    async def start_process(self) -> AsyncHeadClient:
        """The head as ``gputui head``, a process of its own (to be SIGKILLed), on the
        same database and socket as ``start``."""
        head = {"socket": str(self.sock), "database": str(self.tmp / "db" / "gputui.db")}
        head.update(self.head_options)
        path = self.tmp / "hosts.yaml"
        path.write_text(json.dumps({**self._data, "head": head}))
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gputui", "head", "--hosts", str(path),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip

        async def serving() -> AsyncHeadClient | None:
            try:
                client = await AsyncHeadClient.open_local(self.sock)
            except Exception:
                return None
            hosts = (await client.call("cluster"))["hosts"]
            if any(h["live"] for h in hosts.values()):
                return client
            await client.close()
            return None

        self.client = await until(serving, timeout=40)
        return self.client

    async def kill_process(self) -> None:
        if self.client is not None:
            await self.client.close()
            self.client = None
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.process = None

    async def start(
        self,
        grace: float = 1.0,
        sched: SchedulerConfig | None = None,
        clock: Callable[[], float] | None = None,
        runtime: Runtime = "docker",
    ) -> AsyncHeadClient:
        """``clock``: the head's (``headkit.SettableClock``; default the wall clock);
        ``runtime``: hosts.yaml's ``jobs.runtime``."""
        assert self._config is not None
        engine = open_store(self.tmp / "db" / "gputui.db")
        namespace = jobs_namespace(engine)
        # A silent host is given up on after 3 s (the default is 30), so the test of a
        # host cut off stays short; reconnects are quick too.
        timing = LinkTiming(backoff_base=0.2, backoff_cap=0.5, hung_after=3.0)
        fleet = Fleet(self._config, jobs_namespace=namespace, timing=timing)
        hosts = FleetHosts(self._config, namespace, fleet=fleet)
        rules = Rules(kill_grace_s=grace, sched=sched or SchedulerConfig(), runtime=runtime)
        settings = HeadSettings(socket=self.sock, rules=rules, tick_s=FAST_TICK_S)
        timed = {} if clock is None else {"clock": clock}
        self.head = Head(SqlStore(engine), hosts, settings, host_pools={"sim01": "sim"}, **timed)
        await self.head.start()
        self.client = await AsyncHeadClient.open_local(self.sock)
        head = self.head

        async def live() -> bool:
            return any(s.healthy for s in head.watch.slots())

        await until(live)
        return self.client

    def helper_pid(self) -> int | None:
        """The running helper's process (its process group for SSH), if there is one."""
        if self.server is not None:
            pids = self.server.command_pids()
            return pids[0] if len(pids) == 1 else None
        from gputui.fleet.transport import LocalTransport

        assert self.head is not None
        link = self.head.hosts.fleet.links["sim01"]  # type: ignore[attr-defined]
        helper = link._helper
        transport = helper.transport if helper is not None else None
        return transport.pid if isinstance(transport, LocalTransport) else None

    async def running_helper(self) -> int | None:
        return self.helper_pid()

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self.head is not None:
            await self.head.close()
        self.head = self.client = None

    async def close(self) -> None:
        await self.kill_process()
        await self.stop()
        if self.server is not None:
            await self.server.stop()
        # A job a failed test left running would sit on the simulated GPUs of every
        # later test (the simulator finds processes by their environment): end it.
        subprocess.run(["pkill", "-KILL", "-f", str(self.tmp)], check=False)


@pytest.fixture(params=["ssh", "local"])
async def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))  # the local helper's
    c = Cluster(tmp_path, request.param)
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


def script(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def job(client: AsyncHeadClient, job_id: int) -> dict[str, Any]:
    return dict((await client.call("show", {"job_id": job_id}))["job"])


async def state_is(client: AsyncHeadClient, job_id: int, *states: str) -> dict[str, Any] | None:
    view = await job(client, job_id)
    return view if view["state"] in states else None


async def _with_pid(client: AsyncHeadClient, job_id: int) -> dict[str, Any] | None:
    """The job's view once it runs and its host has said its pid: a job can show
    running a moment before that."""
    view = await job(client, job_id)
    return view if view["state"] == "running" and view.get("pid") else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_job_runs_on_its_gpus_and_its_exit_code_and_log_come_back(cluster: Cluster) -> None:
    client = await cluster.start()
    code = (
        "import os; print('on', os.environ['CUDA_VISIBLE_DEVICES'], 'job',"
        " os.environ['GPUTUI_JOB_ID'], os.environ['CUDA_DEVICE_ORDER']); raise SystemExit(3)"
    )
    submitted = await client.call("submit", {"argv": script(code), "gpus": 2, "cwd": "/"})
    job_id = submitted["job"]["id"]
    ended = await client.call("wait", {"job_id": job_id}, timeout=30)
    view = await job(client, job_id)
    assert ended["job"]["state"] == view["state"] == "failed"
    assert view["exit_code"] == 3
    assert len(view["gpu_uuids"]) == 2 and view["host"] == "sim01"
    log = await client.call("logs", {"job_id": job_id})
    assert log["data"] == f"on {','.join(view['gpu_uuids'])} job {job_id} PCI_BUS_ID\n"
    # Its GPUs are free again: a 4-GPU job fits.
    big = await client.call("submit", {"argv": script("pass"), "gpus": 4, "cwd": "/"})
    done = await client.call("wait", {"job_id": big["job"]["id"]}, timeout=30)
    assert done["job"]["state"] == "completed"


async def test_a_running_job_shows_on_its_simulated_gpus(cluster: Cluster) -> None:
    client = await cluster.start()
    submitted = await client.call(
        "submit", {"argv": script("import time; time.sleep(60)"), "gpus": 1, "cwd": "/"}
    )
    job_id = submitted["job"]["id"]
    view = await until(lambda: _with_pid(client, job_id))
    assert cluster.head is not None
    fleet = cluster.head.hosts.fleet  # type: ignore[attr-defined]

    async def on_gpu() -> bool:
        sample = fleet.links["sim01"].snapshot.sample
        if sample is None:
            return False
        return any(
            p.pid == view["pid"]
            for g in sample.gpus
            if g.uuid in view["gpu_uuids"]
            for p in g.processes
        )

    await until(on_gpu)
    await client.call("kill", {"job_id": job_id})
    killed = await until(lambda: state_is(client, job_id, "killed"))
    assert not alive(view["pid"]) and killed["exit_signal"] in ("TERM", "KILL")


async def test_preempting_a_job_that_ignores_sigterm_kills_it_and_requeues_it(
    cluster: Cluster,
) -> None:
    client = await cluster.start(grace=0.5)
    code = (
        "import signal, time, pathlib, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " pathlib.Path(sys.argv[1]).touch(); time.sleep(120)"
    )
    marker = cluster.tmp / "started"
    argv = [*script(code), str(marker)]
    submitted = await client.call("submit", {"argv": argv, "gpus": 4, "cwd": "/"})
    job_id = submitted["job"]["id"]
    first = await until(lambda: _with_pid(client, job_id))

    async def ready() -> bool:
        return marker.exists()

    await until(ready)  # its SIGTERM handler is in place
    answer = await client.call("preempt", {"job_id": job_id})
    assert answer["job"]["state"] == "preempting"
    # SIGTERM is ignored; SIGKILL after the grace; then it is queued and starts again.
    second = await until(lambda: _requeued(client, job_id, first["pid"]), timeout=30)
    assert not alive(first["pid"])
    assert second["requeues"] == 1
    await client.call("kill", {"job_id": job_id})
    await until(lambda: state_is(client, job_id, "killed"), timeout=30)


async def _requeued(client: AsyncHeadClient, job_id: int, old_pid: int) -> dict[str, Any] | None:
    view = await job(client, job_id)
    if view["state"] == "running" and view["pid"] not in (None, old_pid):
        return view
    return None


async def test_a_time_limit_ends_the_job_as_timeout(cluster: Cluster) -> None:
    client = await cluster.start(grace=0.5)
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    submitted = await client.call(
        "submit", {"argv": script(code), "gpus": 1, "cwd": "/", "time_limit_s": 1.0}
    )
    ended = await client.call("wait", {"job_id": submitted["job"]["id"]}, timeout=30)
    assert ended["job"]["state"] == "timeout"
    assert ended["job"]["reason"] == "time limit reached"


async def test_a_job_survives_a_head_restart_and_is_reattached(cluster: Cluster) -> None:
    client = await cluster.start()
    gate = cluster.tmp / "go"
    code = (
        "import pathlib, sys, time\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"
        "print('finished'); raise SystemExit(7)"
    )
    submitted = await client.call(
        "submit", {"argv": [*script(code), str(gate)], "gpus": 1, "cwd": "/"}
    )
    job_id = submitted["job"]["id"]
    # Its pid comes with a report of the host (the first may only say it started).
    running = await until(lambda: _with_pid(client, job_id))
    await cluster.stop()
    assert alive(running["pid"]), "the job must go on running while the head is down"
    gate.touch()  # it ends while no head is there to see it
    client = await cluster.start()
    ended = await client.call("wait", {"job_id": job_id}, timeout=30)
    assert ended["job"]["state"] == "failed" and ended["job"]["exit_code"] == 7
    view = await job(client, job_id)
    assert view["launches"] == 1, "re-attached, never launched again"
    log = await client.call("logs", {"job_id": job_id})
    assert log["data"] == "finished\n"


async def test_a_job_survives_a_sigkill_of_the_head_and_is_reattached(cluster: Cluster) -> None:
    """``gputui head`` killed with SIGKILL while a job runs: the job runs on, ends while
    no head is there, and the next head re-attaches to it and reads its end."""
    client = await cluster.start_process()
    gate = cluster.tmp / "go"
    code = (
        "import pathlib, sys, time\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"
        "print('done'); raise SystemExit(9)"
    )
    submitted = await client.call(
        "submit", {"argv": [*script(code), str(gate)], "gpus": 2, "cwd": "/"}
    )
    job_id = submitted["job"]["id"]
    running = await until(lambda: _with_pid(client, job_id))
    await cluster.kill_process()
    assert alive(running["pid"]), "the job must go on running after the head is killed"
    gate.touch()

    async def ended() -> bool:
        return not alive(running["pid"])

    await until(ended)
    client = await cluster.start_process()
    view = await until(lambda: state_is(client, job_id, "failed"), timeout=40)
    assert view["exit_code"] == 9 and view["launches"] == 1
    assert (await client.call("logs", {"job_id": job_id}))["data"] == "done\n"


async def test_a_job_the_head_never_confirmed_is_not_launched_twice(cluster: Cluster) -> None:
    """The head dies between deciding a launch and hearing its answer: at the next
    start the host's own list settles it, and the run key stops a second start."""
    client = await cluster.start()
    submitted = await client.call(
        "submit", {"argv": script("import time; time.sleep(60)"), "gpus": 1, "cwd": "/"}
    )
    job_id = submitted["job"]["id"]
    first = await until(lambda: _with_pid(client, job_id))
    await cluster.stop()
    # Make the store believe the launch was never confirmed.
    engine = open_store(cluster.tmp / "db" / "gputui.db")
    store = SqlStore(engine)
    with store.transaction() as tx:
        row = tx.job(job_id)
        assert row is not None
        row.state, row.pid = "starting", None
    store.close()
    client = await cluster.start()
    again = await until(lambda: _with_pid(client, job_id))
    assert again["pid"] == first["pid"] and again["launches"] == 1
    await client.call("kill", {"job_id": job_id})
    await until(lambda: state_is(client, job_id, "killed"), timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.kill(first["pid"], signal.SIGKILL)


async def test_a_job_that_ends_while_its_host_is_cut_off_is_read_back_not_relaunched(
    cluster: Cluster,
) -> None:
    client = await cluster.start()
    gate = cluster.tmp / "go"
    code = (
        "import pathlib, sys, time\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.02)\n"
        "raise SystemExit(5)"
    )
    submitted = await client.call(
        "submit", {"argv": [*script(code), str(gate)], "gpus": 1, "cwd": "/"}
    )
    job_id = submitted["job"]["id"]
    running = await until(lambda: _with_pid(client, job_id))
    first = await until(cluster.running_helper)
    # The host goes silent (its helper stopped, the connection still up): the link
    # gives up on it, and the job's state is unknown while it keeps its GPUs.
    if cluster.server is not None:
        cluster.server.freeze()
    else:
        os.kill(first, signal.SIGSTOP)
    try:
        await until(lambda: state_is(client, job_id, "unknown"), timeout=40)
        gate.touch()  # the job ends while nobody can hear it

        async def ended() -> bool:
            return not alive(running["pid"])

        await until(ended)
    finally:
        if cluster.server is not None:
            cluster.server.thaw()
        with contextlib.suppress(ProcessLookupError):
            os.kill(first, signal.SIGKILL)
    view = await until(lambda: state_is(client, job_id, "failed"), timeout=40)
    assert view["exit_code"] == 5 and view["launches"] == 1

    async def new_helper() -> bool:
        return cluster.helper_pid() not in (None, first)

    await until(new_helper)


async def test_a_job_that_ends_while_its_host_connection_is_gone_is_read_back_not_relaunched(
    cluster: Cluster,
) -> None:
    """The connection itself drops (SSH: the server goes away, every connection cut and
    its helper killed; local: the helper killed), the job ends meanwhile, then the host
    comes back: the head reads the exit code from the host's state file."""
    client = await cluster.start()
    gate = cluster.tmp / "go"
    code = (
        "import pathlib, sys, time\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.02)\n"
        "raise SystemExit(6)"
    )
    submitted = await client.call(
        "submit", {"argv": [*script(code), str(gate)], "gpus": 1, "cwd": "/"}
    )
    job_id = submitted["job"]["id"]
    running = await until(lambda: _with_pid(client, job_id))
    first = await until(cluster.running_helper)
    if cluster.server is not None:
        await cluster.server.stop()  # no host to reach until start() below
        await until(lambda: state_is(client, job_id, "unknown"), timeout=40)
    else:
        os.kill(first, signal.SIGKILL)
    gate.touch()  # the job ends while its host's connection is gone

    async def ended() -> bool:
        return not alive(running["pid"])

    await until(ended)
    if cluster.server is not None:
        await cluster.server.start()  # the host is back, on the same port
    view = await until(lambda: state_is(client, job_id, "failed"), timeout=40)
    assert view["exit_code"] == 6 and view["launches"] == 1
    assert await until(cluster.running_helper) != first


GPUTUI = [sys.executable, "-m", "gputui.entry"]


async def test_gputui_run_holds_gpus_for_its_command_and_the_head_frees_them_on_kill_9(
    cluster: Cluster,
) -> None:
    client = await cluster.start()
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(cluster.sock))
    # A command that ends: its exit status comes back, and the claim is released.
    done = await asyncio.create_subprocess_exec(
        *GPUTUI,
        "run",
        "-g",
        "2",
        "--host",
        "sim01",
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES']); raise SystemExit(4)",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(done.communicate(), 30)
    assert done.returncode == 4, err
    assert len(out.decode().strip().split(",")) == 2

    async def no_claims() -> bool:
        return not (await client.call("claims"))["claims"]

    await until(no_claims)
    # kill -9 of gputui itself: CMD gets SIGTERM (it dies with gputui), the head sees
    # the connection drop and frees the GPUs.
    pid_file = cluster.tmp / "cmd-pid"
    run = await _run_for_kill(
        env, pid_file, "import os, pathlib, sys, time\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(60)",
    )  # fmt: skip
    try:
        cmd = int(await until(lambda: _read(pid_file)))
        claims = (await client.call("claims"))["claims"]
        assert [c["state"] for c in claims] == ["active"] and claims[0]["session"]
        run.kill()
        await run.wait()
        await until(no_claims)
        released = (await client.call("claims", {"all": True}))["claims"][-1]
        assert released["release_reason"] == "its gputui run session ended"
        await until(lambda: _gone_soon(cmd))
        # The GPUs are free again: a 4-GPU job starts.
        big = await client.call("submit", {"argv": script("pass"), "gpus": 4, "cwd": "/"})
        finished = await client.call("wait", {"job_id": big["job"]["id"]}, timeout=30)
        assert finished["job"]["state"] == "completed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)

    # A CMD that ignores SIGTERM outlives gputui on its GPUs: they stay claimed (never
    # given to the queue) until it is gone too.
    pid_file.unlink()
    run = await _run_for_kill(
        env, pid_file, "import os, pathlib, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(120)",
        on_gpus=True,
    )  # fmt: skip
    cmd = 0
    try:
        cmd = int(await until(lambda: _read(pid_file)))
        head = cluster.head
        assert head is not None

        async def seen() -> bool:  # the head has a sample with CMD on its GPUs
            return any(os.getuid() in uids for uids in head.watch.active_users().values())

        await until(seen)
        run.kill()
        await run.wait()

        async def kept() -> dict[str, Any] | None:
            mine = (await client.call("claims"))["claims"]
            return mine[0] if mine and not mine[0]["session"] else None

        claim = await until(kept)  # the head saw the session end, and kept the claim
        assert claim["state"] == "active" and not _gone(cmd)
        big = await client.call("submit", {"argv": script("pass"), "gpus": 4, "cwd": "/"})
        assert (await job(client, big["job"]["id"]))["state"] == "queued"
        os.kill(cmd, signal.SIGKILL)
        await until(no_claims)
        released = (await client.call("claims", {"all": True}))["claims"][-1]
        assert released["release_reason"] == "its gputui run ended; its last process too"
        finished = await client.call("wait", {"job_id": big["job"]["id"]}, timeout=30)
        assert finished["job"]["state"] == "completed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            if cmd:
                os.kill(cmd, signal.SIGKILL)


async def _run_for_kill(
    env: dict[str, str], pid_file: Path, code: str, *, on_gpus: bool = False
) -> asyncio.subprocess.Process:
    """``gputui run -g 4 -- python -c CODE`` in a session of its own; ``on_gpus``: CMD
    declares its GPUs to the simulator, so the head sees its process on them."""
    argv = [sys.executable, "-c", code]
    if on_gpus:
        argv = ["sh", "-c", 'GPUTUI_SIM_GPU="$CUDA_VISIBLE_DEVICES" exec "$@"', "sh", *argv]
    return await asyncio.create_subprocess_exec(
        *GPUTUI, "run", "-g", "4", "--host", "sim01", "--", *argv,
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


async def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _gone_soon(pid: int) -> bool:
    return _gone(pid)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True
