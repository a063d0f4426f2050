"""``SnapshotStream``: the fleet's snapshots as an async iterator, for a daemon.

The fleet calls its listeners inside the line handler (asyncssh's ``data_received``),
so a listener must be quick. This one only records the snapshot under its host's name
and wakes the reader: a consumer that is slow (one that writes SQLite) never stalls
a host, and never makes memory grow, because a host that changes again before it
was taken replaces its pending snapshot in place (keeping its turn). At most one
snapshot per host is ever held: the latest.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable
from types import TracebackType

from gputui.telemetry import HostSnapshot

__all__ = ["SnapshotStream"]


class SnapshotStream:
    """The latest snapshot of each host not yet taken; ``async for`` it, or ``async with``.

    Iteration ends once the stream is closed (by ``close``, leaving ``async with``, or
    the fleet closing) and what was pending is taken.
    """

    def __init__(self, initial: Iterable[HostSnapshot] = ()) -> None:
        self._pending: OrderedDict[str, HostSnapshot] = OrderedDict(
            (snapshot.name, snapshot) for snapshot in initial
        )
        self._wake = asyncio.Event()
        self._closed = False
        self._on_close: Callable[[], None] | None = None

    def put(self, snapshot: HostSnapshot) -> None:
        """Record ``snapshot`` as its host's latest and wake the reader (the listener)."""
        if not self._closed:
            self._pending[snapshot.name] = snapshot
            self._wake.set()

    def __len__(self) -> int:
        """Hosts with a snapshot not yet taken (never more than the fleet's hosts)."""
        return len(self._pending)

    def take_all(self) -> list[HostSnapshot]:
        """Every pending snapshot at once, oldest change first (for one batched write)."""
        taken = list(self._pending.values())
        self._pending.clear()
        return taken

    def __aiter__(self) -> SnapshotStream:
        return self

    async def __anext__(self) -> HostSnapshot:
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()
        return self._pending.popitem(last=False)[1]

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when the stream closes (its source unsubscribes there)."""
        self._on_close = callback

    def close(self) -> None:
        """Stop receiving; the reader takes what is pending, then its loop ends."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    async def __aenter__(self) -> SnapshotStream:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
