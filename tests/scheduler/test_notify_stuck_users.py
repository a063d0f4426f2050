"""Users' sends that outlive their wait (a server that never finishes answering)
hold at most ``senders`` of the outbox's threads between all users, so however many
users point channels at slow servers, the team's channels still get a thread. The
chat service is a stand-in function (the sender seam); the outbox is the real one."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

from gputui.config.notify import NotifyConfig
from gputui.scheduler.head.chat.outbox import Outbox
from gputui.scheduler.head.chat.senders import Channel
from gputui.scheduler.store.api import Store
from gputui.scheduler.store.tables import TEAM_UID


def _channel(cid: int, uid: int) -> Channel:
    return Channel(
        id=cid, uid=uid, name=f"c{cid}", kind="apprise", url="json://x", secret=None,
        shown="json://x", events=frozenset({"start"}),
    )  # fmt: skip


def test_slow_users_never_take_the_team_channels_thread() -> None:
    release = threading.Event()

    def sender(channel: Channel, _title: str, _body: str, _timeout: float) -> None:
        if channel.uid != TEAM_UID:
            release.wait(30)  # a user's server that never finishes answering

    async def nothing(*_args: Any) -> Any:
        return None

    async def main() -> list[str | None]:
        config = NotifyConfig(senders=1, timeout_s=0.5)
        outbox = Outbox(config, cast(Store, None), nothing, nothing, sender=sender)
        try:
            first = await outbox.send_now(_channel(1, 1001), "t", "b")
            second = await outbox.send_now(_channel(2, 1002), "t", "b")
            team = await asyncio.wait_for(outbox.send_now(_channel(3, TEAM_UID), "t", "b"), 10)
            return [first, second, team]
        finally:
            release.set()
            outbox._pool.shutdown(wait=True)

    first, second, team = asyncio.run(main())
    assert first == "no answer within 0.5 s"
    assert second == "the sends of too many users' channels have not ended"
    assert team is None
