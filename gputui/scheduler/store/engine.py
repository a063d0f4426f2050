"""How the head's database is opened: the one place for SQLite's rules.

``open_store`` is the whole start-up: a safe location (``location``: 0700 directory,
0600 file, local disk), an engine whose every connection runs with WAL,
``synchronous=FULL`` and foreign keys, whose every transaction is ``BEGIN IMMEDIATE``
(the write lock is taken at BEGIN, so a transaction never fails half-way on a lock
upgrade), an integrity check, and the Alembic upgrade. SQLite-only settings stay inside
``if sqlite`` so a PostgreSQL URL works. Nothing connects at import. ``backup``
(SQLite's online backup) lives in ``.backup``.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import string
from functools import cache, partial
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import QueuePool
from sqlmodel import Session

from gputui.common.text import error_line
from gputui.scheduler.store.api import SNAPSHOT, StoreError
from gputui.scheduler.store.location import MOUNTINFO, prepare_location
from gputui.scheduler.store.pgengine import postgres_engine
from gputui.scheduler.store.tables import Meta
from gputui.wire.ops import NAMESPACE

BUSY_TIMEOUT_MS = 5000
NAMESPACE_KEY = "jobs_ns"
_NS_ALPHABET = string.ascii_lowercase + string.digits
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BEFORE_SCHEMA = frozenset({"head_lease"})
"""What a database may hold before its first migration: the lease's table, which a
head on PostgreSQL makes before it takes the lease, and migrates after (``lease``)."""


# -- engine --------------------------------------------------------------------------


def make_engine(url_or_path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Engine:
    """An engine for a path (SQLite) or a SQLAlchemy URL; nothing connects until used.

    SQLite: a pooled connection for the head's writer, which keeps it
    (``SqlStore.batch``), and up to three more for snapshot reads, other
    transactions and backups, usable from any thread, WAL + ``synchronous=FULL`` + foreign
    keys + a busy timeout on every connection, ``BEGIN IMMEDIATE`` for every
    transaction but a ``SNAPSHOT`` one (pysqlite's own BEGIN handling is switched off).
    """
    url = _url(url_or_path)
    if url.get_backend_name() == "postgresql":
        return postgres_engine(url)
    if url.get_backend_name() != "sqlite":
        raise StoreError(
            f"database {url.render_as_string(hide_password=True)}: not SQLite nor PostgreSQL"
        )
    engine = create_engine(
        url,
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=3,
        connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
    )
    event.listen(engine, "connect", partial(_sqlite_connect, int(busy_timeout_ms)))
    event.listen(engine, "begin", _begin_immediate)
    return engine


def _url(url_or_path: str | Path) -> URL:
    if isinstance(url_or_path, str) and is_url(url_or_path):
        try:
            return make_url(url_or_path)
        except ArgumentError as e:  # not its words: the URL may hold a password
            raise StoreError("database URL is not one SQLAlchemy can read") from e
    return URL.create("sqlite+pysqlite", database=os.fspath(url_or_path))


def _sqlite_connect(busy_timeout_ms: int, dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (see _begin_immediate)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms:d}")
        mode = str(cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        if mode != "wal":
            raise sqlite3.OperationalError(f"cannot use a write-ahead log (journal is {mode})")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _begin_immediate(conn: Connection) -> None:
    deferred = conn.get_execution_options().get(SNAPSHOT, False)
    conn.exec_driver_sql("BEGIN" if deferred else "BEGIN IMMEDIATE")


def describe(engine: Engine) -> str:
    """How a message names the database: the file, or the URL without its password."""
    if engine.dialect.name == "sqlite":
        return str(engine.url.database)
    return engine.url.render_as_string(hide_password=True)


def _why(e: BaseException) -> str:
    """The driver's own words for a failure, on one line."""
    return error_line(getattr(e, "orig", None) or e)


def _sqlite_code(e: BaseException) -> str:
    orig = getattr(e, "orig", None) or e
    return str(getattr(orig, "sqlite_errorname", ""))


def _fail(e: BaseException, name: str, doing: str) -> StoreError:
    code = _sqlite_code(e)
    if code.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return _damaged(name, _why(e))
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreError(
            f"database {name} is locked by another program ({_why(e)}); "
            "is another gputui head using it?"
        )
    return StoreError(f"cannot {doing} database {name}: {_why(e)}")


def _damaged(name: str, problem: str) -> StoreError:
    return StoreError(
        f"database {name} is damaged ({problem}); stop the head and restore a backup "
        "made with 'gputui head backup PATH'"
    )


# -- integrity -------------------------------------------------------------------------


def check_integrity(engine: Engine, path: Path | str) -> None:
    """Run SQLite's full ``integrity_check``; a damaged file is refused before use."""
    if engine.dialect.name != "sqlite":
        return
    name = os.fspath(path)
    try:
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("PRAGMA integrity_check")
            rows = cursor.fetchall()
            cursor.close()
        finally:
            raw.close()
    except (SQLAlchemyError, sqlite3.Error) as e:
        raise _fail(e, name, "check") from e
    problems = [str(row[0]) for row in rows]
    if problems != ["ok"]:
        first = " ".join((problems[0] if problems else "no answer").split())[:200]
        raise _damaged(name, first)


# -- schema ------------------------------------------------------------------------------


def alembic_config(script_location: Path = MIGRATIONS) -> Config:
    """An Alembic config for the head's migrations; no ini file, no logging setup."""
    cfg = Config()
    cfg.set_main_option("script_location", os.fspath(script_location))
    return cfg


@cache
def _shipped_script() -> ScriptDirectory:
    """The migrations this gputui ships, read once (they do not change while it runs)."""
    return ScriptDirectory.from_config(alembic_config())


def upgrade(engine: Engine, config: Config | None = None) -> str:
    """Bring the schema to the newest revision this gputui knows, in one transaction.

    A fresh file is created at head. A file written by a newer gputui is refused.
    A file already at the newest revision is checked, not migrated again.
    Returns the revision now applied.
    """
    cfg = config if config is not None else alembic_config()
    name = describe(engine)
    try:
        script = _shipped_script() if config is None else ScriptDirectory.from_config(cfg)
        known = {rev.revision for rev in script.walk_revisions()}
        with engine.connect() as conn:
            sqlite = engine.dialect.name == "sqlite"
            # SQLite batch migrations copy tables; foreign keys would fire on the copy.
            # The pragma is a no-op inside a transaction, so it is set before BEGIN.
            if sqlite:
                _raw_pragma(conn, "PRAGMA foreign_keys = OFF")
            try:
                with conn.begin():
                    current = MigrationContext.configure(conn).get_current_heads()
                    _refuse_unknown(conn, name, current, known)
                    if set(current) != set(script.get_heads()):
                        cfg.attributes["connection"] = conn
                        command.upgrade(cfg, "head")
                    if sqlite and conn.exec_driver_sql("PRAGMA foreign_key_check").first():
                        raise StoreError(
                            f"upgrading database {name} would break its foreign keys; "
                            "nothing was changed"
                        )
                    heads = MigrationContext.configure(conn).get_current_heads()
            finally:
                cfg.attributes.pop("connection", None)
                if sqlite:
                    try:
                        _raw_pragma(conn, "PRAGMA foreign_keys = ON")
                    except sqlite3.Error:
                        conn.invalidate()  # never back into the pool without foreign keys
                        raise
    except StoreError:
        raise
    except (SQLAlchemyError, sqlite3.Error) as e:
        raise _fail(e, name, "upgrade") from e
    except Exception as e:  # alembic's own errors (a broken script directory)
        raise StoreError(f"cannot upgrade database {name}: {_why(e)}") from e
    return ",".join(heads)


def _refuse_unknown(conn: Connection, name: str, current: tuple[str, ...], known: set[str]) -> None:
    unknown = [rev for rev in current if rev not in known]
    if unknown:
        raise StoreError(
            f"database {name} was written by a newer gputui (schema {','.join(unknown)}); "
            "upgrade gputui or use another --database"
        )
    if not current:
        foreign = [
            t
            for t in inspect(conn).get_table_names()
            if not t.startswith("sqlite_") and t not in BEFORE_SCHEMA
        ]
        if foreign:
            raise StoreError(
                f"database {name} holds tables gputui did not create ({', '.join(foreign[:3])}"
                f"{', …' if len(foreign) > 3 else ''}); use another --database"
            )


def _raw_pragma(conn: Connection, sql: str) -> None:
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql)
    finally:
        cursor.close()


