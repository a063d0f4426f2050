"""``SimSshServer``: a small in-process SSH server that runs exec commands for real.

It behaves like sshd where the console can tell: host key, public-key auth for one
user and one key, and each exec request run as ``/bin/sh -c COMMAND`` with stdin,
stdout and stderr bridged to the channel. Shells and ptys are refused. It lets the
demo and the tests connect the real way without root or a system sshd, and lets
tests drop or freeze a host on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import signal
from collections.abc import Mapping
from typing import Any

import asyncssh

from gputui.common.tasks import within
from gputui.remote.sim.env import ENV_SCOPE

_CHUNK = 65536


def login_env(user: str, scope: str | None = None) -> dict[str, str]:
    """A small login-like environment, as sshd would give (no inherited secrets); the
    simulator's scope goes through (as sshd's ``SetEnv`` would pass it; see simenv):
    ``scope``, else this process's own."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.path.expanduser("~"),
        "USER": user,
        "LOGNAME": user,
        "SHELL": "/bin/sh",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    scope = scope or os.environ.get(ENV_SCOPE)
    if scope:
        env[ENV_SCOPE] = scope
    return env


class _Auth(asyncssh.SSHServer):
    def __init__(self, owner: SimSshServer) -> None:
        self._owner = owner
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._owner._conns.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._owner._conns.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        # Lets one server act as a ProxyJump bastion to the others on this machine.
        return self._owner.allow_forwarding and dest_host in ("127.0.0.1", "localhost")

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return (
            username == self._owner.user
            and key.public_data == self._owner.authorized_key.public_data
        )


class SimSshServer:
    """An SSH server on 127.0.0.1 for one user and one client key; exec only."""

    def __init__(
        self,
        authorized_key: asyncssh.SSHKey,
        *,
        host_key: asyncssh.SSHKey | None = None,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        allow_forwarding: bool = False,
    ) -> None:
        self.authorized_key = authorized_key
        self.allow_forwarding = allow_forwarding
        self.host_key = host_key or asyncssh.generate_private_key("ssh-ed25519")
        self.user = user or getpass.getuser()
        self.port = 0
        self._env = dict(env) if env is not None else login_env(self.user)
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._conns: set[asyncssh.SSHServerConnection] = set()
        self._procs: set[asyncio.subprocess.Process] = set()
        self._frozen = False

    @property
    def known_hosts_line(self) -> str:
        """This server's ``[127.0.0.1]:PORT`` known_hosts entry."""
        public = self.host_key.export_public_key().decode().strip()
        return f"[127.0.0.1]:{self.port} {public}\n"

    async def start(self) -> int:
        """Listen (on the previous port after a ``stop``); return the port."""
        self._acceptor = await asyncssh.create_server(
            lambda: _Auth(self),
            "127.0.0.1",
            self.port,
            server_host_keys=[self.host_key],
            process_factory=self._run,
            encoding=None,
            allow_pty=False,
            x11_forwarding=False,
            agent_forwarding=False,
            allow_scp=False,
            sftp_factory=None,
            keepalive_interval=0,
            reuse_address=True,
        )
        sockets = self._acceptor.sockets
        self.port = int(sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        """Stop listening and drop every connection abruptly, like a host going away."""
        if self._acceptor is not None:
            self._acceptor.close()
            with contextlib.suppress(Exception):
                await self._acceptor.wait_closed()
            self._acceptor = None
        for conn in list(self._conns):
            conn.abort()
        self._conns.clear()
        await self._kill_all()

    def freeze(self) -> None:
        """SIGSTOP every command: connections stay up but no data flows (a hung host)."""
        self._frozen = True
        self._signal_all(signal.SIGSTOP)

    def thaw(self) -> None:
        self._frozen = False
        self._signal_all(signal.SIGCONT)

    def command_pids(self) -> list[int]:
        """Process-group leaders of the commands running now (``/bin/sh`` or what it exec'd)."""
        return [p.pid for p in self._procs if p.returncode is None]

    def _signal_all(self, signum: int) -> None:
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signum)

    async def _kill_all(self) -> None:
        for proc in list(self._procs):
            await _kill(proc)
        self._procs.clear()

    async def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command
        if not command:
            process.stderr.write(b"this server runs commands only; no shell\n")
            process.exit(1)
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
                cwd=self._env.get("HOME", "/"),
                start_new_session=True,
            )
        except OSError as exc:
            process.stderr.write(f"cannot run command: {exc}\n".encode())
            process.exit(126)
            return
        self._procs.add(proc)
        if self._frozen:
            os.killpg(proc.pid, signal.SIGSTOP)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        loop = asyncio.get_running_loop()
        to_proc = loop.create_task(_pump_in(process.stdin, proc.stdin))
        outputs: asyncio.Future[Any] = asyncio.gather(
            _pump_out(proc.stdout, process.stdout), _pump_out(proc.stderr, process.stderr)
        )
        closed: asyncio.Future[Any] = loop.create_task(process.wait_closed())
        try:
            waiting: list[asyncio.Future[Any]] = [outputs, closed]
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if outputs in done:
                status = await proc.wait()
                process.exit(status if status >= 0 else 128 - status)
        finally:
            to_proc.cancel()
            closed.cancel()
            outputs.cancel()
            outputs.add_done_callback(_retrieve)  # no "exception never retrieved" noise
            await _kill(proc)
            self._procs.discard(proc)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _pump_in(source: asyncssh.SSHReader[bytes], sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        while True:
            data = await source.read(_CHUNK)
            if not data:
                break
            sink.write(data)
            await sink.drain()
    with contextlib.suppress(Exception):
        sink.close()


async def _pump_out(source: asyncio.StreamReader, sink: asyncssh.SSHWriter[bytes]) -> None:
    with contextlib.suppress(Exception):
        while True:
            data = await source.read(_CHUNK)
            if not data:
                return
            sink.write(data)
            await sink.drain()


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """End a command and everything it started (its process group)."""
    if proc.returncode is None:
        for signum in (signal.SIGCONT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signum)
        with contextlib.suppress(Exception):
            await within(proc.wait(), 5)
    else:
        # The leader exited; make sure nothing it left behind in its group survives.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
