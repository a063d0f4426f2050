"""Notices in the team's chat, end to end: a live head sends its stored notices to a
local HTTP server standing in for Slack (through apprise), Feishu and DingTalk (our
own signed senders), which checks each payload and signature; a channel that is
down is retried, then given up with an audit row; one that hangs never delays the
scheduler; a restart sends what was not sent."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from apprise.plugins.slack import NotifySlack
from chatserver import ChatServer, Heard
from headthread import LineClient, ThreadedHead, poll, refusal

from gputui.config.notify import NotifyConfig
from gputui.scheduler.head.actions import run_key

FEISHU_TOKEN = "fsTOKEN0123456789"
FEISHU_SECRET = "fsSECRETabcdef"
DING_TOKEN = "dtTOKEN0123456789"
DING_SECRET = "SECdingSECRET987"
SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7"
FAST = {"backoff_s": 0.05, "backoff_max_s": 0.2, "timeout_s": 2.0}
"""(The stand-in chat server is on loopback: ``user_private`` lets users reach it.)"""
PRIVATE = {"user_private": True}


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Any:
    with ChatServer() as server:
        # apprise's Slack plugin posts to hooks.slack.com: here, to the stand-in.
        monkeypatch.setattr(NotifySlack, "webhook_url", f"{server.base}/services")
        yield server


def _feishu(chat: ChatServer) -> str:
    return f"{chat.base}/open-apis/bot/v2/hook/{FEISHU_TOKEN}"


def _ding(chat: ChatServer) -> str:
    return f"{chat.base}/robot/send?access_token={DING_TOKEN}"


def _run_one(th: ThreadedHead, c: LineClient, exit_code: int = 0) -> int:
    """A job that starts and ends (``exit_code``); its id."""
    job = int(c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"])
    poll(lambda: c.ok("show", {"job_id": job})["job"]["state"] == "running", what="running")
    key = run_key(job, 1)
    th.in_loop(lambda: th.hosts.finish("gpu01", key, exit_code) if th.hosts else None)
    poll(lambda: c.ok("show", {"job_id": job})["job"]["state"] != "running", what="its end")
    return job


def _text(heard: Heard) -> str:
    body = heard.body
    if heard.path.startswith("/open-apis/"):
        return str(body["content"]["text"])
    if heard.path.startswith("/robot/"):
        return str(body["text"]["content"])
    return json.dumps(body)


def test_each_chat_gets_the_stored_notices_signed_as_its_docs_say(
    tmp_path: Path, chat: ChatServer
) -> None:
    with (
        ThreadedHead(tmp_path, {"gpu01": 2}, notify=NotifyConfig(**PRIVATE, **FAST)) as th,
        LineClient(th.sock) as c,
    ):
        c.ok("notify_set", {"url": _feishu(chat), "secret": FEISHU_SECRET, "name": "fs"})
        c.ok("notify_set", {"url": _ding(chat), "secret": DING_SECRET, "name": "ding"})
        c.ok("notify_set", {"url": SLACK, "name": "slack", "events": ["end", "fail"]})
        job = _run_one(th, c)
        fail = _run_one(th, c, exit_code=3)
        shown = c.ok("notify_show")
        heard = chat.wait(
            lambda h: sum(f"job {fail} " in _text(x) and "failed" in _text(x) for x in h) == 3,
            what="the failure on all three",
        )
        poll(lambda: th.rows("SELECT count(*) FROM notify_sent") == [(10,)], what="settled")
    # Feishu: timestamp (s) and sign in the body; sign = b64(HMAC-SHA256(key=ts\nsecret, "")).
    feishu = [h for h in heard if h.path == f"/open-apis/bot/v2/hook/{FEISHU_TOKEN}"]
    assert [("started" in _text(h), "completed" in _text(h)) for h in feishu[:2]] == [
        (True, False),
        (False, True),
    ]
    for h in feishu:
        stamp = int(h.body["timestamp"])
        assert abs(stamp - time.time()) < 120
        key = f"{stamp}\n{FEISHU_SECRET}".encode()
        want = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
        assert h.body["sign"] == want
        assert h.body["msg_type"] == "text"
        assert f"job {job} " in _text(feishu[0]) and _text(feishu[0]).startswith("gputui: start")
    # DingTalk: timestamp (ms) and sign in the query; sign = b64(HMAC(key=secret, ts\nsecret)).
    ding = [h for h in heard if h.path == "/robot/send"]
    assert len(ding) == 4  # start, end, start, fail
    for h in ding:
        assert h.query["access_token"] == [DING_TOKEN]
        stamp = int(h.query["timestamp"][0])
        assert abs(stamp / 1000 - time.time()) < 120
        text = f"{stamp}\n{DING_SECRET}".encode()
        want = base64.b64encode(hmac.new(DING_SECRET.encode(), text, hashlib.sha256).digest())
        assert unquote(h.query["sign"][0]) == want.decode()
        assert h.body["msgtype"] == "text"
    # Slack, through apprise, only for the events asked: the end and the failure.
    slack = [h for h in heard if h.path.startswith("/services/")]
    assert [h.path for h in slack] == ["/services/T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7"] * 2
    assert "completed" in _text(slack[0]) and "failed" in _text(slack[1])
    assert "gputui: end" in _text(slack[0]) and "gputui: fail" in _text(slack[1])
    # Never shown back in full: no token, no secret in what the head answers.
    said = json.dumps(shown)
    for secret in (FEISHU_TOKEN, FEISHU_SECRET, DING_TOKEN, DING_SECRET, "TIiajkdnlazkcOXrIdevi7"):
        assert secret not in said
    assert {c["name"]: c["signed"] for c in shown["channels"]} == {
        "fs": True,
        "ding": True,
        "slack": False,
    }
    settled = th.rows("SELECT state, count(*) FROM notify_sent GROUP BY state")
    assert settled == [("sent", 10)]


def test_a_channel_that_is_down_is_retried_then_given_up_with_an_audit_row(
    tmp_path: Path, chat: ChatServer
) -> None:
    chat.mode = "down"
    config = NotifyConfig(tries=3, **PRIVATE, **FAST)
    with ThreadedHead(tmp_path, {"gpu01": 2}, notify=config) as th, LineClient(th.sock) as c:
        c.ok("notify_set", {"url": _feishu(chat), "events": ["start"]})
        job = int(c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"])
        poll(
            lambda: th.rows("SELECT state, tries FROM notify_sent") == [("failed", 3)],
            what="the delivery given up",
        )
        (audit,) = th.rows(
            "SELECT user, action, target, outcome, reason FROM audit WHERE action = 'notify'"
        )
        assert c.ok("show", {"job_id": job})["job"]["state"] == "running"
    assert len(chat.heard) == 3  # tried three times, never a fourth
    gaps = [b.at - a.at for a, b in zip(chat.heard, chat.heard[1:], strict=False)]
    assert gaps[0] >= 0.04 and gaps[1] >= 0.09  # backed off, doubling
    user, action, target, outcome, reason = audit
    assert (user, action, outcome) == ("gputui-head", "notify", "failed: given up after 3 tries")
    assert reason == "feishu: HTTP 500"
    assert FEISHU_TOKEN not in target and "fsTO…" in target
    # The notice itself is kept: the user still reads it.
    assert th.rows("SELECT kind FROM notice WHERE job_id = ?", job) == [("started",)]


def test_a_hung_channel_never_delays_the_scheduler(tmp_path: Path, chat: ChatServer) -> None:
    chat.mode = "hang"
    config = NotifyConfig(senders=2, tries=1, backoff_s=0.05, timeout_s=30.0, **PRIVATE)
    with ThreadedHead(tmp_path, {"gpu01": 8}, notify=config) as th, LineClient(th.sock) as c:
        c.ok("notify_set", {"url": _feishu(chat), "name": "fs"})
        c.ok("notify_set", {"url": _ding(chat), "name": "ding"})
        c.ok("submit", {"argv": ["train"], "gpus": 1})
        chat.wait(lambda _h: chat.hanging >= 2, what="both senders hung")
        answered = []
        for _ in range(6):  # each submit is a batch and a scheduling pass
            began = time.monotonic()
            job = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
            poll(lambda j=job: c.ok("show", {"job_id": j})["job"]["state"] == "running")
            answered.append(time.monotonic() - began)
        poll(lambda: th.head is not None and th.head.chat.waiting() >= 12, what="12 waiting")
        chat.release()
    assert max(answered) < 5.0, answered  # a send hangs for 30 s: none of it was waited on


def test_a_full_queue_drops_the_oldest_counted_and_audited(
    tmp_path: Path, chat: ChatServer
) -> None:
    chat.mode = "hang"
    config = NotifyConfig(
        senders=1, queue_max=2, tries=1, backoff_s=0.05, timeout_s=30.0, **PRIVATE
    )
    with ThreadedHead(tmp_path, {"gpu01": 8}, notify=config) as th, LineClient(th.sock) as c:
        c.ok("notify_set", {"url": _feishu(chat), "events": ["start"]})
        c.ok("submit", {"argv": ["train"], "gpus": 1})
        chat.wait(lambda _h: chat.hanging == 1, what="the first start in flight, hung")
        for _ in range(4):  # two waiting, and the two oldest of them dropped
            c.ok("submit", {"argv": ["train"], "gpus": 1})
        poll(lambda: th.head is not None and th.head.chat.dropped == 2, what="two dropped")
        poll(lambda: len(th.rows("SELECT 1 FROM audit WHERE action = 'notify'")) == 2)
        rows = th.rows("SELECT outcome, owner FROM audit WHERE action = 'notify'")
        assert c.ok("notify_show")["outbox"] == {
            "waiting": 2,
            "sent": 0,
            "failed": 0,
            "dropped": 2,
        }
        chat.release()
    assert rows == [("dropped: dropped after 0 tries", "root")] * 2
    started = [n for (n,) in th.rows("SELECT id FROM notice WHERE kind = 'started' ORDER BY id")]
    dropped = th.rows("SELECT notice_id FROM notify_sent WHERE state = 'dropped' ORDER BY 1")
    assert [n for (n,) in dropped] == started[1:3]  # the oldest two that waited


def test_a_restart_sends_what_was_not_sent(tmp_path: Path, chat: ChatServer) -> None:
    chat.mode = "down"
    slow = NotifyConfig(tries=20, backoff_s=60.0, backoff_max_s=60.0, timeout_s=2.0, **PRIVATE)
    with ThreadedHead(tmp_path, {"gpu01": 2}, notify=slow) as th, LineClient(th.sock) as c:
        c.ok("notify_set", {"url": _ding(chat), "events": ["start"]})
        job = int(c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"])
        chat.wait(lambda h: len(h) == 1, what="the first try")
    assert th.rows("SELECT * FROM notify_sent") == []  # not settled: still to send
    chat.mode = "ok"
    with ThreadedHead(tmp_path, {"gpu01": 2}, notify=NotifyConfig(**PRIVATE, **FAST)) as th:
        heard = chat.wait(lambda h: len(h) == 2, what="the send after the restart")
        poll(lambda: th.rows("SELECT state FROM notify_sent") == [("sent",)], what="settled")
    assert f"job {job} " in _text(heard[1]) and "started" in _text(heard[1])


def test_set_show_test_clear_are_the_callers_own(tmp_path: Path, chat: ChatServer) -> None:
    with (
        ThreadedHead(tmp_path, {"gpu01": 1}, notify=NotifyConfig(**PRIVATE, **FAST)) as th,
        LineClient(th.sock) as c,
    ):
        assert refusal(c.ask("notify_test"))[0] == "no-channel"
        code, line = refusal(c.ask("notify_set", {"url": "nonsense://token"}))
        assert (code, line) == (
            "bad-args",
            "notify_set: url: apprise does not know this URL (see its services)",
        )
        code, line = refusal(c.ask("notify_set", {"url": "http://example.com/hook"}))
        assert "http:// sends the token in clear" in line
        code, line = refusal(c.ask("notify_set", {"url": SLACK, "events": ["start", "x"]}))
        assert line.startswith("notify_set: events: 'x' not known")
        c.ok("notify_set", {"url": _feishu(chat), "secret": FEISHU_SECRET})
        result = c.ok("notify_test")["results"]
        assert [(r["name"], r["ok"], r["error"]) for r in result] == [("default", True, None)]
        assert "gputui notify test" in _text(chat.heard[-1])
        chat.mode = "down"
        result = c.ok("notify_test")["results"]
        assert [(r["ok"], r["error"]) for r in result] == [(False, "feishu: HTTP 500")]
        assert c.ok("notify_clear")["cleared"] == ["default"]
        assert c.ok("notify_show")["channels"] == []
        assert th.rows("SELECT count(*) FROM notify_channel") == [(0,)]


def test_a_head_may_bound_what_users_set(tmp_path: Path, chat: ChatServer) -> None:
    config = NotifyConfig(user_schemes=["http", "slack"], user_channels_max=2, **PRIVATE, **FAST)
    with (
        ThreadedHead(tmp_path, {"gpu01": 1}, notify=config) as th,
        LineClient(th.sock) as c,
    ):
        assert refusal(c.ask("notify_set", {"url": "mailto://u:p@example.com"})) == (
            "refused",
            "this head takes channels of http, slack only (notify: user_schemes), not mailto://",
        )
        c.ok("notify_set", {"url": SLACK, "name": "a"})
        c.ok("notify_set", {"url": _feishu(chat), "name": "b"})
        c.ok("notify_set", {"url": _ding(chat), "name": "b"})  # replacing one is no more
        assert refusal(c.ask("notify_set", {"url": _ding(chat), "name": "c"})) == (
            "refused",
            "you have 2 channels, the most this head keeps for one user"
            " (gputui notify clear --name NAME)",
        )
        assert [ch["name"] for ch in c.ok("notify_show")["channels"]] == ["a", "b"]
    off = NotifyConfig(user_channels=False)
    with ThreadedHead(tmp_path, {"gpu01": 1}, notify=off) as th, LineClient(th.sock) as c:
        code, line = refusal(c.ask("notify_set", {"url": SLACK}))
        assert (code, line) == (
            "refused",
            "this head takes no user channels (notify: user_channels)",
        )


def test_a_hung_channel_holds_up_only_itself_and_each_gets_its_notices_in_order(
    tmp_path: Path, chat: ChatServer
) -> None:
    chat.hang_prefix = "/open-apis/"
    config = NotifyConfig(senders=2, tries=1, backoff_s=0.05, timeout_s=30.0, **PRIVATE)
    with (
        ThreadedHead(tmp_path, {"gpu01": 8}, notify=config) as th,
        LineClient(th.sock) as c,
    ):
        c.ok("notify_set", {"url": _feishu(chat), "name": "fs"})
        c.ok("notify_set", {"url": _ding(chat), "name": "ding"})
        jobs = [_run_one(th, c) for _ in range(3)]
        heard = chat.wait(lambda h: len([x for x in h if x.path == "/robot/send"]) == 6)
        assert chat.hanging == 1  # one send to the hung channel, the rest wait behind it
        assert th.head is not None and th.head.chat.waiting() == 5
        chat.release()
        chat.wait(lambda h: len(h) == 12, what="the hung channel's, once it answers")
        poll(lambda: th.rows("SELECT count(*) FROM notify_sent") == [(12,)], what="settled")
    ding = [_text(h) for h in heard if h.path == "/robot/send"]
    feishu = [_text(h) for h in chat.heard if h.path.startswith("/open-apis/")]
    want = [f"job {j} (train) {what}" for j in jobs for what in ("started", "completed")]
    for texts in (ding, feishu):
        assert [next(w for w in want if w in t) for t in texts] == want  # in order