# -- the store as a whole --------------------------------------------------------------


def open_store(path: Path, *, mountinfo: Path = MOUNTINFO) -> Engine:
    """Everything the head does before it trusts its database; returns the engine."""
    path = Path(path)
    prepare_location(path, mountinfo=mountinfo)
    engine = make_engine(path)
    try:
        if _has_content(path):
            check_integrity(engine, path)
        upgrade(engine)
        _ensure_namespace(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def is_url(target: str | Path) -> bool:
    """A database given as a URL (PostgreSQL), not a SQLite file's path."""
    return isinstance(target, str) and "://" in target


def open_database(target: str | Path, *, mountinfo: Path = MOUNTINFO) -> Engine:
    """``open_store`` for a path; for a PostgreSQL URL, its engine, upgraded and
    given its namespace (the server keeps the data safe: no file checks)."""
    if not is_url(target):
        return open_store(Path(target), mountinfo=mountinfo)
    engine = make_engine(target)
    try:
        prepare(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def prepare(engine: Engine) -> None:
    """Bring a database's schema to the newest revision (``upgrade``) and give it its
    jobs namespace: what a head on PostgreSQL does once it holds the lease."""
    upgrade(engine)
    _ensure_namespace(engine)


def _has_content(path: Path) -> bool:
    """Anything stored yet: the file, or a write-ahead log not yet checkpointed into it."""
    for candidate in (path, Path(f"{path}-wal")):
        try:
            if candidate.stat().st_size > 0:
                return True
        except OSError:
            pass
    return False


def _ensure_namespace(engine: Engine) -> None:
    """Give a new database its jobs namespace (keeps two heads' jobs apart on a host)."""
    try:
        with Session(engine) as session, session.begin():
            if session.get(Meta, NAMESPACE_KEY) is None:
                token = "".join(secrets.choice(_NS_ALPHABET) for _ in range(16))
                session.add(Meta(key=NAMESPACE_KEY, value=token))
    except SQLAlchemyError as e:
        raise _fail(e, describe(engine), "write to") from e


def jobs_namespace(engine: Engine) -> str:
    """The namespace token this database's jobs use on hosts (``[a-z0-9]{8,32}``)."""
    try:
        with Session(engine) as session:
            row = session.get(Meta, NAMESPACE_KEY)
    except SQLAlchemyError as e:
        raise _fail(e, describe(engine), "read") from e
    if row is None or not NAMESPACE.fullmatch(row.value):
        raise StoreError(
            f"database {describe(engine)} has no valid jobs namespace; open it with the head"
        )
    return row.value
