"""``gputui notify set|show|test|clear`` against a live head: what a user types and
reads, the URL read from standard input (never on the command line), nothing of a
token printed back."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from chatserver import ChatServer
from headthread import ThreadedHead

from gputui.cli import verbs
from gputui.config.notify import NotifyConfig
from gputui.scheduler.client.session import head_session

TOKEN = "cliTOKEN01234567"
SECRET = "cliSECRET"


@pytest.fixture
def chat() -> Any:
    with ChatServer() as server:
        yield server


def test_set_from_stdin_show_test_and_clear(
    tmp_path: Path,
    chat: ChatServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"{chat.base}/open-apis/bot/v2/hook/{TOKEN}"
    config = NotifyConfig(backoff_s=0.05, timeout_s=2.0, user_private=True)  # a loopback stand-in
    with (
        ThreadedHead(tmp_path, {"gpu01": 1}, notify=config) as th,
        head_session(str(th.sock), None) as head,
    ):

        def gputui(*argv: str, stdin: str = "") -> tuple[int, str, str]:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
            code = verbs.main(list(argv), backend=head)
            out = capsys.readouterr()
            return code, out.out, out.err

        code, out, err = gputui(
            "notify", "set", "-", "--secret", "-", "--events", "fail,end", "--name", "lab",
            stdin=f"{url}\n{SECRET}\n",
        )  # fmt: skip
        assert (code, err) == (0, "")
        assert out.splitlines() == [
            f"notify: lab: {chat.base}/open-apis/bot/v2/hook/cliT…, signed  [end,fail]",
            "notify: send a test with: gputui notify test",
        ]
        code, out, err = gputui("notify", "show")
        assert code == 0 and TOKEN not in out and SECRET not in out
        assert out.splitlines()[0].startswith(f"lab: {chat.base}/open-apis/bot/v2/hook/cliT…")
        assert out.splitlines()[-1] == ("head's outbox: 0 waiting, 0 sent, 0 given up, 0 dropped")
        assert gputui("notify", "test") == (
            0,
            f"sent: lab: {chat.base}/open-apis/bot/v2/hook/cliT…, signed  [end,fail]\n",
            "",
        )
        chat.mode = "down"
        code, out, err = gputui("notify", "test", "--name", "lab")
        assert (code, out.endswith(": feishu: HTTP 500\n")) == (1, True)
        code, out, err = gputui("notify", "set", "http://chat.example.com/x")
        assert (code, out) == (1, "")
        assert err == (
            "gputui notify: notify_set: url: http:// sends the token in clear:"
            " use https:// (http only to this machine)\n"
        )
        assert gputui("notify", "clear") == (0, "cleared: lab\n", "")
        code, out, err = gputui("notify", "test")
        assert (code, out) == (1, "")
        assert err == "gputui notify: you have no channel; set one: gputui notify set URL\n"
