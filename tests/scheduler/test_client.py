"""The CLI's blocking client: where it finds the head, and what it does when the
connection drops (a real Unix socket served by a thread that hangs up)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.scheduler.client import HeadClient, HeadError, head_place, is_local_name


class HangingUp:
    """Accepts connections, reads one line each, and hangs up without an answer."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.lines: list[dict[str, object]] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as f:
                line = f.readline()
                if line:
                    self.lines.append(json.loads(line))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def hanging(tmp_path: Path) -> Iterator[HangingUp]:
    server = HangingUp(tmp_path / "head.sock")
    yield server
    server.close()


def test_a_dropped_mutating_request_is_sent_again_once_with_the_same_id(
    hanging: HangingUp, tmp_path: Path
) -> None:
    with HeadClient(tmp_path / "head.sock", timeout=5) as client, pytest.raises(HeadError) as e:
        client.call("submit", {"argv": ["t"]})
    assert e.value.code == "unreachable" and "lost the head while asking submit" in e.value.message
    assert [line["op"] for line in hanging.lines] == ["submit", "submit"]
    assert hanging.lines[0]["rid"] == hanging.lines[1]["rid"]


def test_a_run_claim_is_never_sent_again_on_a_new_connection(
    hanging: HangingUp, tmp_path: Path
) -> None:
    """It belongs to the connection it was made on: a replayed answer would name GPUs
    the head takes back when that connection ends."""
    with HeadClient(tmp_path / "head.sock", timeout=5) as client, pytest.raises(HeadError):
        client.call("claim", {"gpus": 1, "session": True}, retry=False)
    assert [line["op"] for line in hanging.lines] == ["claim"]


def test_a_subscription_that_drops_is_a_head_error(hanging: HangingUp, tmp_path: Path) -> None:
    with HeadClient(tmp_path / "head.sock", timeout=5) as client:
        client.connect()
        assert client._sock is not None
        client._sock.sendall(b'{"id": 1, "op": "subscribe", "args": {}}\n')
        with pytest.raises(HeadError) as e:
            next(client.pushes())
    assert e.value.code == "unreachable"


def _hosts(path: Path, host: str) -> Path:
    path.write_text(json.dumps({"head": {"host": host, "socket": "/nonexistent/head.sock"}}))
    return path


def test_a_trusted_hosts_file_sends_the_cli_over_ssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any file the search trusts (yours or root's, written by nobody else; a stranger's
    is skipped, see tests/unit/test_locations_users.py) gives the SSH route."""
    monkeypatch.delenv("GPUTUI_HEAD_SOCKET", raising=False)
    monkeypatch.delenv("GPUTUI_HOSTS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.config/gputui/hosts.yaml
    monkeypatch.chdir(tmp_path)
    here = _hosts(tmp_path / "hosts.yaml", "headbox")
    here.chmod(0o644)
    assert head_place() == (Path("/nonexistent/head.sock"), Path("hosts.yaml"))
    assert head_place(config_file=str(here)) == (Path("/nonexistent/head.sock"), here)
    monkeypatch.setenv("GPUTUI_HOSTS", str(here))
    assert head_place()[1] == here
    assert head_place("/run/x.sock") == (Path("/run/x.sock"), None)


@pytest.mark.parametrize(
    ("host", "local"),
    [("node1", True), ("node1.example.com", True), ("NODE1", True), ("localhost", True),
     ("127.0.0.1", True), ("node2", False), ("node2.example.com", False)],
)  # fmt: skip
def test_the_head_host_is_this_machine_by_short_name_or_fqdn(
    host: str, local: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "node1.example.com")
    assert is_local_name(host) is local


@pytest.mark.parametrize(
    "text",
    ["head: [unclosed\n", 'head:\n  host: "evil\\x1b[2J"\n', "a: 1\na: 2\n", "x" * (1 << 20 + 1)],
)
def test_a_broken_hosts_file_is_one_line_naming_it(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUTUI_HEAD_SOCKET", raising=False)
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    with pytest.raises(HeadError) as e:
        head_place(config_file=str(path))
    assert e.value.code == "config" and str(path) in e.value.message
    assert "\x1b" not in e.value.message and "\n" not in e.value.message


def test_with_a_standby_listed_the_cli_tries_the_socket_here_then_the_heads_over_ssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``head.host`` lists two heads: the socket here when one serves it (this is
    the leader's machine), else SSH to each head in turn (this is the standby's, or
    the leader left a dead socket behind)."""
    from gputui.scheduler.client.session import _over_ssh

    monkeypatch.delenv("GPUTUI_HEAD_SOCKET", raising=False)
    sock = tmp_path / "head.sock"
    path = tmp_path / "hosts.yaml"
    path.write_text(
        json.dumps(
            {
                "defaults": {"ssh_config": None, "connect_timeout": 2},
                "head": {"host": ["localhost", "127.0.0.1:1"], "socket": str(sock)},
            }
        )
    )
    path.chmod(0o644)
    assert head_place(config_file=str(path)) == (sock, path)
    opener = _over_ssh(path, sock)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(sock))
        server.listen(1)
        here = opener()  # the leader on this machine
        accepted, _ = server.accept()
        accepted.close()
        here.close()
    assert sock.exists()  # left behind by a head that is gone
    with pytest.raises(HeadError) as gone:
        opener()
    assert gone.value.code == "unreachable" and "ssh 127.0.0.1:1" in gone.value.message


async def test_the_console_reaches_the_head_by_the_same_rule_and_names_each_way_it_tried(
    tmp_path: Path,
) -> None:
    """``reach.open_head`` (the console, its telemetry, the Slurm relay): the socket
    here, then each head over SSH; when none answers, one line naming each."""
    from gputui.config.models import Config
    from gputui.scheduler.client.reach import open_head

    sock = tmp_path / "head.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.bind(str(sock))  # left behind by a head that is gone
    defaults = {"ssh_config": None, "connect_timeout": 2}
    alone = Config.model_validate({"defaults": defaults, "head": {"socket": str(sock)}})
    with pytest.raises(HeadError) as one:
        await open_head(alone)
    assert one.value.message == f"nobody is listening (a head that stopped?) ({sock})"
    two = Config.model_validate(
        {"defaults": defaults, "head": {"host": ["localhost", "127.0.0.1:1"], "socket": str(sock)}}
    )
    with pytest.raises(HeadError) as each:
        await open_head(two)
    here, there = each.value.message.split("; ")
    assert here == f"nobody is listening (a head that stopped?) ({sock})"
    assert there.startswith("ssh 127.0.0.1:1: ")
    assert "\n" not in each.value.message
