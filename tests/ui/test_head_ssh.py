"""The head link through SSH: a real asyncssh server forwards the socket to a real head.

The console's ``head.socket`` names a path that is not on this machine, so the link
goes through SSH to ``head.host`` (host key checked against known_hosts, public-key
auth), asks that server for the socket, and speaks to the head over the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import asyncssh
from textual.message import Message

from gputui.cli.console_app import console_app
from gputui.config.models import Config, HeadConfig, HostConfig, SshDefaults
from gputui.scheduler.client.telemetry import HeadTelemetry
from gputui.ui.head.link import HeadLink, HeadState, HeadUnreachable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head
from ui_helpers import until

FAR_SOCKET = "/nonexistent-gputui-head/head.sock"


class _Server(asyncssh.SSHServer):
    def __init__(
        self, key: asyncssh.SSHKey, real: Path, asked: list[str], made: list[Any] | None = None
    ) -> None:
        self.key, self.real, self.asked, self.made = key, real, asked, made

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        if self.made is not None:
            self.made.append(conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return key.public_data == self.key.public_data

    def unix_connection_requested(self, dest_path: str) -> Any:
        self.asked.append(dest_path)
        if dest_path != FAR_SOCKET:
            return False
        real = self.real

        async def bridge(reader: asyncssh.SSHReader[bytes], writer: Any) -> None:
            head_reader, head_writer = await asyncio.open_unix_connection(str(real))

            async def pipe(src: Any, dst: Any) -> None:
                with contextlib.suppress(Exception):
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                with contextlib.suppress(Exception):
                    dst.write_eof()

            await asyncio.gather(pipe(reader, head_writer), pipe(head_reader, writer))
            writer.close()

        return bridge


async def _ssh_server(
    tmp: Path, real: Path, asked: list[str], made: list[Any] | None = None
) -> tuple[Any, Config]:
    """An SSH server to the head's socket ``real``; ``asked``: the sockets asked
    for, ``made``: the SSH connections it accepted."""
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = tmp / "id_ed25519"
    client_key.write_private_key(str(key_path))
    key_path.chmod(0o600)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.create_server(
        lambda: _Server(client_key, real, asked, made),
        "127.0.0.1",
        0,
        server_host_keys=[host_key],
        encoding=None,
    )
    port = server.sockets[0].getsockname()[1]
    known = tmp / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
    config = Config(
        defaults=SshDefaults(ssh_config=None, user=getpass.getuser()),
        hosts=[
            HostConfig(
                name="headbox",
                address="127.0.0.1",
                port=port,
                identity_file=str(key_path),
                known_hosts=str(known),
            )
        ],
        head=HeadConfig(host="headbox", socket=FAR_SOCKET),
    )
    return server, config


async def _until(messages: list[Message], kind: type, timeout: float = 15.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = [m for m in messages if isinstance(m, kind)]
        if found:
            return found[-1]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no {kind.__name__} in {timeout} s: {messages}")
        await asyncio.sleep(0.02)


async def test_the_link_reaches_the_head_through_ssh(tmp_path: Path) -> None:
    asked: list[str] = []
    async with running_head(tmp_path, {"gpu01": 2}) as (_head, _hosts, sock):
        server, config = await _ssh_server(tmp_path, sock, asked)
        messages: list[Message] = []
        link = HeadLink(config, messages.append, backoff_first=0.05, backoff_cap=0.2)
        task = asyncio.create_task(link.run())
        try:
            state = await _until(messages, HeadState)
            assert asked == [FAR_SOCKET]
            assert len(state.view.gpus) == 2
            claim = await link.ask("claim", lambda b: b.claim(gpus=1, wait=False))
            assert claim["claim"]["state"] == "active"
            assert link.where() == f"headbox:{FAR_SOCKET}"
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            server.close()


async def test_a_console_through_ssh_is_one_ssh_connection(tmp_path: Path) -> None:
    """The console as ``gputui`` builds it, its head on another machine: its control
    session and its telemetry stream ride one SSH connection, one socket channel in
    it, one connection at the head."""
    asked: list[str] = []
    made: list[Any] = []
    async with running_head(tmp_path, {"gpu01": 2}) as (head, _hosts, sock):
        server, config = await _ssh_server(tmp_path, sock, asked, made)
        app = console_app(config, config.theme)
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                link, stream = app.head.link, app.source
                assert link is not None and isinstance(stream, HeadTelemetry)

                def flowing() -> bool:
                    return link.connected and stream.pushes > 0

                await until(pilot, flowing, "the state and the telemetry through SSH")
                claim = await link.ask("claim", lambda b: b.claim(gpus=1, wait=False))
                assert claim["claim"]["state"] == "active"
                assert len(made) == 1
                assert asked == [FAR_SOCKET]
                assert head.connections_served == 1
        finally:
            server.close()


async def test_an_unknown_host_key_is_said_and_requests_say_why(tmp_path: Path) -> None:
    asked: list[str] = []
    async with running_head(tmp_path, {"gpu01": 1}) as (_head, _hosts, sock):
        server, config = await _ssh_server(tmp_path, sock, asked)
        (tmp_path / "known_hosts").write_text("")  # nothing vouches for the server's key
        messages: list[Message] = []
        link = HeadLink(config, messages.append, backoff_first=0.05, backoff_cap=0.2)
        task = asyncio.create_task(link.run())
        try:
            down = await _until(messages, HeadUnreachable)
            assert "ssh 127.0.0.1" in down.reason and "host key" in down.reason, down.reason
            assert asked == []
            try:
                await link.ask("claim", lambda b: b.claim(gpus=1))
            except Exception as exc:
                assert "head unreachable (ssh 127.0.0.1" in str(exc)
            else:
                raise AssertionError("a request while the head is unreachable went through")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            server.close()


async def _wait(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: not in {timeout} s")
        await asyncio.sleep(0.05)


def _hosts_yaml(tmp: Path, config: Config) -> Path:
    """The same configuration as a file, for a CLI process to read."""
    host = config.hosts[0]
    path = tmp / "hosts.yaml"
    path.write_text(
        json.dumps(
            {
                "defaults": {"ssh_config": None, "user": getpass.getuser()},
                "hosts": [
                    {
                        "name": host.name,
                        "address": host.address,
                        "port": host.port,
                        "identity_file": host.identity_file,
                        "known_hosts": host.known_hosts,
                    }
                ],
                "head": {"host": "headbox", "socket": FAR_SOCKET},
            }
        )
    )
    return path


async def _cli(hosts: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUTUI_HEAD_SOCKET"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gputui.entry", "--hosts", str(hosts), *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_cli_reaches_a_head_on_another_machine_through_ssh(tmp_path: Path) -> None:
    asked: list[str] = []
    async with running_head(tmp_path, {"gpu01": 2}) as (head, _hosts, sock):
        server, config = await _ssh_server(tmp_path, sock, asked)
        hosts = _hosts_yaml(tmp_path, config)
        try:
            code, out, err = await _cli(hosts, "submit", "--json", "-g", "1", "--", "train.py")
            assert code == 0, err
            job = json.loads(out)
            assert asked and set(asked) == {FAR_SOCKET}  # it went through SSH
            code, out, err = await _cli(hosts, "queue", "--json")
            assert code == 0, err
            assert [j["id"] for j in json.loads(out)] == [job["id"]]
            with head.store.snapshot() as tx:
                stored = tx.job(job["id"])
                assert stored is not None and stored.user == getpass.getuser()
            # gputui run over SSH, then kill -9 of it: the channel drops, the GPUs come back.
            marker = tmp_path / "started"
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gputui.entry", "--hosts", str(hosts), "run", "-g", "1",
                "--host", "gpu01", "--", sys.executable, "-c",
                f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(60)",
                env={k: v for k, v in os.environ.items() if k != "GPUTUI_HEAD_SOCKET"},
                start_new_session=True,
            )  # fmt: skip
            try:
                await _wait(marker.exists, "the command to start")
                with head.store.snapshot() as tx:
                    assert [c.state for c in tx.claims(("active",))] == ["active"]
                run.kill()
                await run.wait()

                def released() -> bool:
                    with head.store.snapshot() as tx:
                        return not tx.claims(("active", "waiting"))

                await _wait(released, "the claim to be released")
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.pid, signal.SIGKILL)
            # A host key nobody vouches for: one line, the unreachable exit status.
            (tmp_path / "known_hosts").write_text("")
            code, out, err = await _cli(hosts, "queue")
            assert code == 3 and out == "", (code, out, err)
            assert err.startswith("gputui queue: ssh 127.0.0.1:") and "host key" in err, err
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        finally:
            server.close()


CONNECTIONS: dict[str, list[Any]] = {}
"""Each test server's connections, by name, to cut them as a dying host does."""


