"""A real single-node Slurm for the tests, started once per test process.

Debian's ``slurm-wlm`` and ``munge`` packages, run as root from a directory of our
own: a munge key and ``munged`` on a socket there, ``slurm.conf``/``gres.conf``/
``cgroup.conf`` written there and named by ``$SLURM_CONF``, ``slurmctld`` and
``slurmd`` on free loopback ports, their state, spool and logs there too. The node
is this machine (its host name, at 127.0.0.1) with four "GPUs": character device
files made with ``mknod`` under the directory (major 195, as NVIDIA's), which is
all ``gres.conf`` needs. Where Debian's ``slurmdbd`` and ``mariadb-server`` are
installed, accounting runs too: a MariaDB server of its own (a data directory made by
``mariadb-install-db``, on a loopback port), ``slurmdbd`` on it, the cluster
registered with ``sacctmgr``, and ``gres/gpu`` counted in every job's TRES, so that
``sacct`` and ``sshare`` answer as on a real cluster.

Where the packages are missing, the tests that need them skip, saying so (and under
root that skip is a failure: ``tests/privileged.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

NO_SLURM = "Slurm not installed (Debian packages slurm-wlm and munge)"
GPUS = 4
BINARIES = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch")
ACCOUNTING = ("/usr/sbin/slurmdbd", "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db")
NO_ACCOUNTING = "Slurm accounting not installed (Debian packages slurmdbd and mariadb-server)"


def accounting_installed() -> bool:
    return all(os.access(path, os.X_OK) for path in ACCOUNTING)


def installed() -> bool:
    return all(os.access(path, os.X_OK) for path in BINARIES)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SlurmCluster:
    """munged, slurmctld and slurmd on this machine, configured in ``root``."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gputui-slurm-"))
        os.chmod(self.root, 0o755)  # users' jobs write their output under it
        self.node = socket.gethostname().split(".")[0]
        self.conf = self.root / "slurm.conf"
        self.jobs = self.root / "jobs"
        self._pids: list[Path] = []
        self.accounting = accounting_installed()
        """Whether slurmdbd (and sacct) run in this cluster."""

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to talk to this Slurm (and nothing of the caller's)."""
        return {"SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        root = self.root
        for sub in ("state", "spool", "log", "dev", "munge"):
            (root / sub).mkdir()
        self.jobs.mkdir(mode=0o1777)
        os.chmod(self.jobs, 0o1777)
        munge = root / "munge"
        os.chmod(munge, 0o755)  # its socket is for every user; the key is root's only
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        for index in range(GPUS):
            device = root / "dev" / f"nvidia{index}"
            try:  # a character device, as NVIDIA's are
                os.mknod(device, 0o666 | 0o020000, os.makedev(195, index))
            except PermissionError:  # a container without CAP_MKNOD: slurmd takes a file
                device.touch(0o666)
        sock = munge / "munge.sock"
        self._run(
            "/usr/sbin/munged", f"--key-file={key}", f"--socket={sock}",
            f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
            f"--seed-file={munge}/seed", "--force",
        )  # fmt: skip
        self._pids.append(munge / "munged.pid")
        ctld_port, slurmd_port = _free_port(), _free_port()
        accounting = "AccountingStorageType=accounting_storage/none\n"
        if self.accounting:
            dbd_port = self._start_accounting(sock)
            accounting = (
                "AccountingStorageType=accounting_storage/slurmdbd\n"
                f"AccountingStorageHost=127.0.0.1\nAccountingStoragePort={dbd_port}\n"
                "AccountingStorageTRES=gres/gpu\n"
                f"AccountingStoragePass={sock}\n"  # the munge socket slurmdbd is reached with
            )
        self.conf.write_text(
            f"ClusterName=gputuitest\n"
            f"SlurmctldHost={self.node}(127.0.0.1)\n"
            f"SlurmctldPort={ctld_port}\n"
            f"SlurmdPort={slurmd_port}\n"
            "SlurmUser=root\nSlurmdUser=root\n"
            f"AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\n"
            f"StateSaveLocation={root}/state\nSlurmdSpoolDir={root}/spool\n"
            f"SlurmctldPidFile={root}/slurmctld.pid\nSlurmdPidFile={root}/slurmd.pid\n"
            f"SlurmctldLogFile={root}/log/slurmctld.log\nSlurmdLogFile={root}/log/slurmd.log\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            "JobAcctGatherType=jobacct_gather/none\n"
            + accounting
            + "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nGresTypes=gpu\n"
            # Each batch job is scheduled when it comes, not up to 3 s later (Slurm
            # gathers batch jobs for batch_sched_delay by default): the tests wait on
            # their jobs starting, one after another.
            "SchedulerType=sched/backfill\nSchedulerParameters=batch_sched_delay=0\n"
            "PriorityType=priority/multifactor\n"
            "PriorityWeightAge=1000\nPriorityWeightFairshare=10000\nPriorityWeightJobSize=100\n"
            "ReturnToService=2\nMpiDefault=none\nSwitchType=switch/none\n"
            "MinJobAge=300\nKillWait=2\nInactiveLimit=0\n"
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 Gres=gpu:{GPUS}"
            " State=UNKNOWN\n"
            f"PartitionName=gpu Nodes={self.node} Default=YES MaxTime=INFINITE State=UP"
            " OverSubscribe=FORCE:8\n",
            encoding="utf-8",
        )
        (root / "gres.conf").write_text(
            f"Name=gpu File={root}/dev/nvidia[0-{GPUS - 1}]\n", encoding="utf-8"
        )
        (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n", encoding="utf-8")
        if self.accounting:
            self._register()
        self._run("/usr/sbin/slurmctld", "-c")
        self._pids.append(root / "slurmctld.pid")
        self._run("/usr/sbin/slurmd")
        self._pids.append(root / "slurmd.pid")
        self._wait_idle()

    def _start_accounting(self, munge_socket: Path) -> int:
        """MariaDB and slurmdbd on loopback ports of their own; slurmdbd's port."""
        db = self.root / "db"
        db.mkdir()
        done = subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={db}/data", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {done.stderr.strip()[-300:]}")
        sql_port = _free_port()
        self._mariadb = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={db}/data", "--user=root",
             "--bind-address=127.0.0.1", f"--port={sql_port}", f"--socket={db}/mysql.sock",
             f"--pid-file={db}/mysqld.pid", "--innodb-buffer-pool-size=64M"],
            stdout=subprocess.DEVNULL, stderr=open(db / "mysqld.log", "w"),  # noqa: SIM115
        )  # fmt: skip
        _wait_port(sql_port, "mariadbd", self._mariadb)
        dbd_port = _free_port()
        conf = self.root / "slurmdbd.conf"  # beside slurm.conf, where slurmdbd looks
        conf.write_text(
            f"AuthType=auth/munge\nAuthInfo=socket={munge_socket}\n"
            f"DbdAddr=127.0.0.1\nDbdHost=localhost\nDbdPort={dbd_port}\nSlurmUser=root\n"
            f"StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStoragePort={sql_port}\n"
            f"StorageUser=root\nStorageLoc=slurm_acct_db\n"
            f"PidFile={self.root}/slurmdbd.pid\nLogFile={self.root}/log/slurmdbd.log\n",
            encoding="utf-8",
        )
        os.chmod(conf, 0o600)
        self._run("/usr/sbin/slurmdbd")
        self._pids.append(self.root / "slurmdbd.pid")
        _wait_port(dbd_port, "slurmdbd", None)
        return dbd_port

    def _register(self) -> None:
        """The cluster, an account and root in slurmdbd (before slurmctld starts)."""
        for argv in (
            ("sacctmgr", "-i", "add", "cluster", "gputuitest"),
            ("sacctmgr", "-i", "add", "account", "lab", "Cluster=gputuitest"),
            ("sacctmgr", "-i", "add", "user", "root", "Account=lab", "Cluster=gputuitest"),
        ):
            done = self.cmd(*argv, check=False)
            if done.returncode != 0 and "Nothing new added" not in done.stdout + done.stderr:
                raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}{self._logs()}")

    def _run(self, *argv: str) -> None:
        done = subprocess.run(
            argv, env={**os.environ, **self.env}, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.strip()[:300]}{self._logs()}")

    def _logs(self) -> str:
        tails = []
        for log in sorted((self.root / "log").glob("*.log")):
            with contextlib.suppress(OSError):
                tails.append(f"\n--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-8:]))
        return "".join(tails)

    def _wait_idle(self) -> None:
        """Until the node is up and idle (slurmd registered with slurmctld)."""
        deadline = time.monotonic() + 60
        while True:
            out = self.cmd("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip()
            if out == "idle":
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Slurm node never came up (sinfo: {out!r}){self._logs()}")
            time.sleep(0.1)  # polling slurmctld until a deadline, not a sleep as a wait

    def cmd(
        self, *argv: str, user: int | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Slurm's commands against this cluster (as ``user``, a uid)."""
        done = subprocess.run(
            argv,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **self.env},
            capture_output=True,
            text=True,
            check=False,
            cwd=self.jobs,
            user=user,
            timeout=60,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
        return done

    def clear(self) -> None:
        """Cancel every job and resume the node: each test starts on an idle cluster."""
        self.cmd("scancel", "--full", "-u", "root", check=False)
        for line in self.cmd("squeue", "-h", "-o", "%i").stdout.split():
            self.cmd("scancel", "--full", line, check=False)
        self.cmd("scontrol", "update", f"NodeName={self.node}", "State=RESUME", check=False)
        deadline = time.monotonic() + 30
        while self.cmd("squeue", "-h", "-o", "%i").stdout.strip():
            if time.monotonic() > deadline:
                raise RuntimeError("jobs left in the test Slurm")
            time.sleep(0.05)  # polling slurmctld until a deadline

    def stop(self) -> None:
        # Jobs first: slurmd leaves running jobs (their slurmstepd and processes) behind
        # when it stops, so a run would leave them on the machine.
        with contextlib.suppress(RuntimeError, OSError, subprocess.SubprocessError):
            self.clear()
        mariadb = getattr(self, "_mariadb", None)
        for pidfile in reversed(self._pids):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        for pidfile in reversed(self._pids):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(int(pidfile.read_text().strip()), 0)
                except (OSError, ValueError):
                    break
                time.sleep(0.05)  # waiting for a daemon we signalled to exit
        if mariadb is not None:
            mariadb.terminate()
            try:
                mariadb.wait(15)
            except subprocess.TimeoutExpired:
                mariadb.kill()
                mariadb.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def _wait_port(port: int, what: str, proc: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not listen on port {port} in 60 s")
        time.sleep(0.05)  # polling a daemon's port until a deadline


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    if not installed():
        pytest.skip(NO_SLURM)
    if os.geteuid() != 0:
        pytest.skip("not root here: slurmd and slurmctld run as root")
    cluster = SlurmCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The test Slurm, with no jobs and its node up."""
    slurm_cluster.clear()
    yield slurm_cluster
