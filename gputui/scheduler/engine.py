"""Where the head's database lives and how it is opened: the one place for SQLite's rules.

``open_store`` is the whole start-up: a safe location (0700 directory, 0600 file, local
disk), an engine whose every connection runs with WAL, ``synchronous=FULL`` and foreign
keys, whose every transaction is ``BEGIN IMMEDIATE`` (the write lock is taken at BEGIN,
so a transaction never fails half-way on a lock upgrade), an integrity check, and the
Alembic upgrade. SQLite-only settings stay inside ``if sqlite`` so a PostgreSQL URL works.
Nothing connects at import. ``backup`` (SQLite's online backup) lives in ``.backup``.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import sqlite3
import stat
import string
from functools import partial
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import QueuePool
from sqlmodel import Session

from gputui.protocol_ops import NAMESPACE

from .tables import Meta

MOUNTINFO = Path("/proc/self/mountinfo")
NETWORK_FSTYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "ceph", "glusterfs",
        "lustre", "afs", "gpfs", "beegfs", "fuse.ceph-fuse", "fuse.glusterfs",
    }
)  # fmt: skip
BUSY_TIMEOUT_MS = 5000
NAMESPACE_KEY = "jobs_ns"
_NS_ALPHABET = string.ascii_lowercase + string.digits
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class StoreError(Exception):
    """The database cannot be used; ``str()`` is one line naming the file and what to do."""


# -- location ------------------------------------------------------------------------


def prepare_location(path: Path, *, mountinfo: Path = MOUNTINFO) -> None:
    """Make ``path``'s directory (0700) and file (0600) safe to hold the head's state.

    Refuses a directory others can write or that is not ours, a file that is a symlink,
    not regular or not ours, and a network filesystem (SQLite's locking is unsafe there).
    """
    path = Path(path)
    directory = path.parent
    uid = os.geteuid()
    check_local_disk(directory, mountinfo=mountinfo)
    try:
        if not directory.exists():
            directory.parent.mkdir(parents=True, exist_ok=True)
            directory.mkdir(mode=0o700)
            os.chmod(directory, 0o700)
        info = directory.stat()
    except OSError as e:
        raise StoreError(f"cannot create the database directory {directory}: {_os_why(e)}") from e
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{directory} is not a directory; choose another --database")
    if info.st_uid != uid:
        raise StoreError(
            f"database directory {directory} belongs to uid {info.st_uid}, not to this user "
            f"(uid {uid}); chown it or choose another --database"
        )
    if info.st_mode & 0o022:
        raise StoreError(
            f"database directory {directory} is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):04o}); run chmod 700 {directory}"
        )
    _secure_file(path, uid, create=True)
    for suffix in ("-wal", "-shm"):
        _secure_file(Path(f"{path}{suffix}"), uid, create=False)


def _secure_file(path: Path, uid: int, *, create: bool) -> None:
    """Open without following links or blocking, then check and chmod what was opened."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if not create:
            return
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise StoreError(f"cannot create database {path}: {_os_why(e)}") from e
    except OSError as e:
        if path.is_symlink():
            raise StoreError(
                f"database {path} is a symbolic link; name the real file with --database"
            ) from e
        raise StoreError(f"cannot open database {path}: {_os_why(e)}") from e
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"database {path} is not a regular file; choose another --database")
        if info.st_uid != uid:
            raise StoreError(
                f"database {path} belongs to uid {info.st_uid}, not to this user (uid {uid}); "
                "chown it or choose another --database"
            )
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    except OSError as e:
        raise StoreError(f"cannot set mode 0600 on database {path}: {_os_why(e)}") from e
    finally:
        os.close(fd)


def check_local_disk(directory: Path, *, mountinfo: Path = MOUNTINFO) -> None:
    """Refuse a directory on a network filesystem; say nothing when the mount table is
    unreadable (not Linux): that cannot be told, so it is not guessed."""
    try:
        text = os.fsdecode(mountinfo.read_bytes())
    except OSError:
        return
    real = os.path.realpath(directory)
    found = mount_of(real, text)
    if found is not None and found[1] in NETWORK_FSTYPES:
        point, fstype = found
        raise StoreError(
            f"database directory {directory} is on a network filesystem ({fstype} at {point}); "
            "SQLite's locking is unsafe there, so use a local disk for --database"
        )


