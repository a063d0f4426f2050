"""The outbox's queue under hypothesis: whatever the sends do (fail, succeed, in any
mix) and however small the bound, every delivery is settled exactly once (sent,
given up after its tries, or dropped), a channel never has two sends at once, each
channel is sent its notices in order, and no more than the bound ever waits. The
chat service is a stand-in function (the sender seam); the queue is the real one."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.notify import NotifyConfig
from gputui.scheduler.head.chat.outbox import Delivery, Outbox, _Fed
from gputui.scheduler.head.chat.senders import Channel, SendFailed
from gputui.scheduler.store.api import Store


def _channel(cid: int) -> Channel:
    return Channel(
        id=cid, uid=1000, name=f"c{cid}", kind="apprise", url="json://x", secret=None,
        shown="json://x", events=frozenset({"start"}),
    )  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    plan=st.lists(st.tuples(st.integers(0, 2), st.lists(st.booleans(), max_size=3)), max_size=25),
    queue_max=st.integers(1, 6),
    tries=st.integers(1, 3),
    senders=st.integers(1, 3),
)
def test_every_delivery_settles_once_in_order_per_channel(
    plan: list[tuple[int, list[bool]]], queue_max: int, tries: int, senders: int
) -> None:
    """``plan``: one delivery each (its channel, and whether each of its tries fails)."""
    config = NotifyConfig(
        queue_max=queue_max, tries=tries, senders=senders, backoff_s=0.01, backoff_max_s=0.02
    )
    fails = {notice: outcomes for notice, (_, outcomes) in enumerate(plan, start=1)}
    lock = threading.Lock()
    flying: set[int] = set()
    calls: list[tuple[int, int]] = []  # (channel, notice) in the order sent
    overlap: list[int] = []
    tried: dict[int, int] = {}

    def sender(channel: Channel, _title: str, body: str, _timeout: float) -> None:
        notice = int(body)
        with lock:
            if channel.id in flying:
                overlap.append(channel.id)
            flying.add(channel.id)
            calls.append((channel.id, notice))
            attempt = tried.get(notice, 0)
            tried[notice] = attempt + 1
        outcomes = fails[notice]
        with lock:
            flying.discard(channel.id)
        if attempt < len(outcomes) and outcomes[attempt]:
            raise SendFailed("down")

    settled: list[Any] = []
    audits: list[Any] = []

    class Tx:
        class notify:
            @staticmethod
            def settle(rows: list[Any]) -> None:
                settled.extend(rows)

            @staticmethod
            def forget_settled(_before: float) -> int:
                return 0

        @staticmethod
        def audit(row: Any) -> None:
            audits.append(row)

    async def read(_fn: Any) -> _Fed:
        return _Fed([], [], set())

    async def call_tx(fn: Any) -> Any:
        return fn(Tx, None)

    async def main() -> Outbox:
        box = Outbox(config, cast(Store, None), read, call_tx, sender=sender)
        runner = asyncio.ensure_future(box.run())
        most_waiting = 0
        for notice, (cid, _) in enumerate(plan, start=1):
            waited = sorted(
                d.notice_id
                for c, queue in box._queues.items()
                for d in list(queue)[1 if c in box._flying else 0 :]
            )
            dropped = box.dropped
            box._queue(
                Delivery(due=0.0, notice_id=notice, uid=1000, channel=_channel(cid),
                         title="t", body=str(notice))
            )  # fmt: skip
            gone = [r.notice_id for r in box._settling if r.state == "dropped"]
            assert (
                sorted(gone[len(gone) - (box.dropped - dropped) :])
                == waited[: box.dropped - dropped]
            )  # the oldest that waited, whichever channel they were for
            most_waiting = max(most_waiting, box.waiting())
            await asyncio.sleep(0)
        for _ in range(2000):
            if len(settled) == len(plan):
                break
            await asyncio.sleep(0.005)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        assert most_waiting <= queue_max
        return box

    box = asyncio.run(main())
    keys = [(row.notice_id, row.channel_id) for row in settled]
    assert sorted(keys) == sorted((n, cid) for n, (cid, _) in enumerate(plan, start=1))
    assert overlap == []
    for cid in range(3):
        sent_to = [n for c, n in calls if c == cid]
        assert sent_to == sorted(sent_to)  # in order, retries next to each other
    states = {row.notice_id: row.state for row in settled}
    for notice, (_, outcomes) in enumerate(plan, start=1):
        if states[notice] == "dropped":  # waiting: never tried, or waiting to try again
            assert tried.get(notice, 0) < tries
            continue
        failed_all = len(outcomes) >= tries and all(outcomes[:tries])
        assert states[notice] == ("failed" if failed_all else "sent")
        assert tried[notice] == (tries if failed_all else outcomes.index(False) + 1
                                 if False in outcomes[:tries] else len(outcomes) + 1)  # fmt: skip
    assert box.dropped == len(audits) - box.failed == sum(s == "dropped" for s in states.values())


@settings(max_examples=30, deadline=None)
@given(
    uids=st.lists(st.sampled_from([1000, 1001, 1002]), min_size=1, max_size=40),
    members=st.sets(st.tuples(st.sampled_from([1000, 1001, 1002]), st.sampled_from(["ml", "cv"]))),
)
def test_group_lookups_run_once_a_read_off_the_loop_and_reach_only_members(
    uids: list[int], members: set[tuple[int, str]]
) -> None:
    """A team channel with a group reaches the group's members only; the account
    lookups (NSS, maybe LDAP) run on the outbox's own thread, once for each user and
    group a read, never on the loop once per notice and channel."""
    from gputui.scheduler.head.chat.outbox import TEAM_UID

    team = [
        Channel(
            id=cid,
            uid=TEAM_UID,
            name=group,
            kind="apprise",
            url="json://x",
            secret=None,
            shown="json://x",
            events=frozenset({"start"}),
            group=group,
        )
        for cid, group in ((1, "ml"), (2, "cv"))
    ]
    notices = [(i, uid, 10.0 + i, "started", "go", None) for i, uid in enumerate(uids, start=1)]
    looked: list[tuple[int, str, bool]] = []

    def in_group(uid: int, group: str) -> bool:
        looked.append((uid, group, threading.current_thread() is threading.main_thread()))
        return (uid, group) in members

    async def read(_fn: Any) -> _Fed:
        return _Fed([(c, 0.0) for c in team], list(notices), set())

    async def main() -> Outbox:
        box = Outbox(NotifyConfig(), cast(Store, None), read, cast(Any, None), members=in_group)
        await box._feed_once()
        return box

    box = asyncio.run(main())
    assert not any(on_loop for _, _, on_loop in looked)
    assert len(looked) == len({(u, g) for u, g, _ in looked}) <= 6
    queued = sorted((d.notice_id, d.channel.id) for q in box._queues.values() for d in q)
    want = sorted((i, c.id) for i, uid, *_ in notices for c in team if (uid, c.group) in members)
    assert queued == want
