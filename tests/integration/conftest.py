"""A real OpenSSH sshd on a free loopback port, with its own host key and test user.

The fixture needs root (to create the user and to run sshd) and ``/usr/sbin/sshd``;
without them the tests skip and say why. Everything it creates (user, home, temp
files, sshd, the user's processes) is removed afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from privileged import account, need_root

from gputui.config.loader import parse_config
from gputui.config.models import Config
from gputui.remote.sim.env import ENV_SCOPE

# wait, free_port, fast_timing and fleets come from tests/conftest.py.
SSHD = "/usr/sbin/sshd"
SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass
class Sshd:
    """A running sshd and what a client needs to reach it."""

    port: int
    user: str
    uid: int
    gid: int
    directory: Path
    host_public_key: str
    client_key_path: Path
    known_hosts: Path

    def config(self, hosts: list[dict[str, Any]], **top: Any) -> Config:
        data: dict[str, Any] = {
            "defaults": {
                "user": self.user,
                "port": self.port,
                "identity_file": str(self.client_key_path),
                "known_hosts": str(self.known_hosts),
                "ssh_config": None,
                "python": SYSTEM_PYTHON,
                "connect_timeout": 5,
            },
            "refresh_interval": 0.2,
            "hosts": [{"address": "127.0.0.1", **h} for h in hosts],
        }
        data.update(top)
        return parse_config(json.dumps(data), "sshd-test-config")


def _user_pids(uid: int) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
    return pids


@pytest.fixture(scope="session")
def test_user() -> Iterator[tuple[str, int, int]]:
    need_root("creates a test user and runs sshd")
    if not os.path.exists(SSHD):
        pytest.skip(f"OpenSSH server not installed ({SSHD} missing)")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} missing: the test user needs a python3 to run")
    name = f"gputui-t-{secrets.token_hex(4)}"
    account("useradd", "-m", "-s", "/bin/sh", name)
    try:
        # A locked password ("!") makes sshd refuse the account without PAM; "*" does not.
        account("usermod", "-p", "*", name)
        entry = pwd.getpwnam(name)
        yield name, entry.pw_uid, entry.pw_gid
    finally:
        for pid in _user_pids(pwd.getpwnam(name).pw_uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _user_pids(pwd.getpwnam(name).pw_uid) and time.monotonic() < deadline:
            time.sleep(0.05)
        account("userdel", "-r", name, check=False)


class SshdProcess:
    """One OpenSSH sshd on ``port``, started and stopped (like a host rebooting) at will.

    ``stop`` kills the listener and every session it forked (and their processes), so
    connections to it drop as they would when the host goes down.
    """

    def __init__(
        self, directory: Path, port: int, user: str, authorized: Path, extra: tuple[str, ...] = ()
    ) -> None:
        self.directory = directory
        self.port = port
        self.host_key = directory / "ssh_host_ed25519_key"
        self.process: subprocess.Popen[bytes] | None = None
        self.config = directory / "sshd_config"
        self.config.write_text(
            "\n".join(
                [
                    f"Port {port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {authorized}",
                    "UsePAM no",
                    "StrictModes no",
                    "PidFile none",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin no",
                    f"AllowUsers {user}",
                    "X11Forwarding no",
                    "AllowAgentForwarding no",
                    "PrintMotd no",
                    "LogLevel ERROR",
                    # This test process's simulators (see simscope), as a login has it.
                    f"SetEnv {ENV_SCOPE}={os.environ[ENV_SCOPE]}",
                    *extra,
                    "",
                ]
            )
        )
        self.new_host_key()

    def new_host_key(self) -> str:
        """A fresh host key (used from the next start on); its ``type base64`` public line."""
        for path in (self.host_key, self.host_key.with_suffix(".pub")):
            path.unlink(missing_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.host_key)],
            check=True,
            capture_output=True,
        )
        return self.public_key

    @property
    def public_key(self) -> str:
        public = Path(f"{self.host_key}.pub").read_text().split()
        return f"{public[0]} {public[1]}"

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.public_key}\n"

    def start(self) -> None:
        """Start sshd; returns once it accepts connections."""
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
        process = self.process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while True:
            if process.poll() is not None:
                err = process.stderr.read().decode(errors="replace") if process.stderr else ""
                pytest.fail(f"sshd exited with {process.returncode}: {err.strip()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            if time.monotonic() > deadline:
                pytest.fail("sshd did not start listening in 10 s")
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill sshd and everything it started; returns once the port refuses."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        family = _descendants(process.pid)
        process.kill()
        process.wait(5)
        for pid in family:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{name}/stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@pytest.fixture(scope="session")
def sshd(test_user: tuple[str, int, int], free_port: Callable[[], int]) -> Iterator[Sshd]:
    user, uid, gid = test_user
    directory = Path(tempfile.mkdtemp(prefix="gputui-sshd-"))
    # sshd reads AuthorizedKeysFile as the user: the directory must be searchable.
    directory.chmod(0o755)
    server: SshdProcess | None = None
    try:
        client = asyncssh.generate_private_key("ssh-ed25519")
        client_key_path = directory / "client_key"
        client.write_private_key(str(client_key_path))
        client_key_path.chmod(0o600)
        authorized = directory / "authorized_keys"
        authorized.write_bytes(client.export_public_key())
        authorized.chmod(0o644)
        server = SshdProcess(directory, free_port(), user, authorized)
        server.start()
        known_hosts = directory / "known_hosts"
        known_hosts.write_text(server.known_hosts_line())
        yield Sshd(
            port=server.port,
            user=user,
            uid=uid,
            gid=gid,
            directory=directory,
            host_public_key=server.public_key,
            client_key_path=client_key_path,
            known_hosts=known_hosts,
        )
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def make_sshd(
    sshd: Sshd, free_port: Callable[[], int], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., SshdProcess]]:
    """``make_sshd(*extra_config_lines)``: another started sshd for the same test user and
    client key as ``sshd``; the test stops, restarts and re-keys it as it likes."""
    made: list[SshdProcess] = []

    def make(*extra: str) -> SshdProcess:
        directory = tmp_path_factory.mktemp("more-sshd")
        directory.chmod(0o755)
        authorized = sshd.directory / "authorized_keys"
        server = SshdProcess(directory, free_port(), sshd.user, authorized, extra)
        made.append(server)
        server.start()
        return server

    try:
        yield make
    finally:
        for server in made:
            server.stop()


@pytest.fixture
def second_sshd(make_sshd: Callable[..., SshdProcess]) -> SshdProcess:
    """A GPU host's sshd (behind ``sshd``, used as the bastion)."""
    return make_sshd()


