"""``Inbox``: what the head's writer takes as one batch (group commit).

Requests and the head's own news queue here; the writer takes whatever has arrived
as one batch, one commit. A batch waits a little for what is on its way, so that
the clients of a burst share one commit instead of splitting into alternating
halves, each paying for its own:

* requests already readable: up to ``LINGER_ROUNDS`` loop iterations, stopping at
  the first that brings none (no timer: an idle head answers its one request after
  a single iteration);
* the next request of each connection the last batch answered (a client that sends
  again as soon as it has its answer), for at most ``OWED_S``: on a busy machine the
  clients' answers and their next requests come spread over a millisecond or more,
  longer than a few loop iterations. A connection that sends something else (a
  read), closes, or has more requests in flight is not waited for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable

from gputui.scheduler.head.batch import Item

LINGER_ROUNDS = 4
"""Loop iterations a batch waits for requests already on their way."""
OWED_S = 0.001
"""How long a batch waits, at most, for the next requests of the connections the
last batch answered."""


class Inbox:
    """A bounded queue of ``Item``s that hands them out in batches."""

    def __init__(self, maxsize: int, *, owed_s: float = OWED_S) -> None:
        self._queue: asyncio.Queue[Item] = asyncio.Queue(maxsize)
        self.owed_s = owed_s
        self._owing: set[Hashable] = set()
        """Connections answered by the last batch that have sent nothing since."""
        self._owed: asyncio.Future[None] | None = None
        """Set once the batch being gathered has waited long enough for them."""

    async def put(self, item: Item) -> None:
        """Queue ``item``; waits while the inbox is full."""
        await self._queue.put(item)

    def offer(self, item: Item) -> bool:
        """Queue ``item`` unless the inbox is full (then False)."""
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            return False
        return True

    def drain(self) -> list[Item]:
        """Everything still queued (the head is closing)."""
        items = []
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        return items

    # -- who the next batch waits for ---------------------------------------------

    def answered(self, conns: Iterable[Hashable]) -> None:
        """The last batch answered these connections, each with nothing more in flight:
        the next batch waits a little for their next requests."""
        self._owing.update(conns)

    def heard(self, conn: Hashable) -> None:
        """A line came from ``conn`` (what it is queued, if anything, already is)."""
        self._settle(conn)

    def gone(self, conn: Hashable) -> None:
        """``conn`` closed."""
        self._settle(conn)

    def _settle(self, conn: Hashable) -> None:
        if conn in self._owing:
            self._owing.discard(conn)
            if not self._owing:
                self._stop_waiting()

    def _stop_waiting(self) -> None:
        owed = self._owed
        if owed is not None and not owed.done():
            owed.set_result(None)

    # -- the writer's side ---------------------------------------------------------

    async def batch(self, limit: int) -> list[Item]:
        """The next batch: at least one item, at most ``limit`` (with ``limit`` 1, no
        waiting for more)."""
        batch = [await self._queue.get()]
        if limit > 1:
            if self._owing:
                await self._wait_owed()
            for _ in range(LINGER_ROUNDS):
                waiting = self._queue.qsize()
                await asyncio.sleep(0)  # let requests already readable join this batch
                if self._queue.qsize() == waiting:
                    break
        self._owing.clear()
        while len(batch) < limit and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def _wait_owed(self) -> None:
        loop = asyncio.get_running_loop()
        owed = self._owed = loop.create_future()
        timer = loop.call_later(self.owed_s, self._stop_waiting)
        try:
            await owed
        finally:
            timer.cancel()
            self._owed = None
