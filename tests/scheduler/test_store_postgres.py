"""What PostgreSQL needs of the store that SQLite gives by itself: every commit
durable whatever the server's default, writes serialized by the writer's lock,
snapshots that take no lock, and a URL that is refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from gputui.scheduler.store.api import StoreError
from gputui.scheduler.store.engine import make_engine, open_database
from gputui.scheduler.store.pgengine import WRITER_LOCK, to_format
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Host


def _admin(url: str) -> psycopg.Connection[Any]:
    parts = make_url(url)
    return psycopg.connect(
        host=str(parts.query["host"]), user=parts.username, dbname=parts.database, autocommit=True
    )


def _writer_locks(url: str) -> int:
    with _admin(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND ((classid::bigint << 32) | objid::bigint) = %s",
            (WRITER_LOCK,),
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    url: str = pg_server.database()
    return url


def test_every_commit_is_synchronous_even_where_the_server_says_otherwise(pg_url: str) -> None:
    with _admin(pg_url) as conn:
        conn.execute(f"ALTER DATABASE {make_url(pg_url).database} SET synchronous_commit = off")
    store = SqlStore.open(pg_url)
    try:
        with store.transaction() as tx:
            setting = tx.s.connection().exec_driver_sql("SHOW synchronous_commit").scalar()
        assert setting == "on"
    finally:
        store.close()
        with _admin(pg_url) as conn:
            conn.execute(f"ALTER DATABASE {make_url(pg_url).database} RESET synchronous_commit")


def test_a_write_holds_the_writers_lock_until_it_ends_and_a_snapshot_takes_none(
    pg_url: str,
) -> None:
    store = SqlStore.open(pg_url)
    try:
        with store.snapshot() as tx:
            tx.hosts()
            assert _writer_locks(pg_url) == 0
        with store.batch() as tx:
            tx.put_host(Host(name="h", pool="p"))
            tx.flush()
            assert _writer_locks(pg_url) == 1
            with store.snapshot() as view:  # a snapshot does not wait for the writer
                assert view.hosts() == []
        assert _writer_locks(pg_url) == 0
        with store.snapshot() as view:
            assert [h.name for h in view.hosts()] == ["h"]
    finally:
        store.close()


def test_a_second_writer_waits_for_the_first(pg_url: str) -> None:
    """Two writers' transactions on one database are serialized as on SQLite: while
    one holds the lock, another's first statement waits (a lock timeout shows it)."""
    first = SqlStore.open(pg_url)
    try:
        with first.transaction() as tx:
            tx.hosts()  # its first statement took the lock
            with _admin(pg_url) as other:
                other.execute("SET lock_timeout = '100ms'")
                with pytest.raises(psycopg.errors.LockNotAvailable), other.transaction():
                    other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        with _admin(pg_url) as other, other.transaction():
            other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))  # free again
    finally:
        first.close()


@given(st.text(alphabet="?%s'x ", max_size=20))
def test_qmark_sql_becomes_format_sql(sql: str) -> None:
    out = to_format(sql)
    assert out.count("%s") - sql.count("%s") >= sql.count("?")
    assert out.replace("%%", "").replace("%s", "").count("%") == 0
    assert "?" not in out


def test_a_database_url_psycopg_cannot_serve_is_refused_in_one_line() -> None:
    with pytest.raises(StoreError, match="use a postgresql\\+psycopg:// URL") as refused:
        make_engine("postgresql+asyncpg://u:secret@h/db")
    assert "secret" not in str(refused.value)
    with pytest.raises(StoreError, match="not SQLite nor PostgreSQL"):
        make_engine("mysql://u@h/db")
    with pytest.raises(StoreError):
        open_database("postgresql+psycopg://u:secret@/db?host=/nonexistent")


def test_head_backup_of_a_postgresql_database_says_where_to_back_it_up(tmp_path: Path) -> None:
    config = tmp_path / "hosts.yaml"
    config.write_text(
        "head:\n  database: postgresql+psycopg://u@/db?host=/nonexistent\nhosts: []\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gputui.entry", "head", "--hosts", str(config), "backup", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "gputui head backup: the database is on a PostgreSQL server: back it up there"
        " (pg_dump, or the server's own backups)"
    ]
