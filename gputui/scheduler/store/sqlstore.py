"""``SqlStore``: the head's database, the ``Store`` of ``store.api``, in one SQLite file
(the default) or on a PostgreSQL server (``head.database: postgresql+psycopg://…``).

A ``transaction()`` is ``BEGIN IMMEDIATE`` … ``COMMIT`` on SQLite (see ``engine``), and
on PostgreSQL a transaction whose first statement takes the writer's lock
(``pgengine``): either way writes are serialized, and a batch of requests that arrived
together shares one durable commit. ``snapshot()`` reads a consistent snapshot from
any thread without waiting for the writer. What differs between the two is the
engine's alone (``engine``, ``pgengine``); the queries are the same (``queries``).
A SQLite file's safety, the pragmas, the integrity check and the schema are
``engine``'s; the online backup (SQLite only) is ``backup``'s. What other processes
commit reaches the head through ``changes()`` (``changes``; on PostgreSQL
``pgchanges``, which listens on a connection of its own, outside this pool).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine
from sqlmodel import Session

from gputui.scheduler.store.api import SNAPSHOT, Store
from gputui.scheduler.store.changes import ChangeFeed, OwnBackends, SoleWriter
from gputui.scheduler.store.engine import jobs_namespace, open_database
from gputui.scheduler.store.location import MOUNTINFO
from gputui.scheduler.store.queries import SqlTx
from gputui.scheduler.store.requestlog import RequestIndex


class SqlStore:
    """The head's database: ``transaction()`` for every write, ``snapshot()`` to read."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._reader = engine.execution_options(**{SNAPSHOT: True})
        self._writer: Session | None = None
        """``batch()``'s session, on a connection it keeps from one batch to the next."""
        self.requests = RequestIndex()
        """The request log's ids, in memory (``requestlog``)."""
        self._own = OwnBackends(engine) if engine.dialect.name == "postgresql" else None
        """The server processes of this store's connections (``changes``)."""

    @classmethod
    def open(cls, target: Path | str, *, mountinfo: Path = MOUNTINFO) -> SqlStore:
        """Everything the head does before it trusts its database (``open_database``):
        a SQLite file's path, or a PostgreSQL URL."""
        return cls(open_database(target, mountinfo=mountinfo))

    # No row outlives its transaction: each is expired as the transaction ends, so a
    # row kept past it (instead of a value copied from it: ``gpufacts``) raises
    # ``DetachedInstanceError`` at its first use, every time, rather than only when
    # a later batch happens to expire it.

    @contextmanager
    def transaction(self) -> Iterator[SqlTx]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back when the block raises."""
        with Session(self.engine, expire_on_commit=True) as session:
            with session.begin():
                tx = SqlTx(session, self.requests)
                yield tx
            self.requests.publish(tx.remembered, tx.at)  # committed: a retry may find them

    @contextmanager
    def batch(self) -> Iterator[SqlTx]:
        """``transaction()`` for the head's writer, which makes one every batch, only
        ever from its one thread and never two at once: on a session and connection
        kept from one batch to the next (a fresh session, and taking a connection from
        the pool and giving it back, cost as much as a batch's own statements). A
        batch that fails takes them with it; the next starts on new ones."""
        session = self._writer
        if session is None:
            session = self._writer = Session(self.engine.connect(), expire_on_commit=True)
        try:
            with session.begin():
                tx = SqlTx(session, self.requests)
                yield tx
            self.requests.publish(tx.remembered, tx.at)  # committed: a retry may find them
        except BaseException:
            self._drop_writer()
            raise
        finally:
            session.expunge_all()  # no row outlives its transaction, as in ``transaction``

    def _drop_writer(self) -> None:
        session, self._writer = self._writer, None
        if session is not None:
            bind = session.bind
            session.close()
            if isinstance(bind, Connection):
                bind.close()  # back to the pool, rolled back

    @contextmanager
    def snapshot(self) -> Iterator[SqlTx]:
        """A read-only view: a deferred ``BEGIN`` (in WAL mode it never blocks the
        writer, nor waits for it), on a connection of its own; nothing is committed."""
        with Session(self._reader, expire_on_commit=False) as session:
            try:
                yield SqlTx(session, self.requests)  # closing it rolls the read back
            finally:
                session.expire_all()

    def jobs_namespace(self) -> str:
        return jobs_namespace(self.engine)

    def changes(self) -> ChangeFeed:
        """SQLite: none but the head commits; PostgreSQL: LISTEN/NOTIFY on a connection
        of its own (``pgchanges``)."""
        if self._own is None:
            return SoleWriter()
        from gputui.scheduler.store.pgchanges import PgChangeFeed  # psycopg: the extra

        return PgChangeFeed(self.engine, self._own)

    def close(self) -> None:
        self._drop_writer()
        self.engine.dispose()


if TYPE_CHECKING:  # mypy holds SqlStore, and so SqlTx and its parts, to the protocols
    _IS_A_STORE: type[Store] = SqlStore