class _Either(_Server):
    """A head's host that serves the socket only while ``serving[name]`` (a standby
    serves none: sshd then refuses the channel, as OpenSSH does for a missing socket)."""

    def __init__(self, name: str, serving: dict[str, bool], *args: Any) -> None:
        super().__init__(*args)
        self.name, self.serving = name, serving

    def connection_made(self, conn: Any) -> None:
        CONNECTIONS.setdefault(self.name, []).append(conn)

    def unix_connection_requested(self, dest_path: str) -> Any:
        if not self.serving[self.name]:
            self.asked.append(f"{self.name}: refused")
            return False
        self.asked.append(self.name)
        return super().unix_connection_requested(dest_path)


async def test_the_link_finds_the_leader_of_two_heads_and_follows_a_takeover(
    tmp_path: Path,
) -> None:
    """``head.host`` lists both heads: the link tries them in order and keeps the one
    that serves; when that one goes, it reconnects to the other once it serves."""
    asked: list[str] = []
    serving = {"first": False, "second": True}
    async with running_head(tmp_path, {"gpu01": 2}) as (_head, _hosts, sock):
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        key_path = tmp_path / "id_ed25519"
        client_key.write_private_key(str(key_path))
        key_path.chmod(0o600)
        known = tmp_path / "known_hosts"
        servers, entries = [], []
        for name in serving:
            host_key = asyncssh.generate_private_key("ssh-ed25519")
            server = await asyncssh.create_server(
                lambda name=name: _Either(name, serving, client_key, sock, asked),
                "127.0.0.1",
                0,
                server_host_keys=[host_key],
                encoding=None,
            )
            port = server.sockets[0].getsockname()[1]
            with known.open("a") as f:
                f.write(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
            servers.append(server)
            entries.append(
                HostConfig(
                    name=name,
                    address="127.0.0.1",
                    port=port,
                    identity_file=str(key_path),
                    known_hosts=str(known),
                )
            )
        config = Config(
            defaults=SshDefaults(ssh_config=None, user=getpass.getuser()),
            hosts=entries,
            head=HeadConfig(host=["first", "second"], socket=FAR_SOCKET),
        )
        messages: list[Message] = []
        link = HeadLink(config, messages.append, backoff_first=0.05, backoff_cap=0.2)
        task = asyncio.create_task(link.run())
        try:
            await _until(messages, HeadState)
            assert asked == ["first: refused", "second", FAR_SOCKET]
            assert link.where() == f"first,second:{FAR_SOCKET}"
            # The second head dies (its host with it); the first takes over.
            serving.update(first=True, second=False)
            messages.clear()
            servers[1].close()
            for conn in CONNECTIONS.pop("second", []):
                conn.abort()
            await _until(messages, HeadUnreachable)
            state = await _until(messages, HeadState)
            assert len(state.view.gpus) == 2
            assert asked[-2:] == ["first", FAR_SOCKET]
            claim = await link.ask("claim", lambda b: b.claim(gpus=1, wait=False))
            assert claim["claim"]["state"] == "active"
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for server in servers:
                server.close()
            CONNECTIONS.clear()
