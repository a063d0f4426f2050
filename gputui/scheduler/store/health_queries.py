"""The health board's and the incident readings' queries: part of the store's ``Tx``.

Kept apart from ``store`` only for size: ``Tx`` takes these as a base, and they
run in its transaction, on its session and its cursor, like every other query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete
from sqlmodel import Session, col, select

from gputui.scheduler.head.watch.readings import READINGS_SEQ, ReadingRow
from gputui.scheduler.store.tables import HealthAck, HealthTrack


class HealthQueries:
    """The queries of the head's health board and GPU readings (a base of ``Tx``)."""

    s: Session

    def _cursor(self) -> Any:
        raise NotImplementedError

    # -- the health board's tracks and acknowledgements --------------------------------

    def health_rows(self) -> tuple[list[HealthTrack], list[HealthAck]]:
        return list(self.s.exec(select(HealthTrack)).all()), list(
            self.s.exec(select(HealthAck)).all()
        )

    def put_health(
        self, tracks: Iterable[HealthTrack], acks: Iterable[HealthAck], gone: Sequence[str] = ()
    ) -> None:
        """Write these tracks and acks (new or changed); ``gone``: acks to drop."""
        for row in (*tracks, *acks):
            self.s.merge(row)
        self.drop_health((), gone)

    def drop_health(self, tracks: Sequence[str], acks: Sequence[str]) -> None:
        """Delete the tracks and the acks of these keys."""
        for table, keys in ((HealthTrack, tracks), (HealthAck, acks)):
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                self.s.execute(delete(table).where(col(table.key).in_(chunk)))

    # -- GPU readings (``history``: gputui incident) ----------------------------------
    # Batches on this transaction's cursor; every prune is bounded (``limit`` rows),
    # so one never holds the writer up for long.

    _READING = "id, host, gpu, uuid, time, state, util, mem_mib, temp_c, power_mw, throttle,"
    _READING += " ecc_uncorrected"

    def readings_seq(self) -> int:
        """The number of the newest reading stored (0: none yet)."""
        cursor = self._cursor()
        cursor.execute("SELECT value FROM meta WHERE key = ?", (READINGS_SEQ,))
        row = cursor.fetchone()
        return int(row[0]) if row is not None else 0

    def add_readings(self, rows: Sequence[ReadingRow], seq: int) -> None:
        """Store readings, and ``seq`` as the number of the newest (in one transaction)."""
        cursor = self._cursor()
        marks = ", ".join("?" * 12)
        cursor.executemany(f"INSERT INTO reading ({self._READING}) VALUES ({marks})", rows)  # noqa: S608
        cursor.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (READINGS_SEQ, str(seq)),
        )

    def gpu_readings(self, host: str, gpu: int, limit: int) -> list[ReadingRow]:
        """The newest ``limit`` readings of one GPU, oldest first (the host's index,
        backwards)."""
        cursor = self._cursor()
        cursor.execute(
            f"SELECT {self._READING} FROM reading WHERE host = ? AND gpu = ?"  # noqa: S608
            " ORDER BY time DESC, id DESC LIMIT ?",
            (host, gpu, limit),
        )
        return list(reversed(cursor.fetchall()))

    def reading_gpus(self) -> list[tuple[str, int, float, float]]:
        """(host, GPU index, oldest reading's time, newest's) of every GPU with readings."""
        cursor = self._cursor()
        cursor.execute("SELECT host, gpu, min(time), max(time) FROM reading GROUP BY host, gpu")
        return [(str(h), int(g), float(lo), float(hi)) for h, g, lo, hi in cursor.fetchall()]

    def prune_host_readings(self, host: str, keep: int, limit: int) -> int:
        """Delete up to ``limit`` of a host's readings beyond each GPU's newest ``keep``
        (one pass over the host's rows)."""
        if limit <= 0:
            return 0
        cursor = self._cursor()
        cursor.execute(
            "DELETE FROM reading WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER"
            " (PARTITION BY gpu ORDER BY time DESC, id DESC) AS n FROM reading WHERE host = ?)"
            " WHERE n > ? LIMIT ?)",
            (host, keep, limit),
        )
        return int(cursor.rowcount or 0)

    def prune_readings_before(self, cutoff: float, limit: int) -> int:
        """Delete up to ``limit`` readings older than ``cutoff``, the oldest first."""
        if limit <= 0:
            return 0
        cursor = self._cursor()
        cursor.execute(
            "DELETE FROM reading WHERE id IN"
            " (SELECT id FROM reading WHERE time < ? ORDER BY time LIMIT ?)",
            (cutoff, limit),
        )
        return int(cursor.rowcount or 0)
