"""``DemoCluster``: a few simulated GPU hosts on this machine, reached over real SSH.

Each host is an in-process SSH server on 127.0.0.1 with its own host key, running
the real helper in sim mode. The cluster writes a throwaway hosts.yaml, client key
and known_hosts, so the console connects exactly as it would to real servers: real
key exchange, real host key verification, real public-key auth. A few real
processes pose as GPU jobs so the grid has owners and something to kill. With
``head=True`` a real ``gputui head`` runs too (socket and database in the same
directory), so claims and the queue work as on a real cluster.

Each cluster has an id of its own (random): mixed into its cards' UUIDs and serials
(the sim spec's ``cluster=``) and its simulators' scope (``GPUTUI_SIM_SCOPE``, which
its helpers, jobs and workloads carry), so two demos on one machine, two teammates'
say, never see each other's cards or processes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import getpass
import json
import os
import pwd
import secrets
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from types import TracebackType

import asyncssh

from gputui.common.i18n import _
from gputui.config.loader import load_config
from gputui.config.models import Config
from gputui.demo.head import DemoHead
from gputui.demo.progress import Report
from gputui.demo.server import SimSshServer, login_env
from gputui.demo.workloads import JOBS, Workload, start_workload, stop_workloads, workload_owners
from gputui.remote.sim.device import SimDevice
from gputui.remote.sim.spec import MAX_GPUS

MODELS = ("a100-80gb", "rtx3090", "h100", "l40s", "rtx4090", "a10", "h200", "a100-40gb")
MIG_MODELS = {"a100-80gb": "a100-80gb-migmix", "h100": "h100-mig"}
"""``gputui demo --mig``: these hosts' cards with MIG mode on and an admin's slices."""
MIG_SEED_PROFILE = {"a100-80gb-migmix": "2g.20gb", "h100-mig": "1g.10gb"}
"""The profile of the demo job seeded on a MIG host's slices."""
MAX_GPUS_PER_HOST = MAX_GPUS


DIR_PREFIX = "gputui-demo-"
OWNER_FILE = "demo.pid"
"""``PID START`` of the demo that made the directory (START: /proc's start time, so a
reused pid is not taken for the demo)."""


