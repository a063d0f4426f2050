"""A sender that raises what it should not (a bug in apprise or a plugin) fails that
one send, and the head logs one masked line: an exception's text, and a traceback's
frames, can hold the channel's URL with its token. The chat service is a stand-in
function (the sender seam) on a real head."""

from __future__ import annotations

from pathlib import Path

from headthread import LineClient, ThreadedHead, poll

from gputui.config.notify import NotifyConfig
from gputui.scheduler.head.chat.senders import Channel

TOKEN = "tkSECRETxyz0123456789"
URL = f"json://chat.example.com/hooks/{TOKEN}?apikey={TOKEN}"


def _buggy(channel: Channel, _title: str, _body: str, _timeout: float) -> None:
    raise RuntimeError(f"cannot post to {channel.url} (token {TOKEN}, key {TOKEN[2:]})")


def test_a_senders_bug_is_one_masked_line_in_the_heads_log(tmp_path: Path) -> None:
    with (
        ThreadedHead(tmp_path, {"gpu01": 1}, notify=NotifyConfig(timeout_s=2.0)) as th,
        LineClient(th.sock) as c,
    ):
        assert th.head is not None
        head = th.head
        th.in_loop(lambda: setattr(head.chat, "_send", _buggy))
        c.ok("notify_set", {"url": URL, "name": "lab"})
        results = c.ok("notify_test")["results"]
        assert [(r["name"], r["ok"], r.get("error")) for r in results] == [
            ("lab", False, "RuntimeError while sending")
        ]
        poll(lambda: any("chat: send to" in p for p in th.problems), what="the head's log line")
    lines = [p for p in th.problems if "chat: send to" in p]
    assert len(lines) == 1, th.problems
    assert lines[0].startswith("gputui.scheduler.head.chat.outbox: WARNING chat: send to ")
    assert "[with traceback]" not in lines[0]
    assert ": RuntimeError: cannot post to … (token tkSE…, key SECR…)" in lines[0]
    assert "\n" not in lines[0]
    for problem in th.problems:
        assert TOKEN not in problem and TOKEN[2:] not in problem and TOKEN[:12] not in problem
