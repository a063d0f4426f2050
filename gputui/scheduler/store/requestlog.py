"""The request log on SQLite: append-only on disk, its ids indexed in memory.

A mutating request's first answer is kept under (uid, request id) so that a retry
after a dropped connection gets that answer instead of being applied twice. Clients
make their request ids at random (``uuid4``), so a disk index on them puts every new
id on a leaf of its own: a batch of 16 submissions wrote 16 index leaves to the log,
two thirds of its commit. Here the table is keyed by an increasing ``seq`` alone, so a
batch's rows land on the last page or two, and the ids are found through a dict in
memory from a hash of (uid, request id) to ``seq``. A hit is checked against the row
itself, so a stale entry (a rolled-back batch, a hash shared by two keys) is never
taken for a replay.

The index numbers the rows itself, one past the highest ``seq`` it has seen: left to
the database, SQLite numbers a row one past the highest the table holds, so a log
emptied by age (an idle head) would number from 1 again, below what the index has
seen, and the next forget would drop those young rows from memory. A batch rolled
back leaves a gap in the numbers, which costs nothing.

The index is rebuilt from the table when the store first uses it, and bounded: it
keeps the newest ``MAX_ENTRIES`` (about 110 bytes each). Clients retry once, at once,
after a drop, so a retry finds its answer as long as that many requests did not come
in between; rows past the bound or older than the head's keep time leave the disk at
the head's next tick (``forget_before``).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import orjson

MAX_ENTRIES = 200_000
"""The most request ids the head remembers (memory: about 22 MB at the bound)."""
_CHUNK = 500
"""``seq``s per ``IN (…)``: well under SQLite's parameter limit."""


def _key(uid: int, rid: str) -> int:
    return hash((uid, rid))


def _dumps(body: dict[str, Any]) -> str:
    return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS).decode()


class RequestIndex:
    """(uid, request id) → ``seq`` of its row, for the newest ``limit`` rows; and
    which ``seq``s each past ``time`` reaches, for forgetting by age."""

    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self.limit = max(1, limit)
        self.loaded = False
        self._lock = threading.Lock()
        self._seq_of: dict[int, int] = {}
        self._order_seq: deque[int] = deque()
        """``seq`` of each entry, oldest first (parallel to ``_order_key``)."""
        self._order_key: deque[int] = deque()
        self._times: deque[tuple[float, int]] = deque()
        """(time, last ``seq`` written at it), one per batch, oldest first."""
        self._evicted = 0
        """Every row up to this ``seq`` has left the index (and may leave the disk)."""
        self._deleted = 0
        """Every row up to this ``seq`` has left the disk."""
        self._next = 1
        """The ``seq`` of the next row written."""

    def __len__(self) -> int:
        return len(self._seq_of)

    # -- in memory ---------------------------------------------------------------

    def _add(self, seq: int, key: int, time: float) -> None:
        self._seq_of[key] = seq
        self._order_seq.append(seq)
        self._order_key.append(key)
        if self._times and self._times[-1][0] == time:
            self._times[-1] = (time, max(seq, self._times[-1][1]))
        else:
            self._times.append((time, seq))
        while len(self._order_seq) > self.limit:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        seq, key = self._order_seq.popleft(), self._order_key.popleft()
        if self._seq_of.get(key) == seq:
            del self._seq_of[key]
        self._evicted = max(self._evicted, seq)

    def _load(self, cursor: Any) -> None:
        cursor.execute(
            "SELECT seq, uid, request_id, time FROM requestlog ORDER BY seq DESC LIMIT ?",
            (self.limit,),
        )
        rows = cursor.fetchall()
        if rows:
            self._next = int(rows[0][0]) + 1
        for seq, uid, rid, time in reversed(rows):
            self._add(int(seq), _key(int(uid), str(rid)), float(time))
        if rows:
            cursor.execute("SELECT min(seq) FROM requestlog")
            (first,) = cursor.fetchone()
            self._deleted = int(first) - 1
            self._evicted = max(self._deleted, int(rows[-1][0]) - 1)
        self.loaded = True

    def _ready(self, cursor: Any) -> None:
        if not self.loaded:
            self._load(cursor)

    # -- on a transaction's cursor -------------------------------------------------

    def replay_many(
        self, cursor: Any, keys: Sequence[tuple[int, str]]
    ) -> dict[tuple[int, str], dict[str, Any]]:
        """The first answers of those keys the log holds: a dict probe each, then one
        read by ``seq`` for the hits, checked against the row's own uid and id."""
        if not keys:
            return {}
        with self._lock:
            self._ready(cursor)
            wanted = {seq: key for key in keys if (seq := self._seq_of.get(_key(*key))) is not None}
        found: dict[tuple[int, str], dict[str, Any]] = {}
        seqs = sorted(wanted)
        for start in range(0, len(seqs), _CHUNK):
            chunk = seqs[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            cursor.execute(
                "SELECT seq, uid, request_id, result FROM requestlog"  # noqa: S608 (only ? marks)
                f" WHERE seq IN ({marks})",
                chunk,
            )
            for seq, uid, rid, body in cursor.fetchall():
                key = wanted[int(seq)]
                if key == (int(uid), str(rid)):
                    found[key] = dict(orjson.loads(body))
        return found

    def append(
        self, cursor: Any, rows: Sequence[tuple[int, str, dict[str, Any]]], now: float
    ) -> list[tuple[int, int]]:
        """Append each (uid, request id, answer) to the log, in one statement; the
        (``seq``, key) of each, for ``publish`` once the transaction has committed
        (a batch rolled back leaves nothing in the index)."""
        staged: list[tuple[int, int]] = []
        if not rows:
            return staged
        with self._lock:
            self._ready(cursor)
            first = self._next
            self._next += len(rows)
        for start in range(0, len(rows), _CHUNK):
            part = rows[start : start + _CHUNK]
            marks = ", ".join(["(?, ?, ?, ?, ?)"] * len(part))
            values: list[Any] = []
            for seq, (uid, rid, body) in enumerate(part, first + start):
                values += (seq, uid, rid, now, _dumps(body))
                staged.append((seq, _key(uid, rid)))
            cursor.execute(
                "INSERT INTO requestlog (seq, uid, request_id, time, result)"  # noqa: S608
                f" VALUES {marks}",
                values,
            )
        return staged

    def publish(self, staged: Sequence[tuple[int, int]], now: float) -> None:
        """Index the rows ``append`` wrote, now that they are on disk."""
        with self._lock:
            if self.loaded:  # else the next use loads them from the table
                for seq, key in staged:
                    self._add(seq, key, now)

    def forget_before(self, cursor: Any, cutoff: float) -> int:
        """Drop the rows written before ``cutoff`` and those past the bound, from
        memory and disk (a ``seq`` range: the first pages of the table)."""
        with self._lock:
            self._ready(cursor)
            upto = self._evicted
            while self._times and self._times[0][0] < cutoff:
                upto = max(upto, self._times.popleft()[1])
            while self._order_seq and self._order_seq[0] <= upto:
                self._drop_oldest()
            if upto <= self._deleted:
                return 0  # nothing new to forget: no statement
            cursor.execute("DELETE FROM requestlog WHERE seq <= ?", (upto,))
            self._deleted = upto
            return int(cursor.rowcount)
