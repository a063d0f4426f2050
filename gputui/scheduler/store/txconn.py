"""``TxConn``: one transaction's session and its one DB-API cursor, shared by
``SqlTx`` and its parts (usage, health board, readings)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from gputui.scheduler.store.pgengine import QmarkCursor


class TxConn:
    """The session of one transaction, and a DB-API cursor on its connection.

    The fast paths (the request log, the submission path, accounting's upserts,
    readings) run plain SQL with qmark parameters straight on the cursor: SQLAlchemy's
    statement building cost more than the statements. One cursor serves the whole
    transaction, made at its first use (the session's one connection); on PostgreSQL
    it takes that SQL through ``QmarkCursor``."""

    __slots__ = ("_raw", "s")

    def __init__(self, session: Session) -> None:
        self.s = session
        self._raw: Any = None

    def cursor(self) -> Any:
        if self._raw is None:
            conn = self.s.connection()
            cursor = conn.connection.cursor()
            self._raw = cursor if conn.dialect.name == "sqlite" else QmarkCursor(cursor)
        return self._raw
