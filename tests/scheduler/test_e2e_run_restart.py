"""End to end: a ``gputui run`` session keeps its GPUs across a restart of the head.

A real ``gputui head`` process, killed with SIGKILL or stopped cleanly (SIGTERM)
and started again on the same database; real ``gputui run`` processes whose
commands hold the GPUs (their ``CUDA_VISIBLE_DEVICES`` set) the whole time. The
run reconnects and takes its claim back onto its new connection; a run whose
client died while the head was down is released once the head's grace is over,
which is how the test knows the grace has passed. No job lands on the GPUs of
the run that lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from privileged import need_root
from test_e2e_jobs import GPUTUI, Cluster, alive, job, script, state_is, until

from gputui.scheduler.client.aio import AsyncHeadClient

GRACE_S = 6
"""hosts.yaml's ``head: session_grace_s`` here (30 by default): a run reconnects at
least every 2 s (``cli_run.RECONNECT_CAP_S``), well within it."""


@pytest.fixture
async def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    c = Cluster(tmp_path, "local")
    c.head_options = {"session_grace_s": GRACE_S}
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


async def _run(cluster: Cluster, name: str, gpus: int) -> asyncio.subprocess.Process:
    """``gputui run -g GPUS -- CMD``: CMD writes its pid and devices, then runs until
    the file ``NAME.stop`` exists, and exits 5."""
    tmp = cluster.tmp
    code = (
        "import os, pathlib, sys, time\n"
        f"pathlib.Path({str(tmp / name)!r} + '.pid').write_text("
        "f\"{os.getpid()} {os.environ['CUDA_VISIBLE_DEVICES']}\")\n"
        f"while not pathlib.Path({str(tmp / name)!r} + '.stop').exists(): time.sleep(0.05)\n"
        "raise SystemExit(5)"
    )
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(cluster.sock))
    return await asyncio.create_subprocess_exec(
        *GPUTUI, "run", "-g", str(gpus), "--host", "sim01", "--", *script(code),
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip


async def _claims(client: AsyncHeadClient, **args: Any) -> list[dict[str, Any]]:
    return list((await client.call("claims", args))["claims"])


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
async def test_a_gputui_run_keeps_its_gpus_across_a_head_restart(local: Cluster, stop: str) -> None:
    client = await local.start_process()
    kept = await _run(local, "kept", 2)
    gone = await _run(local, "gone", 1)
    runs = (kept, gone)
    try:
        pid_file = local.tmp / "kept.pid"

        async def both_active() -> bool:
            claims = await _claims(client)
            return len(claims) == 2 and all(c["state"] == "active" for c in claims)

        await until(both_active, timeout=30)
        await until(lambda: _written(pid_file, local.tmp / "gone.pid"))
        cmd, devices = pid_file.read_text().split()
        mine = next(c for c in await _claims(client) if c["gpus"] == 2)
        assert sorted(devices.split(",")) == sorted(mine["gpu_uuids"])

        # The head goes away; so does the other run's client (and its command with it).
        assert local.process is not None
        if stop == "SIGKILL":
            await local.kill_process()
        else:
            await client.close()
            local.client = None
            local.process.terminate()
            assert await local.process.wait() == 0
        os.killpg(gone.pid, signal.SIGKILL)
        await gone.wait()

        client = await local.start_process()
        big = await client.call("submit", {"argv": script("pass"), "gpus": 3, "cwd": "/"})
        big_id = big["job"]["id"]

        # The grace is over once the dead run's claim is released.
        async def grace_over() -> dict[str, Any] | None:
            ended = [c for c in await _claims(client, all=True) if c["state"] == "released"]
            return ended[0] if ended else None

        # Well before the default grace of 30 s: the one hosts.yaml gave is kept.
        released = await until(grace_over, timeout=GRACE_S + 15)
        assert released["id"] != mine["id"]
        assert released["release_reason"] == "its gputui run session ended"
        now = [c for c in await _claims(client) if c["id"] == mine["id"]]
        assert now and now[0]["state"] == "active" and now[0]["session"], now
        assert now[0]["gpu_uuids"] == mine["gpu_uuids"]
        assert alive(int(cmd)) and kept.returncode is None
        # A tick after the release: a pass has run; the 3-GPU job still waits.
        view = await job(client, big_id)
        assert view["state"] == "queued", view

        # The command ends: its exit status comes back, and only now the GPUs are free.
        (local.tmp / "kept.stop").touch()
        _, err = await asyncio.wait_for(kept.communicate(), 30)
        assert kept.returncode == 5, err
        assert b"not kept" not in err, err
        done = await client.call("wait", {"job_id": big_id}, timeout=30)
        assert done["job"]["state"] == "completed"
    finally:
        for run in runs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)


async def _written(*paths: Path) -> bool:
    return all(p.exists() and p.read_text() for p in paths)


async def test_a_gputui_run_waiting_for_gpus_waits_on_across_a_head_restart(
    local: Cluster,
) -> None:
    """Still in the queue when the head is killed: it reconnects, takes its waiting
    claim back, and runs its command once the GPUs are free."""
    client = await local.start_process()
    gate = local.tmp / "gate"
    hold = (
        "import pathlib, sys, time\nwhile not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)"
    )
    busy = await client.call("submit", {"argv": [*script(hold), str(gate)], "gpus": 4, "cwd": "/"})
    await until(lambda: state_is(client, busy["job"]["id"], "running"), timeout=30)
    waiting = await _run(local, "waiter", 2)
    try:

        async def queued() -> bool:
            return [c["state"] for c in await _claims(client)] == ["waiting"]

        await until(queued, timeout=30)
        await local.kill_process()
        client = await local.start_process()
        gate.touch()  # the job ends: the waiting claim is granted, on the new head
        await until(lambda: _written(local.tmp / "waiter.pid"), timeout=40)
        (local.tmp / "waiter.stop").touch()
        _, err = await asyncio.wait_for(waiting.communicate(), 30)
        assert waiting.returncode == 5, err
        assert b"lost the head" not in err and b"not kept" not in err, err
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(waiting.pid, signal.SIGKILL)


@pytest.mark.root
def test_a_head_restarted_with_the_same_pid_names_its_connections_anew() -> None:
    """A head that is pid 1 of its container on every start: its first connection
    must not carry the name of the last head's first one (a restored run claim
    would look alive, and be released when that stranger hangs up)."""
    need_root("a pid namespace (unshare), to start a head as the same pid twice")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) not installed: no pid namespace to test in")
    code = (
        "import os; from gputui.scheduler.server.listener import Connection\n"
        "print(os.getpid(), Connection(None, None, 1).session)"
    )
    runs = [
        subprocess.run(
            ["unshare", "--pid", "--fork", sys.executable, "-c", code],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.split()
        for _ in range(2)
    ]  # fmt: skip
    assert [pid for pid, _ in runs] == ["1", "1"]
    assert runs[0][1] != runs[1][1], runs


async def test_a_gputui_run_whose_claim_could_not_be_kept_says_so_in_one_line(
    local: Cluster,
) -> None:
    """The claim is gone when the run reconnects (here: released in the store while
    no head ran): the user is told in one line, and the command runs on to its end."""
    client = await local.start_process()
    run = await _run(local, "told", 1)
    try:
        await until(lambda: _written(local.tmp / "told.pid"), timeout=30)
        (claim,) = await _claims(client)
        await local.kill_process()
        db = sqlite3.connect(local.tmp / "db" / "gputui.db")
        with db:
            db.execute("UPDATE claim SET state = 'released', release_reason = 'by hand'")
            db.execute("UPDATE allocation SET end_at = 1 WHERE end_at IS NULL")
        db.close()
        await local.start_process()
        assert run.stderr is not None
        lines = []
        while not lines or "not kept" not in lines[-1]:  # the run reconnects, and says
            line = await asyncio.wait_for(run.stderr.readline(), 30)
            assert line, lines
            lines.append(line.decode().rstrip("\n"))
        assert alive(int((local.tmp / "told.pid").read_text().split()[0]))
        (local.tmp / "told.stop").touch()
        _, err = await asyncio.wait_for(run.communicate(), 30)
        assert run.returncode == 5, err
        lines += err.decode().splitlines()
        said = [line for line in lines if "not kept" in line]
        assert said == [
            f"gputui run: c{claim['id']} was not kept (claim {claim['id']} is released (by hand));"
            " the command runs on, on GPUs the head may now give to others"
        ], lines
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
