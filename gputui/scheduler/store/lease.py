"""The head's lease on a PostgreSQL database two heads share: which one leads, and
the fence that keeps every other from writing.

One row of ``head_lease`` (revision 0010). A head takes it when it has expired,
judged by the database server's clock (so no machine's clock matters), and the
taking adds one to ``epoch``: a number that only grows, the fencing token. The
leader renews it every tick; a renewal that finds another epoch there means the
lease was lost. Every write transaction of the leader (``pgengine``'s ``begin``,
right after the writer's advisory lock) reads the row and refuses to go on when
its epoch is not the leader's own, or when the lease has expired by the server's
clock (``Fenced``): a leader paused past its lease (SIGSTOP, a frozen VM, a long
GC) can never write after another took over, whatever its own clocks say.

The row is read without a lock, so neither a renewal nor a taking ever waits
behind a write batch. What orders a takeover after the old leader's writes is the
writer's lock: a write transaction of the old leader already past its check holds
it to its end, and the new leader's first transaction (its load of the store, a
write transaction: ``Head._load``) takes it first, so it waits for that one to
commit (under the old epoch) or roll back, and reads what it wrote. A transaction
of the old leader begun after the taking reads the new epoch and is refused.
Every write transaction is also told to end when idle for half the lease
(``idle_in_transaction_session_timeout``): a paused leader holding one open is
ended by the server, so the new leader waits at most that. The check is part of
the transaction, unlike a lock held by a session, so all of it works through a
pooler (PgBouncer's transaction mode) too.

The lease itself is taken and renewed on a connection of its own, in autocommit,
with a statement timeout: never behind the writer's lock, never longer than half
the lease.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from gputui.common.text import error_line

FENCE = "gputui_fence"
"""Execution option of a store's engine: its ``Fence`` (PostgreSQL only)."""

_NOW = "EXTRACT(EPOCH FROM clock_timestamp())"
LEASE_TABLE_LOCK = 0x67707574_75690002
"""The advisory lock under which the lease's table is made (by a head before it takes
the lease, or by migration 0010): two heads starting at once on an empty database
would otherwise race in ``CREATE TABLE IF NOT EXISTS`` (the server's catalog refuses
the second)."""
_ENSURE = (
    f"SELECT pg_advisory_xact_lock({LEASE_TABLE_LOCK:d})",
    "CREATE TABLE IF NOT EXISTS head_lease (id INTEGER NOT NULL,"
    " epoch BIGINT DEFAULT '0' NOT NULL, holder TEXT NOT NULL,"
    " expires FLOAT DEFAULT '0' NOT NULL, CONSTRAINT pk_head_lease PRIMARY KEY (id))",
    "INSERT INTO head_lease (id, epoch, holder, expires) VALUES (1, 0, '', 0)"
    " ON CONFLICT (id) DO NOTHING",
)
"""The lease's table and its one row, made if missing (as migration 0010 makes them):
a head takes the lease before it migrates the database, which only the leader does."""
_TAKE = (
    f"UPDATE head_lease SET epoch = epoch + 1, holder = %s, expires = {_NOW} + %s"  # noqa: S608
    f" WHERE id = 1 AND (expires < {_NOW} OR holder = %s) RETURNING epoch"
)
_TAKE_FROM = (
    f"UPDATE head_lease SET epoch = epoch + 1, holder = %s, expires = {_NOW} + %s"  # noqa: S608
    " WHERE id = 1 AND epoch = %s AND holder = %s RETURNING epoch"
)
_RENEW = (
    f"UPDATE head_lease SET expires = {_NOW} + %s"  # noqa: S608
    " WHERE id = 1 AND epoch = %s AND holder = %s RETURNING epoch"
)
_RELEASE = "UPDATE head_lease SET expires = 0 WHERE id = 1 AND epoch = %s AND holder = %s"
_READ = f"SELECT epoch, holder, expires - {_NOW} FROM head_lease WHERE id = 1"  # noqa: S608
_CHECK = (
    f"SELECT epoch, expires > {_NOW},"  # noqa: S608
    " set_config('idle_in_transaction_session_timeout', '{idle_ms:d}', true)"
    " FROM head_lease WHERE id = 1"
)
"""One round trip, no row lock: the epoch, whether the lease is still unexpired by the
server's clock, and this transaction ended by the server should it sit idle (its head
paused) for half the lease."""


def half_lease_ms(lease_s: float) -> int:
    """Half the lease in milliseconds (at least 500): how long a write transaction may
    sit idle before the server ends it, and how long a statement of the lease's own
    connection may take (or wait for a lock)."""
    return max(500, int(lease_s * 500))


class Fenced(SQLAlchemyError):
    """A write refused: this head no longer holds the lease (another took it)."""


class LeaseUnreachable(SQLAlchemyError):
    """The lease could not be read, taken or renewed (the server's words, one line)."""


