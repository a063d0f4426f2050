"""The head's database file: location checks, connection settings, integrity, revisions.

Every test works on real SQLite files under tmp_path.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select
from test_migrations import HEAD

from gputui.scheduler.store.api import StoreError
from gputui.scheduler.store.engine import (
    check_integrity,
    jobs_namespace,
    make_engine,
    open_store,
    upgrade,
)
from gputui.scheduler.store.location import (
    check_local_disk,
    hold_exclusively,
    mount_of,
    prepare_location,
)
from gputui.scheduler.store.tables import Allocation, Claim, Meta, Notice

LOCAL_MOUNTS = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"


def one_line(error: pytest.ExceptionInfo[StoreError]) -> str:
    message = str(error.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# -- connection settings -----------------------------------------------------------------


def test_every_connection_runs_wal_full_with_foreign_keys(store: Engine) -> None:
    first, second = store.raw_connection(), store.raw_connection()  # two pooled connections
    try:
        assert first.driver_connection is not second.driver_connection
        for conn in (first, second):
            cursor = conn.cursor()
            for pragma, value in [
                ("journal_mode", "wal"),
                ("synchronous", 2),  # FULL
                ("foreign_keys", 1),
                ("busy_timeout", 5000),
            ]:
                cursor.execute(f"PRAGMA {pragma}")
                assert cursor.fetchone()[0] == value, pragma
            cursor.close()
    finally:
        first.close()
        second.close()


def test_make_engine_does_not_touch_the_file_until_used(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    engine = make_engine(path)
    assert not path.exists()
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
    assert path.exists()
    engine.dispose()
    url_engine = make_engine(f"sqlite:///{tmp_path / 'url.db'}")
    assert url_engine.url.database == str(tmp_path / "url.db")
    url_engine.dispose()


def test_transactions_take_the_write_lock_at_begin(store: Engine, db: Path) -> None:
    holder = make_engine(db)
    other = make_engine(db, busy_timeout_ms=50)
    waiting = other.connect()  # connected (pragmas run) before the lock is taken
    held = holder.connect()
    try:
        held.begin()  # nothing written, nothing read: only BEGIN
        with pytest.raises(OperationalError, match="database is locked"):
            waiting.begin()
        waiting.rollback()
        # A plain reader is not blocked: it is a write lock (WAL), taken at BEGIN.
        reader = sqlite3.connect(db)
        assert reader.execute("SELECT count(*) FROM meta").fetchone() == (1,)
        reader.close()
        held.rollback()
        with waiting.begin():
            assert waiting.exec_driver_sql("SELECT count(*) FROM meta").scalar() == 1
    finally:
        held.close()
        waiting.close()
        holder.dispose()
        other.dispose()


def test_a_commit_is_durable_and_visible_and_a_rollback_is_not(store: Engine, db: Path) -> None:
    with Session(store) as session, session.begin():
        session.add(Meta(key="kept", value="1"))
    with Session(store) as session, session.begin():
        session.add(Meta(key="dropped", value="1"))
        session.flush()
        session.rollback()
    outside = sqlite3.connect(db)
    keys = {row[0] for row in outside.execute("SELECT key FROM meta")}
    outside.close()
    assert "kept" in keys and "dropped" not in keys


def test_a_savepoint_inside_begin_immediate_undoes_only_its_block(store: Engine) -> None:
    with Session(store) as session, session.begin():
        session.add(Meta(key="outer", value="1"))
        nested = session.begin_nested()
        session.add(Meta(key="inner", value="1"))
        session.flush()
        nested.rollback()
    with Session(store) as session:
        keys = set(session.exec(select(Meta.key)).all())
    assert {"outer"} <= keys and "inner" not in keys


# -- location ------------------------------------------------------------------------


def test_directory_0700_and_file_0600(tmp_path: Path, mountinfo: Path) -> None:
    db = tmp_path / "a" / "b" / "state" / "gputui.db"
    prepare_location(db, mountinfo=mountinfo)
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_ISREG(db.lstat().st_mode)


def test_an_existing_file_is_made_0600(tmp_path: Path, mountinfo: Path) -> None:
    db = tmp_path / "gputui.db"
    db.write_bytes(b"")
    db.chmod(0o644)
    Path(f"{db}-wal").write_bytes(b"")
    Path(f"{db}-wal").chmod(0o644)
    prepare_location(db, mountinfo=mountinfo)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(f"{db}-wal").stat().st_mode) == 0o600


def test_group_writable_directory_refused(tmp_path: Path, mountinfo: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    with pytest.raises(StoreError) as error:
        prepare_location(shared / "gputui.db", mountinfo=mountinfo)
    assert f"database directory {shared} is writable by group or others" in one_line(error)
    assert "chmod 700" in str(error.value)
    assert not (shared / "gputui.db").exists()


def test_symlinked_database_refused(tmp_path: Path, mountinfo: Path) -> None:
    real = tmp_path / "real.db"
    real.write_bytes(b"")
    link = tmp_path / "gputui.db"
    link.symlink_to(real)
    with pytest.raises(StoreError) as error:
        prepare_location(link, mountinfo=mountinfo)
    assert one_line(error) == (
        f"database {link} is a symbolic link; name the real file with --database"
    )


def test_dangling_symlink_refused_and_not_followed(tmp_path: Path, mountinfo: Path) -> None:
    link = tmp_path / "gputui.db"
    link.symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(StoreError, match="symbolic link"):
        prepare_location(link, mountinfo=mountinfo)
    assert not (tmp_path / "elsewhere.db").exists()


def test_fifo_refused_without_blocking(tmp_path: Path, mountinfo: Path) -> None:
    fifo = tmp_path / "gputui.db"
    os.mkfifo(fifo)
    with pytest.raises(StoreError) as error:
        prepare_location(fifo, mountinfo=mountinfo)
    assert "is not a regular file" in one_line(error)


@pytest.mark.skipif(os.geteuid() != 0, reason="not root here: chown to another user needs root")
def test_files_of_another_user_refused(tmp_path: Path, mountinfo: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(StoreError, match=r"belongs to uid 65534, not to this user"):
        prepare_location(theirs / "gputui.db", mountinfo=mountinfo)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / "gputui.db").write_bytes(b"")
    os.chown(mine / "gputui.db", 65534, 65534)
    with pytest.raises(StoreError, match=r"database .*gputui.db belongs to uid 65534"):
        prepare_location(mine / "gputui.db", mountinfo=mountinfo)


def _table(*mounts: tuple[str, str]) -> str:
    lines = [LOCAL_MOUNTS.rstrip("\n")]
    for n, (point, fstype) in enumerate(mounts, start=100):
        escaped = point.replace("\\", "\\134").replace(" ", "\\040")
        lines.append(f"{n} 22 0:{n} / {escaped} rw,relatime shared:{n} - {fstype} srv:/x rw")
    return "\n".join(lines) + "\n"


@pytest.fixture
def real_tmp(tmp_path: Path) -> Path:
    """tmp_path with symlinks resolved: mount points are compared with real paths."""
    return Path(os.path.realpath(tmp_path))


def test_network_filesystem_refused(real_tmp: Path) -> None:
    tmp_path = real_tmp
    share = tmp_path / "team share"
    table = tmp_path / "mountinfo"
    table.write_text(_table((str(share), "nfs4")))
    db = share / "head" / "gputui.db"
    with pytest.raises(StoreError) as error:
        prepare_location(db, mountinfo=table)
    assert one_line(error) == (
        f"database directory {db.parent} is on a network filesystem (nfs4 at {share}); "
        "SQLite's locking is unsafe there, so use a local disk for --database"
    )
    assert not db.parent.exists()  # refused before anything was created


@pytest.mark.parametrize("fstype", ["nfs", "cifs", "smb3", "fuse.sshfs", "9p", "lustre", "ceph"])
def test_each_network_filesystem_refused(real_tmp: Path, fstype: str) -> None:
    tmp_path = real_tmp
    table = tmp_path / "mountinfo"
    table.write_text(_table((str(tmp_path / "net"), fstype)))
    with pytest.raises(StoreError, match=re.escape(f"({fstype} at ")):
        check_local_disk(tmp_path / "net" / "x", mountinfo=table)


def test_local_mount_inside_a_network_one_is_fine(real_tmp: Path) -> None:
    tmp_path = real_tmp
    table = tmp_path / "mountinfo"
    table.write_text(_table((str(tmp_path), "nfs"), (str(tmp_path / "scratch"), "xfs")))
    prepare_location(tmp_path / "scratch" / "head" / "gputui.db", mountinfo=table)
    with pytest.raises(StoreError):  # a sibling that only shares a name prefix is on NFS
        check_local_disk(tmp_path / "scratch2", mountinfo=table)


def test_unreadable_mount_table_is_not_guessed(tmp_path: Path) -> None:
    check_local_disk(tmp_path, mountinfo=tmp_path / "no-such-mountinfo")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=120), max_size=20), st.text(max_size=60))
def test_any_mount_table_text_gives_an_answer(lines: list[str], path: str) -> None:
    answer = mount_of("/" + path, "\n".join(lines))
    assert answer is None or (isinstance(answer[0], str) and isinstance(answer[1], str))


_segment = st.text(alphabet="abc \\-", min_size=1, max_size=4)
_mounts = st.lists(
    st.tuples(
        st.lists(_segment, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts)),
        st.sampled_from(["ext4", "xfs", "nfs", "nfs4", "tmpfs", "fuse.sshfs"]),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(_mounts, st.lists(_segment, max_size=4))
def test_mount_of_is_the_longest_mount_point_holding_the_path(
    mounts: list[tuple[str, str]], parts: list[str]
) -> None:
    path = "/" + "/".join(parts)
    expected = ("/", "ext4")
    for point, fstype in mounts:
        if (path == point or path.startswith(point + "/")) and len(point) >= len(expected[0]):
            expected = (point, fstype)
    assert mount_of(path, _table(*mounts)) == expected


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400))
def test_check_local_disk_on_any_mountinfo_bytes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    table = tmp_path_factory.mktemp("mi") / "mountinfo"
    table.write_bytes(data)
    try:
        check_local_disk(Path("/var/lib/gputui"), mountinfo=table)
    except StoreError as error:
        assert "\n" not in str(error)


# -- integrity and revisions -----------------------------------------------------------


DAMAGED = re.compile(
    r"database (?P<path>\S+) is damaged \((?P<why>[^\n]+)\); stop the head and restore a "
    r"backup made with 'gputui head backup PATH'"
)


def test_damaged_pages_refused(db: Path, mountinfo: Path) -> None:
    engine = open_store(db, mountinfo=mountinfo)
    with Session(engine) as session, session.begin():
        session.add_all(Notice(uid=1, time=float(n), kind="k", text="x" * 300) for n in range(50))
    engine.dispose()  # the last connection checkpoints the log into the file
    assert not Path(f"{db}-wal").exists()
    reader = sqlite3.connect(db)
    page = reader.execute("PRAGMA page_size").fetchone()[0]
    reader.close()
    with db.open("r+b") as f:  # page 2: past its header, into the cell pointers
        f.seek(page + 8)
        f.write(bytes(range(256)) * 2)
    with pytest.raises(StoreError) as error:
        open_store(db, mountinfo=mountinfo)
    match = DAMAGED.fullmatch(one_line(error))
    assert match is not None and match["path"] == str(db)
    assert "page 2" in match["why"].lower()


def test_a_file_that_is_no_database_refused(db: Path, mountinfo: Path) -> None:
    db.parent.mkdir(mode=0o700)
    db.write_text("hosts:\n  - name: gpu1\n" * 200)
    with pytest.raises(StoreError) as error:
        open_store(db, mountinfo=mountinfo)
    assert one_line(error) == (
        f"database {db} is damaged (file is not a database); stop the head and restore a "
        "backup made with 'gputui head backup PATH'"
    )


def test_check_integrity_passes_a_sound_file(store: Engine, db: Path) -> None:
    check_integrity(store, db)


def test_a_newer_schema_refused(store: Engine, db: Path, mountinfo: Path) -> None:
    with store.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0042'"))
    store.dispose()
    with pytest.raises(StoreError) as error:
        open_store(db, mountinfo=mountinfo)
    assert one_line(error) == (
        f"database {db} was written by a newer gputui (schema 0042); "
        "upgrade gputui or use another --database"
    )


def test_a_database_held_by_another_head_is_named(store: Engine, db: Path) -> None:
    impatient = make_engine(db, busy_timeout_ms=50)
    with store.connect() as held:
        held.begin()
        with pytest.raises(StoreError) as error:
            upgrade(impatient)
        held.rollback()
    assert one_line(error) == (
        f"database {db} is locked by another program (database is locked); "
        "is another gputui head using it?"
    )
    impatient.dispose()


def test_tables_without_a_revision_refused(db: Path, mountinfo: Path) -> None:
    db.parent.mkdir(mode=0o700)
    other = sqlite3.connect(db)
    other.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    other.commit()
    other.close()
    with pytest.raises(StoreError) as error:
        open_store(db, mountinfo=mountinfo)
    assert one_line(error) == (
        f"database {db} holds tables gputui did not create (invoices); use another --database"
    )


def test_fresh_file_is_created_at_head_and_reopens(db: Path, mountinfo: Path) -> None:
    engine = open_store(db, mountinfo=mountinfo)
    namespace = jobs_namespace(engine)
    assert re.fullmatch(r"[a-z0-9]{16}", namespace)
    assert upgrade(engine) == HEAD  # the newest revision
    engine.dispose()
    again = open_store(db, mountinfo=mountinfo)
    assert jobs_namespace(again) == namespace  # kept, not regenerated
    again.dispose()
    assert jobs_namespace_of_new_file(db.parent / "second.db", mountinfo) != namespace


def jobs_namespace_of_new_file(path: Path, mountinfo: Path) -> str:
    engine = open_store(path, mountinfo=mountinfo)
    try:
        return jobs_namespace(engine)
    finally:
        engine.dispose()


# -- what the database itself enforces ----------------------------------------------------


def _claim(session: Session) -> int:
    claim = Claim(uid=1000, user="ana", gpus=1, created_at=1.0)
    session.add(claim)
    session.flush()
    assert claim.id is not None
    return claim.id


def test_one_live_allocation_per_gpu(store: Engine) -> None:
    gpu = "GPU-0f1e2d3c-0000-1111-2222-333344445555"
    with Session(store) as session, session.begin():
        first, second = _claim(session), _claim(session)
        for start in (1.0, 2.0):  # ended allocations of the same GPU
            session.add(
                Allocation(gpu_uuid=gpu, host="h", claim_id=first, start_at=start, end_at=start)
            )
        session.add(Allocation(gpu_uuid=gpu, host="h", claim_id=first, start_at=3.0))
    unique = "UNIQUE constraint failed: allocation.gpu_uuid"
    with pytest.raises(IntegrityError, match=unique), Session(store) as session, session.begin():
        session.add(Allocation(gpu_uuid=gpu, host="h", claim_id=second, start_at=4.0))
    with Session(store) as session, session.begin():  # end the live one: the GPU is free
        live = session.exec(select(Allocation).where(col(Allocation.end_at).is_(None))).one()
        live.end_at = 5.0
        session.add(live)
    with Session(store) as session, session.begin():
        session.add(Allocation(gpu_uuid=gpu, host="h", claim_id=second, start_at=6.0))
    with Session(store) as session:
        assert len(session.exec(select(Allocation)).all()) == 4  # 2 ended, 1 ended later, 1 live


def test_foreign_keys_are_enforced(store: Engine) -> None:
    failed = "FOREIGN KEY constraint failed"
    with pytest.raises(IntegrityError, match=failed), Session(store) as session, session.begin():
        session.add(Allocation(gpu_uuid="GPU-x", host="h", claim_id=999, start_at=1.0))


def test_one_head_at_a_time_holds_a_database(tmp_path: Path, mountinfo: Path) -> None:
    """A second head on the same database is refused with one line; the lock goes
    with the process that held it, however it ends (here: SIGKILL)."""
    db = tmp_path / "state" / "gputui.db"
    prepare_location(db, mountinfo=mountinfo)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path\n"
            "from gputui.scheduler.store.location import hold_exclusively\n"
            f"hold_exclusively(Path({str(db)!r})); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(StoreError) as refused:
            hold_exclusively(db)
        assert str(refused.value) == (
            f"database {db} is in use by another gputui head; stop it first"
        )
    finally:
        holder.kill()
        holder.wait()
    fd = hold_exclusively(db)  # the dead holder's lock went with it
    os.close(fd)
