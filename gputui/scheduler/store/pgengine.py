"""The head's database on a PostgreSQL server: the engine's rules, and the cursor the
fast paths run their SQL on.

The same promises as SQLite's (``engine``): every write transaction is serialized
with every other (its first statement takes one transaction-scoped advisory lock,
the counterpart of ``BEGIN IMMEDIATE``: held until commit or rollback, so it also
works behind a pooler), a commit is acknowledged only once it is durable
(``synchronous_commit = on`` on every connection, whatever the server's default),
a head that shares the database with a standby checks its lease's epoch in every
write transaction (``lease``),
and a ``SNAPSHOT`` read is a ``REPEATABLE READ, READ ONLY`` transaction that takes
no lock, so it never waits for the writer. psycopg 3 is the driver.

The fast paths' SQL is written once, with qmark (``?``) parameters, as SQLite takes
them; ``QmarkCursor`` hands it to psycopg with ``%s`` instead (each statement's text
translated once and cached).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection

from gputui.scheduler.store.api import SNAPSHOT, StoreError
from gputui.scheduler.store.lease import check_fence

DRIVER = "postgresql+psycopg"
WRITER_LOCK = 0x67707574_75690001
"""The advisory lock every write transaction takes first (one key for the database;
a value no other program is likely to pick)."""


def postgres_engine(url: URL) -> Engine:
    """An engine on a PostgreSQL URL (``postgresql://`` or ``postgresql+psycopg://``);
    nothing connects until used."""
    if url.drivername not in ("postgresql", DRIVER):
        raise StoreError(
            f"database {url.render_as_string(hide_password=True)}: "
            f"use a {DRIVER}:// URL (gputui talks to PostgreSQL through psycopg 3)"
        )
    try:
        import psycopg  # noqa: F401  (the optional extra: say so in one line)
    except ImportError as e:
        raise StoreError("PostgreSQL needs psycopg 3: pip install 'gputui[postgres]'") from e
    engine = create_engine(
        url.set(drivername=DRIVER),
        pool_size=1,
        max_overflow=3,
        pool_pre_ping=True,
        connect_args={"options": "-c synchronous_commit=on"},
    )
    event.listen(engine, "begin", _begin)
    return engine


def _begin(conn: Connection) -> None:
    if conn.get_execution_options().get(SNAPSHOT, False):
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    else:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITER_LOCK:d})")
        check_fence(conn)  # a head that lost its lease writes nothing (``lease``)


@functools.lru_cache(maxsize=1024)
def to_format(sql: str) -> str:
    """A statement with ``?`` parameters as psycopg's ``%s`` (a literal ``%`` doubled).
    The store's own statements only: none has a ``?`` or ``%`` inside a string."""
    return sql.replace("%", "%%").replace("?", "%s")


class QmarkCursor:
    """A psycopg cursor that takes the fast paths' qmark SQL."""

    __slots__ = ("_c",)

    def __init__(self, cursor: Any) -> None:
        self._c = cursor

    def execute(self, sql: str, params: Sequence[Any] = ()) -> QmarkCursor:
        self._c.execute(to_format(sql), params or None)
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            self._c.executemany(to_format(sql), rows)

    def fetchone(self) -> Any:
        return self._c.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self._c.fetchall())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._c.fetchall())

    @property
    def rowcount(self) -> int:
        return int(self._c.rowcount)