_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_of(real_path: str, mountinfo_text: str) -> tuple[str, str] | None:
    """``(mount point, fstype)`` of the mount holding ``real_path``: the longest mount
    point that is a prefix of it (the later line wins a tie: it is mounted on top).
    Lines that do not parse are skipped; see proc(5) for the format."""
    best: tuple[str, str] | None = None
    for line in mountinfo_text.splitlines():
        fields = line.split(" ")
        try:
            sep = fields.index("-", 6)
        except ValueError:
            continue
        if sep + 1 >= len(fields):
            continue
        point, fstype = _unescape(fields[4]), _unescape(fields[sep + 1])
        if not point.startswith("/") or not _under(real_path, point):
            continue
        if best is None or len(point) >= len(best[0]):
            best = (point, fstype)
    return best


def _under(path: str, point: str) -> bool:
    if point == "/":
        return path.startswith("/")
    point = point.rstrip("/")
    return path == point or path.startswith(point + "/")


def _os_why(e: OSError) -> str:
    return e.strerror or type(e).__name__


# -- engine --------------------------------------------------------------------------


def make_engine(url_or_path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Engine:
    """An engine for a path (SQLite) or a SQLAlchemy URL; nothing connects until used.

    SQLite: a pooled connection for the head's writer, which keeps it
    (``JobStore.batch``), and up to three more for snapshot reads, other
    transactions and backups, usable from any thread, WAL + ``synchronous=FULL`` + foreign
    keys + a busy timeout on every connection, ``BEGIN IMMEDIATE`` for every
    transaction but a ``SNAPSHOT`` one (pysqlite's own BEGIN handling is switched off).
    """
    url = _url(url_or_path)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
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
    if isinstance(url_or_path, str) and "://" in url_or_path:
        return make_url(url_or_path)
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


SNAPSHOT = "gputui_snapshot"
"""Execution option of a read-only engine view: its transactions are a deferred
``BEGIN`` (a WAL snapshot) instead of ``BEGIN IMMEDIATE`` (``JobStore.snapshot``)."""


def _begin_immediate(conn: Connection) -> None:
    deferred = conn.get_execution_options().get(SNAPSHOT, False)
    conn.exec_driver_sql("BEGIN" if deferred else "BEGIN IMMEDIATE")


def hold_exclusively(database: Path) -> int:
    """Take ``DATABASE.lock`` for this process's lifetime (the kernel lets go when it
    ends, however it ends); ``StoreError`` when another head holds it. Two heads on
    one database would each schedule onto the same GPUs."""
    lock = Path(f"{database}.lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise StoreError(f"cannot open {lock}: {_os_why(e)}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"database {database} is in use by another gputui head; stop it first"
        ) from None
    except OSError as e:
        os.close(fd)
        raise StoreError(f"cannot lock {lock}: {_os_why(e)}") from e
    return fd


def describe(engine: Engine) -> str:
    """How a message names the database: the file, or the URL without its password."""
    if engine.dialect.name == "sqlite":
        return str(engine.url.database)
    return engine.url.render_as_string(hide_password=True)


def _why(e: BaseException) -> str:
    """The driver's own words for a failure, on one line."""
    orig = getattr(e, "orig", None) or e
    text = " ".join(str(orig).split()) or type(orig).__name__
    return text[:200]


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


def upgrade(engine: Engine, config: Config | None = None) -> str:
    """Bring the schema to the newest revision this gputui knows, in one transaction.

    A fresh file is created at head. A file written by a newer gputui is refused.
    Returns the revision now applied.
    """
    cfg = config if config is not None else alembic_config()
    name = describe(engine)
    try:
        script = ScriptDirectory.from_config(cfg)
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
        foreign = [t for t in inspect(conn).get_table_names() if not t.startswith("sqlite_")]
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
