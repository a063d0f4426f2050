"""Online backups of the head's database through SQLite's backup API.

The copy is made while the head keeps writing: SQLite copies pages in steps and starts
again when another connection changes the source between two steps. Under a steady
stream of writes that could go on for ever, so after a few restarts the rest is copied
in one step, which holds one read snapshot (in WAL mode writers carry on meanwhile).
Either way the copy is one consistent state of the database, checked before it is kept.

One thing differs in the copy: its job ids go on ``JOB_ID_GAP`` further. A job id
names the job's run directory on its host, and the jobs submitted after a backup are
not in it; after a restore, new jobs must not take their ids (a launch would find a
run already there and take it for its own). Jobs that ran when the copy was made keep
their ids, so a restored head re-attaches to them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from gputui.scheduler.store.api import StoreError
from gputui.scheduler.store.engine import BUSY_TIMEOUT_MS, describe

Progress = Callable[[int, int], None]
"""Called after each step with (pages copied, pages in all)."""

JOB_ID_GAP = 1_000_000
"""How far a backup's next job id jumps (more jobs than a team submits between a
backup and its restore)."""
STEP_PAGES = 1024
"""Pages per step: 4 MiB with SQLite's default page size."""
MAX_RESTARTS = 3


class _Restarted(Exception):
    """The source kept changing under the stepwise copy."""


class _Steps:
    """The progress callback SQLite calls after each step; notices restarts."""

    def __init__(self, progress: Progress | None, may_restart: bool) -> None:
        self.progress = progress
        self.may_restart = may_restart
        self.restarts = 0
        self.remaining: int | None = None

    def __call__(self, _status: int, remaining: int, total: int) -> None:
        # A step always copies pages; one that leaves as much to do started over.
        if self.remaining is not None and remaining >= self.remaining:
            self.restarts += 1
            if self.may_restart and self.restarts > MAX_RESTARTS:
                raise _Restarted
        self.remaining = remaining
        if self.progress is not None:
            self.progress(max(total - remaining, 0), total)


def backup(
    engine_or_path: Engine | Path | str,
    dest: Path,
    progress: Progress | None = None,
    *,
    step_pages: int = STEP_PAGES,
) -> int:
    """Copy the database to ``dest`` (a new file, 0600) and verify the copy.

    ``engine_or_path``: the head's engine, or the database file (a head may be running
    on it; the file is only read). Refuses an existing ``dest``. Returns the pages copied.
    """
    dest = Path(dest)
    with _source(engine_or_path) as (source, name):
        _create(dest)
        try:
            pages = _copy(source, dest, progress, step_pages)
            _verify(dest)
            _sync(dest)
        except BaseException as e:
            _discard(dest)
            if isinstance(e, sqlite3.Error):
                raise StoreError(f"backup of database {name} to {dest} failed: {e}") from e
            raise
    return pages


@contextmanager
def _source(engine_or_path: Engine | Path | str) -> Iterator[tuple[sqlite3.Connection, str]]:
    """The source as a sqlite3 connection: one of the engine's, or the file opened as is
    (its journal mode untouched; never created when missing)."""
    if isinstance(engine_or_path, Engine):
        engine = engine_or_path
        if engine.dialect.name != "sqlite":
            raise StoreError(
                f"backup copies SQLite files only; back up {describe(engine)} with its tools"
            )
        try:
            raw = engine.raw_connection()
        except SQLAlchemyError as e:
            orig = getattr(e, "orig", None) or e
            raise StoreError(f"cannot read database {describe(engine)}: {orig}") from e
        try:
            yield cast(sqlite3.Connection, raw.driver_connection), describe(engine)
        finally:
            raw.close()
        return
    source = Path(engine_or_path)
    if not source.is_file():
        raise StoreError(f"no database at {source}; name the head's --database file")
    uri = source.resolve().as_uri() + "?mode=rw"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as e:
        raise StoreError(f"cannot read database {source}: {e}") from e
    try:
        yield conn, str(source)
    finally:
        conn.close()


def _create(dest: Path) -> None:
    try:
        fd = os.open(dest, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    except FileExistsError as e:
        raise StoreError(f"backup file {dest} already exists; name a new file") from e
    except OSError as e:
        raise StoreError(f"cannot create backup file {dest}: {e.strerror}") from e
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _copy(source: sqlite3.Connection, dest: Path, progress: Progress | None, step: int) -> int:
    target = sqlite3.connect(dest, isolation_level=None)
    try:
        try:
            source.backup(target, pages=step, progress=_Steps(progress, True))
        except _Restarted:
            source.backup(target, pages=-1, progress=_Steps(progress, False))
        # A self-contained file: no write-ahead log to carry along with it.
        target.execute("PRAGMA journal_mode = DELETE").fetchone()
        _skip_job_ids(target)
        return int(target.execute("PRAGMA page_count").fetchone()[0])
    finally:
        target.close()


def _skip_job_ids(target: sqlite3.Connection) -> None:
    """The copy's next job id is ``JOB_ID_GAP`` past the last one it knows."""
    known = target.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'"
    ).fetchone()
    if known is None:
        return  # not a head's database yet (no job table): nothing to skip
    target.execute("BEGIN IMMEDIATE")
    moved = target.execute(
        "UPDATE sqlite_sequence SET seq = seq + ? WHERE name = 'job'", (JOB_ID_GAP,)
    ).rowcount
    if not moved:
        target.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('job', ?)", (JOB_ID_GAP,))
    target.execute("COMMIT")


def _verify(dest: Path) -> None:
    check = sqlite3.connect(dest, isolation_level=None)
    try:
        rows = [str(row[0]) for row in check.execute("PRAGMA integrity_check").fetchall()]
    finally:
        check.close()
    if rows != ["ok"]:
        first = " ".join((rows[0] if rows else "no answer").split())[:200]
        raise StoreError(f"backup {dest} failed its integrity check ({first}); it was removed")


def _sync(dest: Path) -> None:
    """The copy and its directory entry on disk before we say it exists."""
    fd = os.open(dest, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        dfd = os.open(dest.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _discard(dest: Path) -> None:
    for leftover in (dest, Path(f"{dest}-journal"), Path(f"{dest}-wal"), Path(f"{dest}-shm")):
        with contextlib.suppress(OSError):
            leftover.unlink()