@dataclass(frozen=True)
class LeaseState:
    """The lease as the database has it now."""

    epoch: int
    holder: str
    left_s: float
    """Seconds until it expires by the server's clock (negative: expired)."""


class Fence:
    """The epoch a store's writes must still hold (None: not yet leading: every write
    is refused), and how long one of them may sit idle (milliseconds)."""

    __slots__ = ("epoch", "idle_ms")

    def __init__(self, lease_s: float) -> None:
        self.epoch: int | None = None
        self.idle_ms = half_lease_ms(lease_s)


def fence(engine: Engine, lease_s: float) -> Fence:
    """Fence ``engine``'s write transactions from now on (connections made after
    this; call it before the store's first transaction)."""
    guard = Fence(lease_s)
    engine.update_execution_options(**{FENCE: guard})
    return guard


def check_fence(conn: Connection) -> None:
    """In a write transaction, after the writer's lock (``pgengine``): refuse it
    unless the lease's epoch is still this head's and the lease has not expired by
    the server's clock. The row is read, not locked: the leader's renewals never
    wait behind its write batches."""
    guard = conn.get_execution_options().get(FENCE)
    if not isinstance(guard, Fence):
        return
    row = conn.exec_driver_sql(_CHECK.format(idle_ms=guard.idle_ms)).first()
    epoch = None if row is None else int(row[0])
    if guard.epoch is None or epoch != guard.epoch:
        raise Fenced(
            f"this head no longer holds the lease (epoch now {epoch}, ours {guard.epoch});"
            " nothing written"
        )
    if row is None or not row[1]:
        raise Fenced(f"this head's lease (epoch {epoch}) has expired; nothing written")


class HeadLease:
    """The lease's statements, on a connection of their own (blocking: run them on
    a thread). ``holder`` names this head (``leader.holder_name``)."""

    def __init__(self, engine: Engine, holder: str, lease_s: float) -> None:
        if not lease_s > 0:  # its bounds are the config's (``head.lease_s``)
            raise ValueError(f"lease {lease_s} s: not a positive number of seconds")
        self.holder = holder[:200]
        self.lease_s = float(lease_s)
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        self._connect_args: tuple[list[Any], dict[str, Any]] = (list(cargs), dict(cparams))
        self._conn: Any = None
        self._ensured = False

    def _cursor(self) -> Any:
        if self._conn is None or self._conn.closed:
            import psycopg

            args, params = self._connect_args
            timeout_ms = half_lease_ms(self.lease_s)
            options = (
                f"{params.get('options', '')} -c synchronous_commit=on"
                f" -c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}"
            ).strip()  # a taking is durable once acknowledged, as every commit of the head
            params = {**params, "options": options, "connect_timeout": max(2, int(self.lease_s))}
            self._conn = psycopg.connect(*args, **params, autocommit=True)
        return self._conn.cursor()

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        import psycopg

        try:
            with self._cursor() as cursor:
                cursor.execute(sql, params or None)
                return cursor.fetchone() if cursor.description is not None else None
        except (psycopg.Error, OSError) as exc:
            self.close()  # the next call starts on a new connection
            raise LeaseUnreachable(f"the head's lease: {error_line(exc)}") from None

    def _ensure(self) -> None:
        """``_ENSURE``, in one transaction (once: the table stays)."""
        import psycopg

        if self._ensured:
            return
        try:
            cursor = self._cursor()
            with self._conn.transaction(), cursor:
                for sql in _ENSURE:
                    cursor.execute(sql)
        except (psycopg.Error, OSError) as exc:
            self.close()
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise LeaseUnreachable(f"the head's lease: {why}") from None
        self._ensured = True

    def take(self) -> int | None:
        """Take the lease if it has expired (or is this head's): the new epoch; None
        when another head holds it. Makes the lease's table first, if missing."""
        self._ensure()
        row = self._run(_TAKE, (self.holder, self.lease_s, self.holder))
        return None if row is None else int(row[0])

    def take_from(self, epoch: int, holder: str) -> int | None:
        """Take the lease before it expires from a holder known to be dead (the new
        epoch), unless it has changed hands since: None then."""
        row = self._run(_TAKE_FROM, (self.holder, self.lease_s, epoch, holder))
        return None if row is None else int(row[0])

    def renew(self, epoch: int) -> bool:
        """Extend the lease taken at ``epoch``; False when another head has taken it."""
        return self._run(_RENEW, (self.lease_s, epoch, self.holder)) is not None

    def release(self, epoch: int) -> None:
        """Let the lease expire now (a clean stop): a standby takes it at its next look."""
        self._run(_RELEASE, (epoch, self.holder))

    def state(self) -> LeaseState | None:
        row = self._run(_READ)
        return None if row is None else LeaseState(int(row[0]), str(row[1]), float(row[2]))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
