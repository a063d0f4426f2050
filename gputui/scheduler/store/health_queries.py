"""The health board's rows and the GPU readings in SQLite: the ``health`` and
``readings`` parts of ``SqlTx``, run in its transaction, on its session and cursor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from sqlalchemy import delete
from sqlmodel import Session, col, select

from gputui.scheduler.store.api import ReadingRow
from gputui.scheduler.store.tables import HealthAck, HealthTrack
from gputui.scheduler.store.txconn import TxConn

READINGS_SEQ = "readings_seq"
"""The ``meta`` key of the number of the newest reading stored."""
_READING = "id, host, gpu, uuid, time, state, util, mem_mib, temp_c, power_mw, throttle,"
_READING += " ecc_uncorrected"

_Row = TypeVar("_Row", HealthTrack, HealthAck)


class SqlHealthRows:
    """The ``HealthRows`` part of a SQLite transaction."""

    __slots__ = ("_s",)

    def __init__(self, session: Session) -> None:
        self._s = session

    def rows(self) -> tuple[list[HealthTrack], list[HealthAck]]:
        return list(self._s.exec(select(HealthTrack)).all()), list(
            self._s.exec(select(HealthAck)).all()
        )

    def put(
        self, tracks: Iterable[HealthTrack], acks: Iterable[HealthAck], gone: Sequence[str] = ()
    ) -> None:
        # The stored rows of these keys, read in one query per 500 (not one per row, as
        # ``merge`` of a row it has not seen does): then each is updated, or added.
        self._put(HealthTrack, list(tracks))
        self._put(HealthAck, list(acks))
        self.drop((), gone)

    def _put(self, table: type[_Row], rows: Sequence[_Row]) -> None:
        """Each row updated where stored, else added: the stored ones are read first,
        in one query per 500 (``merge`` of a row the session has not seen reads it
        alone), so that ``merge`` finds them in the session."""
        stored: set[str] = set()
        for start in range(0, len(rows), 500):
            chunk = [row.key for row in rows[start : start + 500]]
            found = self._s.exec(select(table).where(col(table.key).in_(chunk)))
            stored.update(row.key for row in found)
        for row in rows:
            if row.key in stored:
                self._s.merge(row)
            else:
                self._s.add(row)

    def drop(self, tracks: Sequence[str], acks: Sequence[str]) -> None:
        for table, keys in ((HealthTrack, tracks), (HealthAck, acks)):
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                self._s.execute(delete(table).where(col(table.key).in_(chunk)))


class SqlReadings:
    """The ``Readings`` part of a SQLite transaction (``history``: gputui incident):
    batches on the transaction's cursor; every prune is bounded (``limit`` rows), so
    one never holds the writer up for long."""

    __slots__ = ("_conn",)

    def __init__(self, conn: TxConn) -> None:
        self._conn = conn

    def seq(self) -> int:
        cursor = self._conn.cursor()
        cursor.execute("SELECT value FROM meta WHERE key = ?", (READINGS_SEQ,))
        row = cursor.fetchone()
        return int(row[0]) if row is not None else 0

    def add(self, rows: Sequence[ReadingRow], seq: int) -> None:
        cursor = self._conn.cursor()
        marks = ", ".join("?" * 12)
        cursor.executemany(f"INSERT INTO reading ({_READING}) VALUES ({marks})", rows)  # noqa: S608
        cursor.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (READINGS_SEQ, str(seq)),
        )

    def of_gpu(self, host: str, gpu: int, limit: int) -> list[ReadingRow]:
        """The host's index, read backwards."""
        cursor = self._conn.cursor()
        cursor.execute(
            f"SELECT {_READING} FROM reading WHERE host = ? AND gpu = ?"  # noqa: S608
            " ORDER BY time DESC, id DESC LIMIT ?",
            (host, gpu, limit),
        )
        return list(reversed(cursor.fetchall()))

    def gpus(self) -> list[tuple[str, int, float, float]]:
        cursor = self._conn.cursor()
        cursor.execute("SELECT host, gpu, min(time), max(time) FROM reading GROUP BY host, gpu")
        return [(str(h), int(g), float(lo), float(hi)) for h, g, lo, hi in cursor.fetchall()]

    def prune_host(self, host: str, keep: int, limit: int) -> int:
        """One pass over the host's rows."""
        if limit <= 0:
            return 0
        cursor = self._conn.cursor()
        cursor.execute(
            "DELETE FROM reading WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER"
            " (PARTITION BY gpu ORDER BY time DESC, id DESC) AS n FROM reading WHERE host = ?)"
            " AS ranked WHERE n > ? LIMIT ?)",  # the alias: PostgreSQL before 16 needs one
            (host, keep, limit),
        )
        return int(cursor.rowcount or 0)

    def prune_before(self, cutoff: float, limit: int) -> int:
        if limit <= 0:
            return 0
        cursor = self._conn.cursor()
        cursor.execute(
            "DELETE FROM reading WHERE id IN"
            " (SELECT id FROM reading WHERE time < ? ORDER BY time LIMIT ?)",
            (cutoff, limit),
        )
        return int(cursor.rowcount or 0)