@pytest.fixture
def ptrace_python(sshd: Sshd) -> Iterator[str]:
    """A copy of python3 with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (file capabilities).

    The simulator finds a GPU's processes by reading /proc/PID/environ, which an
    unprivileged helper can only do for its own processes. Real NVML lists every
    user's processes; these two capabilities give the unprivileged helper the same
    view without the power to signal other users' processes (that needs CAP_KILL).
    """
    if shutil.which("setcap") is None:
        pytest.skip("setcap (libcap2-bin) not installed")
    root = Path(tempfile.mkdtemp(prefix="gputui-pycap-"))
    try:
        root.chmod(0o755)
        (root / "bin").mkdir(mode=0o755)
        python = root / "bin" / "python3"
        shutil.copy2(os.path.realpath(SYSTEM_PYTHON), python)
        python.chmod(0o755)
        # pyvenv.cfg makes the copy find the system standard library.
        (root / "pyvenv.cfg").write_text(f"home = {Path(SYSTEM_PYTHON).parent}\n")
        done = subprocess.run(
            ["setcap", "cap_sys_ptrace,cap_dac_read_search+ep", str(python)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"setcap failed: {done.stderr.decode(errors='replace').strip()}")
        yield str(python)
    finally:
        shutil.rmtree(root, ignore_errors=True)
