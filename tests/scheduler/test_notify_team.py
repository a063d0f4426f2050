"""Team channels (hosts.yaml ``notify:``) and the events that became notices for the
chat: a claim about to be released, and released; a URL kept in a file only the
head may read."""

from __future__ import annotations

import grp
import os
from pathlib import Path
from typing import Any

import pytest
from chatserver import ChatServer
from headthread import LineClient, ThreadedHead, poll

from gputui.config.notify import NotifyConfig, TeamChannel
from gputui.scheduler.head.chat.channels import resolve_team
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Notice, NotifyChannel, NotifySent

TOKEN = "teamTOKEN0123456"
FAST = {"backoff_s": 0.05, "backoff_max_s": 0.2, "timeout_s": 2.0}


@pytest.fixture
def chat() -> Any:
    with ChatServer() as server:
        yield server


def _url(chat: ChatServer) -> str:
    return f"{chat.base}/open-apis/bot/v2/hook/{TOKEN}"


def test_a_team_channel_gets_its_groups_notices_and_a_claim_is_warned_then_released(
    tmp_path: Path, chat: ChatServer
) -> None:
    root_group = grp.getgrgid(os.getgid()).gr_name
    teams = [
        TeamChannel(name="lab", url=_url(chat), group=root_group, events=["claim"]),
        TeamChannel(name="others", url=f"{_url(chat)}X", group="no-such-group-here"),
    ]
    config = NotifyConfig(channels=teams, **FAST)
    with (
        ThreadedHead(tmp_path, {"gpu01": 2}, notify=config) as th,
        LineClient(th.sock) as c,
    ):
        shown = c.ok("notify_show")["channels"]
        assert [(s["name"], s["team"]) for s in shown] == [("lab", True)]  # not "others"
        assert TOKEN not in str(shown)
        claim = c.ok("claim", {"gpus": 1, "duration_s": 2.0})["claim"]["id"]
        heard = chat.wait(lambda h: len(h) == 2, what="the warning and the release")
        poll(lambda: th.rows("SELECT count(*) FROM notify_sent") == [(2,)], what="settled")
    texts = [h.body["content"]["text"] for h in heard]
    assert {h.path for h in heard} == {f"/open-apis/bot/v2/hook/{TOKEN}"}
    assert texts[0].startswith("gputui: claim\n")
    assert f"claim {claim} on gpu01 ends (--for) at" in texts[0]
    assert "use it, or release it" in texts[0]
    assert f"claim {claim} on gpu01 expired: its time ran out" in texts[1]


def test_a_url_file_is_read_only_when_it_is_the_heads_alone(tmp_path: Path) -> None:
    kept = tmp_path / "lab.url"
    kept.write_text("https://oapi.dingtalk.com/robot/send?access_token=abcdef0123456\nSECret\n")
    kept.chmod(0o644)
    config = NotifyConfig(channels=[TeamChannel(name="lab", url_file=str(kept))])
    channels, problems = resolve_team(config, 0.0)
    assert (channels, problems) == (
        [],
        [(0, f"url_file: {kept} must be the head's user's own, mode 0600 (it holds a token)")],
    )
    kept.chmod(0o600)
    channels, problems = resolve_team(config, 0.0)
    assert problems == []
    assert (channels[0].url, channels[0].secret) == (
        "https://oapi.dingtalk.com/robot/send?access_token=abcdef0123456",
        "SECret",
    )
    kept.write_text("http://chat.example.com/hook\n")
    assert resolve_team(config, 0.0)[1] == [
        (
            0,
            f"url_file: {kept}: http:// sends the token in clear:"
            " use https:// (http only to this machine)",
        )
    ]


def test_the_stores_records_of_deliveries_are_kept_per_channel_and_pruned(tmp_path: Path) -> None:
    store = SqlStore(open_store(tmp_path / "gputui.db"))
    try:
        with store.transaction() as tx:
            for i in range(4):
                tx.notice(Notice(uid=1000, time=float(i), kind="started", text=f"job {i}"))
            mine = tx.notify.put_channel(
                NotifyChannel(uid=1000, name="a", kind="apprise", url="slack://x/y/z",
                              shown="slack://x…", events="start", created_at=0.0)
            )  # fmt: skip
            assert mine.id is not None
            channel = mine.id
            tx.notify.settle(
                [NotifySent(notice_id=n, channel_id=channel, state="sent", at=float(n))
                 for n in (1, 2, 3)]
            )  # fmt: skip
        with store.snapshot() as tx:
            assert tx.notify.settled([1, 2, 3, 4]) == {(1, channel), (2, channel), (3, channel)}
            assert [n.id for n in tx.notify.notices_since(1.0, 2, 10)] == [3, 4]
        with store.transaction() as tx:
            assert tx.notify.forget_settled(2.5) == 2
            assert tx.notify.drop_channels(1000, ["a"]) == ["a"]
        with store.snapshot() as tx:
            assert tx.notify.settled([1, 2, 3]) == set()  # a channel's records go with it
            assert tx.notify.channels() == []
    finally:
        store.close()