def _started(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _me() -> str:
    return f"{os.getpid()} {_started(os.getpid()) or '?'}"


def sweep_stale(root: Path) -> list[Path]:
    """Remove what demos killed with SIGKILL left in ``root`` (their directories,
    which ``emergency_cleanup`` never got to): this user's own, whose demo is gone.
    Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for path in entries:
        if not path.name.startswith(DIR_PREFIX):
            continue
        try:
            info = path.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            pid_text, _, start = (path / OWNER_FILE).read_text(encoding="ascii").partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue  # not ours, being made, or from before owner files: left alone
        if pid > 0 and _started(pid) == start.strip():
            continue  # its demo still runs
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _quiet(subject: str, state: str, detail: str) -> None:
    """A ``Report`` that says nothing."""


def split_gpus(hosts: int, gpus: int) -> list[int]:
    """Spread ``gpus`` over ``hosts`` as evenly as possible, every host getting one."""
    if hosts < 1:
        raise ValueError("a demo cluster needs at least one host")
    if gpus < hosts:
        raise ValueError(f"{gpus} GPUs cannot go round {hosts} hosts (one each at least)")
    if gpus > hosts * MAX_GPUS_PER_HOST:
        raise ValueError(f"at most {MAX_GPUS_PER_HOST} GPUs per host")
    base, extra = divmod(gpus, hosts)
    return [base + (1 if i < extra else 0) for i in range(hosts)]


# A few troubles real cards have, on GPUs the workloads leave idle, so the demo
# shows what the console does with them: memory held by no process, an Xid storm
# (94: contained ECC error), hardware slowdown. Host index -> faults.
DEMO_FAULTS: dict[int, tuple[tuple[str, int], ...]] = {
    0: (("phantom", 4),),
    2: (("xid:94", 3),),
    3: (("throttle", 2),),
}


def _faults(host: int, count: int) -> str:
    return "".join(f",fault={kind}@{gpu}" for kind, gpu in DEMO_FAULTS.get(host, ()) if gpu < count)


class DemoCluster:
    """``hosts`` simulated servers with ``gpus`` GPUs between them; ``async with`` it."""

    def __init__(
        self,
        hosts: int = 4,
        gpus: int = 20,
        *,
        workloads: int | None = None,
        faults: bool = False,
        head: bool = False,
        power: str = "off",
        cluster_id: str | None = None,
        mig: bool = False,
    ) -> None:
        """``faults`` puts a few of the troubles real cards have on idle GPUs; ``head``
        starts the scheduler's head too (``seed_head`` gives it work); ``cluster_id``
        (default: a random one) sets the cards' identities and whose processes count."""
        self.counts = split_gpus(hosts, gpus)
        self.names = [f"gpu{i + 1:02d}" for i in range(hosts)]
        self.models = [MODELS[i % len(MODELS)] for i in range(hosts)]
        if mig:
            self.models = [MIG_MODELS.get(m, m) for m in self.models]
        self.cluster_id = cluster_id or secrets.token_hex(4)
        self.scope = f"demo-{self.cluster_id}"
        """The simulators' scope: only processes carrying it are this cluster's."""
        self.specs = [
            f"{count}x{model},name={name},cluster={self.cluster_id}" + _faults(i, count) * faults
            for i, (count, model, name) in enumerate(
                zip(self.counts, self.models, self.names, strict=True)
            )
        ]
        self.workload_count = min(6, gpus) if workloads is None else workloads
        self.directory: Path | None = None
        self.servers: list[SimSshServer] = []
        self.workloads: list[Workload] = []
        self._config_path: Path | None = None
        self._config: Config | None = None
        self.with_head = head
        self.power = power
        """The head's ``power.mode`` (``off``, ``report``, ``lock``): not off, the head
        counts held-but-idle cards after a minute, and one seeded job holds a card
        and does nothing."""
        self.head: DemoHead | None = None

    @property
    def config_path(self) -> Path:
        if self._config_path is None:
            raise RuntimeError("the demo cluster is not started")
        return self._config_path

    def config(self) -> Config:
        """The demo's hosts.yaml, loaded through the real loader."""
        if self._config is None:
            raise RuntimeError("the demo cluster is not started")
        return self._config

    def gpu_uuid(self, host_index: int, gpu_index: int) -> str:
        """The UUID the simulator gives GPU ``gpu_index`` of host ``host_index``."""
        name, model = self.names[host_index], self.models[host_index]
        return SimDevice(gpu_index, model, name, 0, self.cluster_id).uuid

    async def start(self, report: Report | None = None) -> None:
        """Start servers and workloads and write the files; everything is undone on error.
        ``report`` hears how the head's start goes (see ``progress``)."""
        atexit.register(self.emergency_cleanup)
        try:
            await self._start(report or _quiet)
        except BaseException:
            await self.stop()
            raise

    async def wait_ready(self, report: Report | None = None, timeout: float = 20.0) -> bool:
        """Wait until the head sees every host live with all its GPUs, ``report``-ing
        each host as it comes; True at once without a head, False when time ran out."""
        head = self.head
        if head is None:
            return True
        counts = dict(zip(self.names, self.counts, strict=True))
        return await head.watch_hosts(counts, report or _quiet, timeout)

    async def _start(self, report: Report) -> None:
        sweep_stale(Path(tempfile.gettempdir()))
        self.directory = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
        self.directory.chmod(0o700)
        (self.directory / OWNER_FILE).write_text(_me(), encoding="ascii")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        key_path = self.directory / "id_ed25519"
        client_key.write_private_key(str(key_path))
        key_path.chmod(0o600)
        user = getpass.getuser()
        env = login_env(user, self.scope)
        if self.with_head:
            # The head's jobs live in the demo's directory, not in the system's.
            env["GPUTUI_JOBS_ROOT"] = str(self.directory / "jobs")
            if os.geteuid() == 0:
                self.directory.chmod(0o711)  # other users' jobs reach the socket by name
            (self.directory / "head").mkdir(mode=0o755)
            (self.directory / "head").chmod(0o755)
        self.servers = [SimSshServer(client_key, user=user, env=env) for _ in self.names]
        ports = await asyncio.gather(*(server.start() for server in self.servers))
        known_hosts = self.directory / "known_hosts"
        known_hosts.write_text("".join(s.known_hosts_line for s in self.servers))
        self._config_path = self.directory / "hosts.yaml"
        self._config_path.write_text(self._yaml(user, str(key_path), str(known_hosts), list(ports)))
        self._config = load_config(self._config_path)
        self._start_workloads()
        if self.with_head:
            self.head = DemoHead(self._config_path, self.directory / "head" / "head.sock")
            report("head", "starting", "")
            await self.head.start()
            report("head", "ready", _("in {directory}").format(directory=self.directory))

    async def seed_head(self) -> list[str]:
        """Give the head jobs (running and waiting) and an idle claim; what was done."""
        head = self.head  # ``stop`` may clear it meanwhile
        if head is None:
            return []
        mig = {
            name: MIG_SEED_PROFILE[model]
            for name, model in zip(self.names, self.models, strict=True)
            if model in MIG_SEED_PROFILE
        }
        await head.seed(workload_owners(), self.names, self.counts, mig)
        if self.power != "off" and head.claimed:
            self._idle_kernel(head.claimed[0])
            head.seeded.append(_("a notebook kernel of yours holds the claim's GPU, idle"))
        return head.seeded

    def _idle_kernel(self, uuid: str) -> None:
        """A process of yours that holds memory on ``uuid`` and does nothing (0 %):
        held but idle, so the head counts it (``--power report``) or locks its clocks
        low (``--power lock``) after a minute, and its draw falls."""
        for host_index, count in enumerate(self.counts):
            for gpu_index in range(count):
                if self.gpu_uuid(host_index, gpu_index) == uuid:
                    self.workloads.append(
                        start_workload(
                            host=self.names[host_index],
                            gpu_uuid=uuid,
                            gpu_index=gpu_index,
                            job=("kernel.py", "--notebook", "explore.ipynb"),
                            user=pwd.getpwuid(os.getuid()).pw_name,
                            mem_mib=8192,
                            util=0,
                            scope=self.scope,
                        )
                    )
                    return

    def _yaml(self, user: str, key: str, known_hosts: str, ports: list[int]) -> str:
        # JSON is YAML: quoting every value keeps odd paths safe.
        q = json.dumps
        lines = [
            "# Written by gputui's demo cluster; deleted when the demo stops.",
            "defaults:",
            f"  user: {q(user)}",
            f"  identity_file: {q(key)}",
            f"  known_hosts: {q(known_hosts)}",
            "  ssh_config: null",
            f"  python: {q(sys.executable)}",
            "  connect_timeout: 10",
            "hosts:",
        ]
        for name, port, spec, model in zip(self.names, ports, self.specs, self.models, strict=True):
            lines += [
                f"  - name: {q(name)}",
                '    address: "127.0.0.1"',
                f"    port: {port}",
                f"    sim: {q(spec)}",
                f"    labels: {{model: {q(model)}}}",
            ]
        if self.with_head:
            assert self.directory is not None
            lines += [
                "head:",
                '  host: "localhost"',
                f"  socket: {q(str(self.directory / 'head' / 'head.sock'))}",
                f"  database: {q(str(self.directory / 'db' / 'gputui.db'))}",
                '  admin_group: "gputui-demo-admin"',
                "  claim_idle_minutes: 30",
                "  kill_grace_s: 3",
            ]
            if self.power != "off":
                lines += ["scheduler:", "  power:", f"    mode: {q(self.power)}"]
                lines += ["    idle_minutes: 1"]
        return "\n".join(lines) + "\n"

    def _start_workloads(self) -> None:
        owners = workload_owners()
        slots = [(h, g) for h, count in enumerate(self.counts) for g in range(count)]
        # Spread over hosts first: host 0 GPU 0, host 1 GPU 0, ..., host 0 GPU 1, ...
        slots.sort(key=lambda slot: (slot[1], slot[0]))
        for i, (host_index, gpu_index) in enumerate(slots[: self.workload_count]):
            self.workloads.append(
                start_workload(
                    host=self.names[host_index],
                    gpu_uuid=self.gpu_uuid(host_index, gpu_index),
                    gpu_index=gpu_index,
                    job=JOBS[i % len(JOBS)],
                    user=owners[i % len(owners)],
                    mem_mib=4096 + 2048 * (i % 5),
                    util=40 + (i * 13) % 60,
                    scope=self.scope,
                )
            )

    async def stop(self) -> None:
        """Stop the head, kill workloads and helpers, stop servers, delete the files.
        Safe to repeat."""
        head, self.head = self.head, None
        if head is not None:
            await head.stop()
        workloads, self.workloads = self.workloads, []
        await asyncio.get_running_loop().run_in_executor(None, stop_workloads, workloads)
        servers, self.servers = self.servers, []
        await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
        self._config = None
        self._config_path = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.emergency_cleanup)

    def emergency_cleanup(self) -> None:
        """Leave no workloads, helpers or files behind when ``stop()`` cannot run (the
        loop died, or the process must end now); safe from any thread."""
        if self.head is not None:
            self.head.emergency_cleanup()
        stop_workloads(self.workloads, grace=0.2)
        for server in self.servers:
            for pid in server.command_pids():
                with contextlib.suppress(OSError):
                    os.killpg(pid, 9)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def __aenter__(self) -> DemoCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
