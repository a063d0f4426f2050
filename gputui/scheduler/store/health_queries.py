"""The health board's rows and the GPU readings in SQLite: the ``health`` and
``readings`` parts of ``SqlTx``, run in its transaction, on its session and cursor.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.sql.expression import Executable
from sqlmodel import Session, SQLModel, col, select

from gputui.scheduler.store.api import ReadingRow, TrackRow
from gputui.scheduler.store.tables import HealthAck, HealthTrack
from gputui.scheduler.store.txconn import TxConn

READINGS_SEQ = "readings_seq"
"""The ``meta`` key of the number of the newest reading stored."""
_READING = "id, host, gpu, uuid, time, state, util, mem_mib, temp_c, power_mw, throttle,"
_READING += " ecc_uncorrected"

_Row = TypeVar("_Row", HealthTrack, HealthAck)


@functools.cache
def _columns(table: type[HealthTrack] | type[HealthAck]) -> tuple[str, ...]:
    columns = SQLModel.metadata.tables[str(table.__tablename__)].columns
    return tuple(column.name for column in columns)


@functools.cache
def _upsert_of(dialect: str, table: type[HealthTrack] | type[HealthAck]) -> Executable:
    """``INSERT … ON CONFLICT (key) DO UPDATE`` of every column, in ``dialect``."""
    stmt = (sqlite_insert if dialect == "sqlite" else postgresql_insert)(table)
    return stmt.on_conflict_do_update(
        index_elements=["key"],
        set_={name: stmt.excluded[name] for name in _columns(table) if name != "key"},
    )


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
        self, tracks: Iterable[TrackRow], acks: Iterable[HealthAck], gone: Sequence[str] = ()
    ) -> None:
        self._upsert(HealthTrack, list(tracks))
        names = _columns(HealthAck)
        self._upsert(HealthAck, [{name: getattr(ack, name) for name in names} for ack in acks])
        self.drop((), gone)

    def _upsert(self, table: type[_Row], rows: Sequence[Mapping[str, object]]) -> None:
        """Each row inserted, or updated where its key is stored: one statement for
        them all (``INSERT … ON CONFLICT (key) DO UPDATE``, SQLite's and PostgreSQL's),
        not a read and a write each, as ``merge`` does."""
        if rows:
            conn = self._s.connection()
            conn.execute(_upsert_of(conn.dialect.name, table), rows)

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
