"""Online backups: a consistent, verified 0600 copy, even while the head keeps writing."""

from __future__ import annotations

import itertools
import sqlite3
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from gputui.scheduler.store.api import StoreError
from gputui.scheduler.store.backup import JOB_ID_GAP, MAX_RESTARTS, backup
from gputui.scheduler.store.engine import jobs_namespace, make_engine, open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Meta, Notice

JOB_ROW = {
    "uid": 1, "user": "alice", "group": "alice", "name": "", "argv": '["train"]',
    "cwd": "/", "env": "{}", "gpus": 1, "pool": None, "host_constraint": None,
    "priority": "normal", "preemptible": False, "time_limit_s": None, "submitted_at": 1.0,
    "state": "queued", "reason": "Resources", "requeues": 0, "launches": 0,
    "gpu_uuids": "[]", "project": None,
}  # fmt: skip


def _fill(engine: Engine, rows: int) -> None:
    with Session(engine) as session, session.begin():
        session.add_all(
            Notice(uid=1, time=float(n), kind="seed", text=f"{n:06d}" + "x" * 400)
            for n in range(rows)
        )


class Writer(threading.Thread):
    """Commits transactions that each add a notice and bump a counter kept in ``meta``:
    a copy is consistent exactly when the two agree."""

    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.engine = make_engine(db)
        self.stop = threading.Event()
        self.changed = threading.Condition()
        self.commits = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                with Session(self.engine) as session, session.begin():
                    n = self.commits + 1
                    session.add(Notice(uid=2, time=float(n), kind="w", text="y" * 200))
                    session.merge(Meta(key="writes", value=str(n)))
                with self.changed:
                    self.commits = n
                    self.changed.notify_all()
        except BaseException as e:  # reported by the test, not lost in the thread
            self.error = e
            with self.changed:
                self.changed.notify_all()
        finally:
            self.engine.dispose()

    def wait_commits(self, at_least: int) -> None:
        with self.changed:
            assert self.changed.wait_for(
                lambda: self.commits >= at_least or self.error is not None, timeout=15
            ), "the writer made no progress"
        assert self.error is None, self.error


@pytest.fixture
def writer(db: Path, store: Engine) -> Iterator[Writer]:
    thread = Writer(db)
    thread.start()
    yield thread
    thread.stop.set()
    thread.join(timeout=15)
    assert not thread.is_alive()
    assert thread.error is None, thread.error


def _consistent(copy: Path) -> tuple[int, int]:
    conn = sqlite3.connect(copy)
    try:
        notices = conn.execute("SELECT count(*) FROM notice WHERE kind = 'w'").fetchone()[0]
        row = conn.execute("SELECT value FROM meta WHERE key = 'writes'").fetchone()
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    return notices, int(row[0]) if row else 0


def test_backup_while_another_connection_writes(
    tmp_path: Path, store: Engine, writer: Writer
) -> None:
    _fill(store, 3000)  # about 350 pages: many steps of 16
    calls: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        writer.wait_commits(writer.commits + 1)  # the source changes between every two steps

    started = writer.commits
    dest = tmp_path / "copy.db"
    pages = backup(store, dest, progress, step_pages=16)
    notices, counted = _consistent(dest)
    assert notices == counted  # one state of the database, not a mix of two
    assert counted > started  # and writes made during the backup went on meanwhile
    # The stepwise copy kept starting over (a step that did not get further), then the
    # rest went in one step.
    restarts = sum(1 for (a, _), (b, _) in itertools.pairwise(calls) if b <= a)
    assert restarts == MAX_RESTARTS
    assert calls[-2][0] < calls[-2][1]
    assert calls[-1][0] == calls[-1][1]
    copy = sqlite3.connect(dest)
    assert pages == copy.execute("PRAGMA page_count").fetchone()[0]
    copy.close()


