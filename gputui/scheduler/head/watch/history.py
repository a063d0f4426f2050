"""``HeadHistory``: the head's GPU readings (``readings``) to its store and back.

The readings are taken on the event loop (``HostWatch.observe`` records them); about
once a ``flush_s`` (or sooner, once ``FLUSH_READINGS`` wait) one flush hands them to
the writer (``Head.call_tx``), which stores them in that batch's transaction and
prunes on the way: a bounded number of rows beyond each GPU's share (of a few hosts
in turn: each every ``PRUNE_TURNS`` flushes, so a GPU holds at most that many more
than its share), and of rows older than ``keep_s``. One flush at a time; one that
was not stored is tried again with the next. A ``kill -9`` loses at most the
readings of one flush interval; a clean stop stores the rest straight away
(``close``).

The ``incident`` request is read on the reader thread from a snapshot, with the
readings held on the loop that the snapshot does not have yet (``readings.merged``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.head.watch.readings import KEEP_S, Flush, History, incident_view
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.read_args import IncidentArgs
from gputui.scheduler.store.api import Store, StoreFailure, Tx
from gputui.wire.words import say

log = logging.getLogger("gputui.scheduler.head.daemon")

FLUSH_S = 60.0
FLUSH_READINGS = 4096
"""A flush before ``flush_s`` once this many readings wait (a large cluster)."""
PRUNE_ROWS = 2000
"""The most rows one flush deletes for the budget, and again for age."""

CallTx = Callable[[Callable[[Tx, Any], Any]], Awaitable[Any]]
Read = Callable[[Callable[[], Any]], Awaitable[Any]]


def write(tx: Tx, flush: Flush, limit: int = PRUNE_ROWS) -> int:
    """Store a flush's readings (those the store does not have already: a flush is
    never stored twice) and prune; how many readings were stored."""
    stored = tx.readings.seq()
    rows = [row for row in flush.rows if row[0] > stored]
    if flush.upto > stored:
        tx.readings.add(rows, flush.upto)
    left = limit
    for host in flush.hosts:
        left -= tx.readings.prune_host(host, flush.share, left)
    if flush.cutoff is not None:
        tx.readings.prune_before(flush.cutoff, limit)
    return len(rows)


class HeadHistory:
    def __init__(
        self,
        history: History,
        store: Store,
        read: Read,
        call_tx: CallTx,
        clock: Callable[[], float],
        *,
        flush_s: float = FLUSH_S,
        keep_s: float = KEEP_S,
    ) -> None:
        """``read``: runs a function on the reader thread; ``call_tx``: runs one in the
        writer's next batch (its value once committed)."""
        self.history = history
        self.store = store
        self._read = read
        self._call_tx = call_tx
        self._clock = clock
        self.flush_s = flush_s
        self.keep_s = keep_s
        self._flushed_at = clock()
        self._task: asyncio.Task[None] | None = None

    def load(self, tx: Tx) -> None:
        self.history.load(tx.readings.seq(), tx.readings.gpus())

    def cutoff(self) -> float:
        return self._clock() - self.keep_s

    # -- to the store ------------------------------------------------------------------

    def tick(self) -> None:
        """A flush when one is due and none is under way."""
        if self._task is not None and not self._task.done():
            return
        now = self._clock()
        if now - self._flushed_at >= self.flush_s or self.history.unsent() >= FLUSH_READINGS:
            self._flushed_at = now
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        flush = self.history.take(self.cutoff())
        try:
            await self._call_tx(lambda tx, _ctx: write(tx, flush))
        except asyncio.CancelledError:
            self.history.resend()
            raise
        except Exception as exc:  # the store failed: the next flush has them again
            log.error("head: %d GPU readings not stored yet: %s", len(flush.rows), exc)
            self.history.resend()
            return
        self.history.stored_upto(flush.upto)

    async def close(self) -> None:
        """At shutdown, with the writer stopped: store what is held, straight away."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.history.resend()
        flush = self.history.take(self.cutoff())
        if not flush.rows:
            return
        try:
            with self.store.transaction() as tx:
                write(tx, flush)
        except (StoreFailure, OSError) as exc:
            log.error("head: the last %d GPU readings were not stored: %s", len(flush.rows), exc)
            return
        self.history.stored_upto(flush.upto)

    # -- the incident request ------------------------------------------------------------

    async def answer(self, conn: Connection, request: wire.Request) -> None:
        """``incident``: the stored readings and those held, from a snapshot, off the writer."""
        args: IncidentArgs = request.args
        kept = self.history.kept(args.host, args.gpu)  # the loop's own, copied here
        cutoff = self.cutoff()

        def read() -> dict[str, Any]:
            with self.store.snapshot() as tx:
                return incident_view(
                    kept, args.host, args.gpu, args.since, stored=tx.readings, cutoff=cutoff
                )

        try:
            body = await self._read(read)
        except Exception as exc:  # the store: say so, never leave the caller waiting
            log.error("head: incident readings of %s not read: %s", args.host, exc)
            conn.send(wire.error(request.id, "store", say(N_("could not read the kept readings"))))
            return
        conn.send(wire.response(request.id, body))
