"""The head's lease on a PostgreSQL database two heads share: which one leads, and
the fence that keeps every other from writing.

One row of ``head_lease`` (revision 0010). A head takes it when it has expired,
judged by the database server's clock (so no machine's clock matters), and the
taking adds one to ``epoch``: a number that only grows, the fencing token. The
leader renews it every tick; a renewal that finds another epoch there means the
lease was lost. Every write transaction of the leader (``pgengine``'s ``begin``,
right after the writer's advisory lock) reads the row ``FOR SHARE`` and refuses
to go on when its epoch is not the leader's own (``Fenced``): a leader paused past
its lease (SIGSTOP, a frozen VM, a long GC) can never write after another took
over, whatever its own clocks say. The share lock also orders the two: a taking
waits for a write transaction already past the check, which commits first, under
the old epoch. That transaction is also told to end when idle for half the lease
(``idle_in_transaction_session_timeout``): a paused leader holding one open is
ended by the server, so the standby waits at most the lease. A row lock is part
of the transaction, unlike an advisory lock held by a session, so all of it works
through a pooler (PgBouncer's transaction mode) too.

The lease itself is taken and renewed on a connection of its own, in autocommit,
with a statement timeout: never behind the writer's lock, never longer than the
lease.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

FENCE = "gputui_fence"
"""Execution option of a store's engine: its ``Fence`` (PostgreSQL only)."""

_NOW = "EXTRACT(EPOCH FROM clock_timestamp())"
_ENSURE = (
    "INSERT INTO head_lease (id, epoch, holder, expires) VALUES (1, 0, '', 0)"
    " ON CONFLICT (id) DO NOTHING"
)
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
    "SELECT epoch, set_config('idle_in_transaction_session_timeout', '{idle_ms:d}', true)"
    " FROM head_lease WHERE id = 1 FOR SHARE"
)
"""One round trip: the epoch, held; and this transaction ended by the server should
it sit idle (its head paused) for half the lease."""


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
        self.idle_ms = max(500, int(lease_s * 500))


def fence(engine: Engine, lease_s: float) -> Fence:
    """Fence ``engine``'s write transactions from now on (connections made after
    this; call it before the store's first transaction)."""
    guard = Fence(lease_s)
    engine.update_execution_options(**{FENCE: guard})
    return guard


def check_fence(conn: Connection) -> None:
    """In a write transaction, after the writer's lock (``pgengine``): refuse it
    unless the lease's epoch is still this head's, and hold the row ``FOR SHARE``
    to the end so no head can take the lease while it runs."""
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


class HeadLease:
    """The lease's statements, on a connection of their own (blocking: run them on
    a thread). ``holder`` names this head (``host:pid``)."""

    def __init__(self, engine: Engine, holder: str, lease_s: float) -> None:
        if not lease_s > 0:  # its bounds are the config's (``head.lease_s``)
            raise ValueError(f"lease {lease_s} s: not a positive number of seconds")
        self.holder = holder[:200]
        self.lease_s = float(lease_s)
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        self._connect_args: tuple[list[Any], dict[str, Any]] = (list(cargs), dict(cparams))
        self._conn: Any = None

    def _cursor(self) -> Any:
        if self._conn is None or self._conn.closed:
            import psycopg

            args, params = self._connect_args
            timeout_ms = max(500, int(self.lease_s * 500))
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
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise LeaseUnreachable(f"the head's lease: {why}") from None

    def take(self) -> int | None:
        """Take the lease if it has expired (or is this head's): the new epoch; None
        when another head holds it."""
        self._run(_ENSURE)
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
