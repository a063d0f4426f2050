"""How the writer's batches are gathered (``Inbox``): a batch waits for the next
requests of the clients the last batch answered, and for nothing else.

Each wait here is on the inbox's own future: an ``owed_s`` of an hour stands for
"still waiting" (nothing but the event under test can end it), and the short one
is only ever awaited to its end.
"""

from __future__ import annotations

import asyncio

from gputui.scheduler.head.batch import Item
from gputui.scheduler.head.inbox import Inbox

HOUR = 3600.0


def _item(name: str) -> Item:
    return Item("call", payload=name)


async def _yield(times: int = 20) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_an_idle_inbox_hands_out_its_one_item_at_once() -> None:
    inbox = Inbox(100, owed_s=HOUR)
    inbox.offer(_item("a"))
    batch = await asyncio.wait_for(inbox.batch(100), 10)
    assert [i.payload for i in batch] == ["a"]


async def test_a_batch_waits_for_the_next_request_of_each_client_the_last_one_answered() -> None:
    inbox = Inbox(100, owed_s=HOUR)
    a, b = object(), object()
    inbox.answered([a, b])
    inbox.heard(a)
    await inbox.put(_item("from a"))
    gathering = asyncio.ensure_future(inbox.batch(100))
    await _yield()
    assert not gathering.done()  # b has not sent its next request yet
    inbox.heard(b)
    await inbox.put(_item("from b"))
    batch = await asyncio.wait_for(gathering, 10)
    assert [i.payload for i in batch] == ["from a", "from b"]  # one batch, one commit


async def test_a_client_that_closes_or_stays_silent_holds_a_batch_up_briefly() -> None:
    inbox = Inbox(100, owed_s=HOUR)
    a, b = object(), object()
    inbox.answered([a, b])
    inbox.offer(_item("tick"))
    gathering = asyncio.ensure_future(inbox.batch(100))
    inbox.gone(a)
    await _yield()
    assert not gathering.done()
    inbox.gone(b)
    assert [i.payload for i in await asyncio.wait_for(gathering, 10)] == ["tick"]
    # A silent one: waited for at most owed_s, and only by the batch after its answer.
    inbox = Inbox(100, owed_s=0.01)
    inbox.answered([a])
    inbox.offer(_item("first"))
    assert [i.payload for i in await asyncio.wait_for(inbox.batch(100), 10)] == ["first"]
    inbox.owed_s = HOUR
    inbox.offer(_item("second"))
    assert [i.payload for i in await asyncio.wait_for(inbox.batch(100), 10)] == ["second"]


async def test_one_at_a_time_never_waits() -> None:
    inbox = Inbox(100, owed_s=HOUR)
    inbox.answered([object()])
    inbox.offer(_item("a"))
    inbox.offer(_item("b"))
    assert [i.payload for i in await asyncio.wait_for(inbox.batch(1), 10)] == ["a"]
    assert [i.payload for i in await asyncio.wait_for(inbox.batch(1), 10)] == ["b"]


async def test_a_full_inbox_refuses_an_offer_and_drains_in_order() -> None:
    inbox = Inbox(2)
    assert inbox.offer(_item("a")) and inbox.offer(_item("b"))
    assert not inbox.offer(_item("c"))
    assert [i.payload for i in inbox.drain()] == ["a", "b"]
    assert inbox.drain() == []