def test_backup_is_a_private_self_contained_restorable_file(
    tmp_path: Path, store: Engine, mountinfo: Path
) -> None:
    _fill(store, 200)
    dest = tmp_path / "backups" / "head.db"
    dest.parent.mkdir()
    seen: list[tuple[int, int]] = []
    pages = backup(store, dest, lambda done, total: seen.append((done, total)))
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    assert seen[-1] == (pages, pages)
    assert not Path(f"{dest}-wal").exists()
    conn = sqlite3.connect(dest)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    restored = open_store(dest, mountinfo=mountinfo)  # what a restore does with it
    try:
        assert jobs_namespace(restored) == jobs_namespace(store)
        with Session(restored) as session:
            assert session.get(Notice, 200) is not None
    finally:
        restored.dispose()


def test_jobs_made_after_a_restore_never_take_the_ids_of_jobs_made_after_the_backup(
    tmp_path: Path, store: Engine, mountinfo: Path
) -> None:
    def submit(engine: Engine, name: str) -> int:
        with SqlStore(engine).transaction() as tx:
            (job_id,) = tx.insert_jobs([{**JOB_ROW, "name": name}])
        return job_id

    before = [submit(store, f"before-{n}") for n in range(3)]
    dest = tmp_path / "head-backup.db"
    backup(store, dest)
    after = submit(store, "after the backup")  # runs on a host; the backup has no row
    restored = open_store(dest, mountinfo=mountinfo)
    try:
        new = submit(restored, "after the restore")
        with SqlStore(restored).snapshot() as tx:
            kept = [j.name for j in map(tx.job, before) if j is not None]
        assert kept == [f"before-{n}" for n in range(3)]
    finally:
        restored.dispose()
    assert after == before[-1] + 1
    assert new == before[-1] + 1 + JOB_ID_GAP


def test_backup_never_overwrites(tmp_path: Path, store: Engine) -> None:
    dest = tmp_path / "old-backup.db"
    dest.write_bytes(b"yesterday's backup")
    with pytest.raises(StoreError) as error:
        backup(store, dest)
    assert str(error.value) == f"backup file {dest} already exists; name a new file"
    assert dest.read_bytes() == b"yesterday's backup"
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "target.db")
    with pytest.raises(StoreError, match="already exists"):
        backup(store, link)
    assert not (tmp_path / "target.db").exists()


def test_backup_of_a_file_while_its_head_holds_the_write_lock(
    tmp_path: Path, db: Path, store: Engine
) -> None:
    _fill(store, 50)
    with store.connect() as held:
        held.begin()  # the head in the middle of a transaction
        held.exec_driver_sql("INSERT INTO meta (key, value) VALUES ('uncommitted', '1')")
        backup(db, tmp_path / "copy.db")
        held.rollback()
    conn = sqlite3.connect(tmp_path / "copy.db")
    assert conn.execute("SELECT count(*) FROM notice").fetchone() == (50,)
    assert conn.execute("SELECT count(*) FROM meta WHERE key = 'uncommitted'").fetchone() == (0,)
    conn.close()


def test_backup_refusals_are_one_line(tmp_path: Path, store: Engine) -> None:
    with pytest.raises(StoreError) as missing:
        backup(tmp_path / "nowhere.db", tmp_path / "copy.db")
    assert str(missing.value) == (
        f"no database at {tmp_path / 'nowhere.db'}; name the head's --database file"
    )
    assert not (tmp_path / "nowhere.db").exists()
    with pytest.raises(StoreError, match=r"^cannot create backup file .*: No such file"):
        backup(store, tmp_path / "no-dir" / "copy.db")
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n" * 300)
    with pytest.raises(StoreError, match=r"^backup of database .* failed: file is not a database"):
        backup(junk, tmp_path / "copy.db")
    assert not (tmp_path / "copy.db").exists()  # a failed copy is not left behind


def test_a_failing_progress_callback_leaves_no_copy(tmp_path: Path, store: Engine) -> None:
    _fill(store, 500)

    def progress(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        backup(store, tmp_path / "copy.db", progress, step_pages=8)
    assert not (tmp_path / "copy.db").exists()
