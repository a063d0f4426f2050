"""The change stream: which rows a console cares about were committed by someone else.

The head signals its own commits to its subscribers in-process, at once, after each
commit that changed the state. What another process commits to the same database (an
admin's script, a ``psql`` session) reaches the head through its store's
``ChangeFeed``: each ``Change`` names a table (and may name the key of one of its
rows), never a row's contents. The head reads the rows it shows itself, from a
snapshot, as it does for its own changes.

- SQLite (``SoleWriter``): the head is its file's one writer; nothing else commits,
  so the feed has nothing to say (``shared`` is False and the head runs none).
- PostgreSQL (``pgchanges.PgChangeFeed``): every statement that inserts, updates,
  deletes or truncates rows of a ``WATCHED`` table sends ``NOTIFY gputui_changes,
  '<table>:*'`` from a statement trigger (the ``*_statement_triggers`` migration),
  inside the transaction, so the server delivers it only if it commits, and folds
  repeats within it: a transaction sends at most one per table, whatever it writes.
  No row's key is sent: the head pushes its whole state on any change. The head
  listens on one connection of its own, outside the pool, and skips what its own
  connections sent (``OwnBackends``: it has told its subscribers already).

A payload is untrusted (any role that can connect may ``NOTIFY`` any channel):
``decode`` takes only a known table and a bounded key, and says None to the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Engine, event

CHANNEL = "gputui_changes"
"""The channel the triggers notify and the head listens on (``*_statement_triggers``)."""
PAYLOAD_MAX = 7999
"""Bytes in a payload: the server refuses 8,000 or more (a longer one is not ours)."""
ANY = "*"
WATCHED: Mapping[str, str] = {
    "job": "id",
    "claim": "id",
    "allocation": "id",
    "host": "name",
    "gpu": "uuid",
    "notice": "id",
}
"""The tables whose rows a console is shown (queue, claims, holders, drains, fences,
notices), and each one's key column (a ``Change`` may name a row, as 0011's row
triggers did; the ``*_statement_triggers`` migration's send ``<table>:*``): what
the migrations put a trigger on."""


@dataclass(frozen=True, slots=True)
class Change:
    """A committed change to ``table``: to the row ``key``, or (None) to any of its
    rows; ``table`` is ``*`` after a gap in the stream (anything may have changed)."""

    table: str
    key: str | None


EVERYTHING = Change(ANY, None)
"""What a feed says once it listens, and again after a gap (a lost connection):
anything may have changed."""


def decode(payload: str) -> Change | None:
    """A trigger's payload as a ``Change``; None for one no trigger of ours sends."""
    if len(payload) > PAYLOAD_MAX:
        return None
    table, colon, key = payload.partition(":")
    if not colon or table not in WATCHED or not key:
        return None
    return Change(table, None if key == ANY else key)


OnChange = Callable[[Change], None]


class ChangeFeed(Protocol):
    """Changes committed to the store by other processes, as they commit."""

    @property
    def shared(self) -> bool:
        """Whether anyone else can commit to this database (else ``run`` has nothing
        to say, and the head need not run it)."""
        ...

    async def run(self, on_change: OnChange) -> None:
        """Call ``on_change`` on the event loop for each change another process
        commits, until cancelled; never blocks the loop, and outlives a lost
        connection. Says ``EVERYTHING`` each time it starts listening (the first
        time too): what was committed before then was not heard, so the consumer
        reads it all once more."""
        ...


class SoleWriter:
    """SQLite's feed: the head is the file's one writer; nothing comes from outside."""

    shared = False

    async def run(self, on_change: OnChange) -> None:
        await asyncio.Event().wait()  # until cancelled: nothing to say


class OwnBackends:
    """The server process ids of an engine's open connections: a notification one of
    them sent is the head's own commit, which it signalled in-process already.

    Kept by the pool's events: an id is added when its connection is checked out
    (so before it can write), and dropped when the connection is closed or detached
    (the server may give the id to another process later)."""

    KEY = "gputui_backend_pid"

    def __init__(self, engine: Engine) -> None:
        self.pids: set[int] = set()
        event.listen(engine, "checkout", self._checkout)
        event.listen(engine, "close", self._gone)
        event.listen(engine, "detach", self._gone)

    def __contains__(self, pid: object) -> bool:
        return pid in self.pids

    def _checkout(self, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if self.KEY in record.info:
            return
        pid = getattr(getattr(dbapi_connection, "info", None), "backend_pid", None)
        if isinstance(pid, int):
            record.info[self.KEY] = pid
            self.pids.add(pid)

    def _gone(self, _dbapi_connection: Any, record: Any) -> None:
        pid = record.info.pop(self.KEY, None)
        if pid is not None:
            self.pids.discard(pid)
