"""The change stream's triggers on a real PostgreSQL server (the ``*_statement_triggers``
migration): a commit notifies each table it changed, once, as ``<table>:*``, and never
a row's contents; a rollback (of the whole transaction or of a savepoint) notifies
nothing; and ``decode``, which takes whatever arrives on the channel."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from alembic.script import ScriptDirectory
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pgserver import connect

from gputui.scheduler.store.changes import (
    CHANNEL,
    PAYLOAD_MAX,
    WATCHED,
    Change,
    decode,
)
from gputui.scheduler.store.engine import alembic_config, make_engine
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Claim, Gpu, Host, Notice

JOB_ROW = {
    "uid": 1000, "user": "ann", "group": "ann", "name": "secret-name", "argv": '["x"]',
    "cwd": "/", "env": "{}", "gpus": 1, "pool": None, "host_constraint": None,
    "priority": "normal", "preemptible": False, "time_limit_s": None, "submitted_at": 1.0,
    "state": "running", "reason": "", "requeues": 0, "launches": 1,
    "gpu_uuids": "[]", "project": None,
}  # fmt: skip
KEY_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1
)
"""What PostgreSQL's text takes: any character but NUL (and no lone surrogate)."""


@contextlib.contextmanager
def listener(url: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(url) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        yield conn


def heard_until(conn: psycopg.Connection[Any], last: str, timeout: float = 20.0) -> list[str]:
    """Every payload up to and including ``last`` (a later commit's: the server
    delivers in commit order, so what was not heard before it never will be)."""
    deadline = time.monotonic() + timeout
    heard: list[str] = []
    while time.monotonic() < deadline:
        for note in conn.notifies(timeout=max(0.0, deadline - time.monotonic())):
            assert note.channel == CHANNEL
            heard.append(note.payload)
            if note.payload == last:
                return heard
    raise AssertionError(f"{last!r} not heard within {timeout} s; heard {heard[-5:]!r}")


def mark(store: SqlStore, name: str) -> str:
    """Commit a notification of a payload of its own: what to wait for with
    ``heard_until`` (every trigger's payload is ``<table>:*``, alike)."""
    with store.transaction() as tx:
        tx.s.connection().exec_driver_sql(f"SELECT pg_notify('{CHANNEL}', 'mark:{name}')")
    return f"mark:{name}"


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    url: str = pg_server.database()
    return url


@pytest.fixture
def store(pg_url: str) -> Iterator[SqlStore]:
    opened = SqlStore.open(pg_url)
    yield opened
    opened.close()


def test_a_commit_notifies_each_changed_table_once_and_nothing_of_its_rows(
    pg_url: str, store: SqlStore
) -> None:
    """A row of each watched table, as the head writes them, several statements on
    some: each table once, as ``<table>:*``, and nothing of any row."""
    with listener(pg_url) as conn:
        with store.transaction() as tx:
            tx.put_host(Host(name="gpu01", pool="secret-pool", drain_reason="secret-why"))
            tx.put_gpu(Gpu(uuid="GPU-secret-0", host="gpu01", index=0, model="secret-model"))
            tx.put_gpu(Gpu(uuid="GPU-secret-1", host="gpu01", index=1, model="secret-model"))
            tx.add_claim(Claim(user="ann", uid=1000, gpus=1, note="x", created_at=1.0))
            (job_id,) = tx.insert_jobs([{**JOB_ROW, "argv": '["secret-argv"]'}])
            tx.allocate(["GPU-secret-0"], "gpu01", 2.0, job_id=job_id)
            tx.notice(Notice(uid=1000, kind="k", text="secret-text", time=1.0))
            tx.flush()
            tx.notice(Notice(uid=1000, kind="k", text="secret-text-2", time=1.0))
        heard = heard_until(conn, mark(store, "m"))
    assert sorted(heard[:-1]) == sorted(f"{table}:*" for table in WATCHED)
    with listener(pg_url) as conn:
        with store.transaction() as tx:  # an update, then a delete: the table again
            host = tx.host("gpu01")
            assert host is not None
            host.drained_at, host.drained_by = 5.0, "root"
            tx.put_host(host)
        with store.transaction() as tx:
            tx.put_host(Host(name="gone", pool="p"))
        with store.transaction() as tx:
            tx.s.delete(tx.host("gone"))
        heard = heard_until(conn, mark(store, "m2"))
    assert heard == ["host:*", "host:*", "host:*", "mark:m2"]


def test_a_truncate_by_another_program_notifies_too(pg_url: str, store: SqlStore) -> None:
    with store.transaction() as tx:
        tx.notice(Notice(uid=1000, kind="k", text="t", time=1.0))
    with listener(pg_url) as conn, connect(pg_url) as admin:
        admin.execute("TRUNCATE notice")
        assert heard_until(conn, mark(store, "m")) == ["notice:*", "mark:m"]


def test_a_rolled_back_transaction_or_savepoint_notifies_nothing(
    pg_url: str, store: SqlStore
) -> None:
    with listener(pg_url) as conn:
        with pytest.raises(RuntimeError), store.transaction() as tx:
            tx.put_host(Host(name="undone", pool="p"))
            tx.flush()
            raise RuntimeError("refused")
        with store.transaction() as tx:
            tx.put_host(Host(name="kept", pool="p"))
            tx.flush()
            with pytest.raises(RuntimeError), tx.savepoint():
                tx.put_gpu(Gpu(uuid="GPU-undone", host="kept", index=0, model="m"))
                tx.flush()
                raise RuntimeError("one item refused")
        heard = heard_until(conn, mark(store, "m"))
    assert heard == ["host:*", "mark:m"]


def test_a_write_by_another_program_notifies_too(pg_url: str, store: SqlStore) -> None:
    """The triggers are the database's, not the head's code: any writer notifies."""
    with listener(pg_url) as conn, connect(pg_url) as admin:
        admin.execute("INSERT INTO host (name, pool) VALUES ('by-hand', 'p')")
        assert heard_until(conn, mark(store, "m")) == ["host:*", "mark:m"]


def test_the_migrations_watch_the_tables_the_stream_names(pg_url: str) -> None:
    """One list of the watched tables in the code (``WATCHED``) and frozen ones in the
    migrations: each table of either has one statement trigger, and no table has a
    row trigger of the stream left."""
    with connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT event_object_table, action_orientation, action_statement"
            " FROM information_schema.triggers WHERE trigger_name LIKE 'gputui_change%%'"
        ).fetchall()
    assert {r[0] for r in rows} == set(WATCHED)
    assert {(r[1], r[2]) for r in rows} == {
        ("STATEMENT", "EXECUTE FUNCTION gputui_change_statement()")
    }
    script = ScriptDirectory.from_config(alembic_config())
    (rows_0011,) = [r.module for r in script.walk_revisions() if r.path.endswith("_stream.py")]
    (statements,) = [r.module for r in script.walk_revisions() if r.path.endswith("_triggers.py")]
    assert dict(WATCHED) == rows_0011.KEYS == statements.ROW_KEYS
    assert set(statements.TABLES) == set(WATCHED)


def test_a_transaction_sends_one_notification_a_table_whatever_it_writes(
    pg_url: str, store: SqlStore
) -> None:
    """Whatever a transaction writes, in however many statements, and whatever its
    savepoints undo: one ``host:*`` when it committed a write to ``host``, else none."""
    examples = itertools.count()
    with listener(pg_url) as conn:

        @settings(max_examples=25, deadline=None)
        @example(before=250, undone=3, after=0)  # past 0011's cap of 200 keys
        @example(before=0, undone=5, after=0)  # all undone: nothing
        @given(
            before=st.integers(0, 30) | st.integers(190, 260),
            undone=st.integers(0, 40),
            after=st.integers(0, 40),
        )
        def one(before: int, undone: int, after: int) -> None:
            n = next(examples)
            with store.transaction() as tx:
                for i in range(before):
                    tx.put_host(Host(name=f"{n}-b{i}", pool="p"))
                    if i % 50 == 0:
                        tx.flush()  # several statements
                tx.flush()
                with pytest.raises(RuntimeError), tx.savepoint():
                    for i in range(undone):
                        tx.put_host(Host(name=f"{n}-u{i}", pool="p"))
                    tx.flush()
                    raise RuntimeError("undone")
                for i in range(after):
                    tx.put_host(Host(name=f"{n}-a{i}", pool="p"))
            heard = heard_until(conn, mark(store, f"{n}"))[:-1]
            assert heard == (["host:*"] if before + after else [])

        one()


@given(st.sampled_from(sorted(WATCHED)), KEY_TEXT)
def test_decode_gives_back_a_watched_tables_key(table: str, key: str) -> None:
    payload = f"{table}:{key}"
    if len(payload) <= PAYLOAD_MAX:
        assert decode(payload) == Change(table, None if key == "*" else key)


@given(st.text())
def test_decode_takes_any_text_and_keeps_only_what_a_trigger_sends(payload: str) -> None:
    change = decode(payload)
    if change is not None:
        assert change.table in WATCHED
        assert change.key is None or payload == f"{change.table}:{change.key}"
        assert len(payload) <= PAYLOAD_MAX


def test_decode_refuses_what_no_trigger_sends() -> None:
    assert decode("host") is None  # no key
    assert decode("host:") is None
    assert decode("audit:1") is None  # not a watched table
    assert decode(":1") is None
    assert decode("job:" + "1" * PAYLOAD_MAX) is None  # over a payload's size
    assert decode("job:*") == Change("job", None)


def test_0012_downgraded_puts_the_row_triggers_back_and_upgraded_takes_them_away(
    pg_server: Any,
) -> None:
    from alembic import command

    url = pg_server.database(migrated=False)
    engine = make_engine(url)
    cfg = alembic_config()

    def migrate(step: Any, target: str) -> None:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            try:
                step(cfg, target)
            finally:
                cfg.attributes.pop("connection")

    def notified(name: str) -> list[str]:
        with listener(url) as conn, connect(url) as admin:
            admin.execute("INSERT INTO host (name, pool) VALUES (%s, 'p')", (name,))
            admin.execute(f"NOTIFY {CHANNEL}, 'mark:{name}'")
            return heard_until(conn, f"mark:{name}")[:-1]

    try:
        migrate(command.upgrade, "head")
        assert notified("a") == ["host:*"]
        migrate(command.downgrade, "0011")
        assert notified("b") == ["host:b"]
        migrate(command.upgrade, "head")
        assert notified("c") == ["host:*"]
    finally:
        engine.dispose()
