"""The change stream's triggers on a real PostgreSQL server (the ``*_change_stream``
migration): a commit notifies each changed row's key and never its contents, a
rollback (of the whole transaction or of a savepoint) notifies nothing, and a
transaction's keys are capped; and ``decode``, which takes whatever arrives on the
channel."""

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
    KEYS_PER_TX,
    PAYLOAD_MAX,
    WATCHED,
    Change,
    decode,
)
from gputui.scheduler.store.engine import alembic_config
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
    """Commit a host named ``name``: its payload, to wait for with ``heard_until``."""
    with store.transaction() as tx:
        tx.put_host(Host(name=name, pool="marker"))
    return f"host:{name}"


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    url: str = pg_server.database()
    return url


@pytest.fixture
def store(pg_url: str) -> Iterator[SqlStore]:
    opened = SqlStore.open(pg_url)
    yield opened
    opened.close()


def test_a_commit_notifies_each_changed_rows_key_and_nothing_of_the_row(
    pg_url: str, store: SqlStore
) -> None:
    """A row of each watched table, as the head writes them: its key, and nothing else."""
    with listener(pg_url) as conn:
        with store.transaction() as tx:
            tx.put_host(Host(name="gpu01", pool="secret-pool", drain_reason="secret-why"))
            tx.put_gpu(Gpu(uuid="GPU-secret-0", host="gpu01", index=0, model="secret-model"))
            claim = tx.add_claim(Claim(user="ann", uid=1000, gpus=1, note="x", created_at=1.0))
            claim_id = claim.id
            (job_id,) = tx.insert_jobs([{**JOB_ROW, "argv": '["secret-argv"]'}])
            tx.allocate(["GPU-secret-0"], "gpu01", 2.0, job_id=job_id)
            tx.notice(Notice(uid=1000, kind="k", text="secret-text", time=1.0))
        heard = heard_until(conn, mark(store, "m"))
    keys = ["host:gpu01", "gpu:GPU-secret-0", f"claim:{claim_id}", f"job:{job_id}"]
    assert sorted(heard[:-1]) == sorted([*keys, "allocation:1", "notice:1"])
    assert {p.split(":")[0] for p in heard} == set(WATCHED)
    assert not [p for p in heard if p not in keys and ("secret" in p or "ann" in p)]
    with listener(pg_url) as conn:
        with store.transaction() as tx:  # an update, then a delete: the key again
            host = tx.host("gpu01")
            assert host is not None
            host.drained_at, host.drained_by = 5.0, "root"
            tx.put_host(host)
        with store.transaction() as tx:
            tx.s.delete(tx.host("m"))
        heard = heard_until(conn, mark(store, "m2"))
    assert heard == ["host:gpu01", "host:m", "host:m2"]


def test_an_update_that_changes_nothing_notifies_nothing(pg_url: str, store: SqlStore) -> None:
    mark(store, "gpu01")
    with listener(pg_url) as conn:
        with connect(pg_url) as other:
            other.execute("UPDATE host SET pool = pool")
        assert heard_until(conn, mark(store, "m")) == ["host:m"]


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
            with pytest.raises(RuntimeError), tx.savepoint():
                tx.put_host(Host(name="undone-too", pool="p"))
                tx.flush()
                raise RuntimeError("one item refused")
        heard = heard_until(conn, mark(store, "m"))
    assert heard == ["host:kept", "host:m"]


def test_a_write_by_another_program_notifies_too(pg_url: str, store: SqlStore) -> None:
    """The triggers are the database's, not the head's code: any writer notifies."""
    with listener(pg_url) as conn, connect(pg_url) as admin:
        admin.execute("INSERT INTO host (name, pool) VALUES ('by-hand', 'p')")
        assert heard_until(conn, mark(store, "m")) == ["host:by-hand", "host:m"]


def test_the_migration_watches_the_tables_the_stream_names(pg_url: str) -> None:
    """One list of the watched tables in the code (``WATCHED``) and a frozen one in the
    migration: each table of either has the triggers, and no other table has."""
    with connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT event_object_table FROM information_schema.triggers"
            " WHERE action_statement LIKE '%gputui_change()%'"
        ).fetchall()
    assert {r[0] for r in rows} == set(WATCHED)
    script = ScriptDirectory.from_config(alembic_config())
    (module,) = [r.module for r in script.walk_revisions() if r.path.endswith("_change_stream.py")]
    assert dict(WATCHED) == module.KEYS


def test_a_transactions_keys_are_capped_and_a_rolled_back_savepoint_gives_its_count_back(
    pg_url: str, store: SqlStore
) -> None:
    """Whatever a transaction writes, and whatever its savepoints undo: its first
    ``KEYS_PER_TX`` committed rows are sent one key each, the rest as one ``host:*``."""
    examples = itertools.count()
    with listener(pg_url) as conn:

        @settings(max_examples=25)
        @example(before=KEYS_PER_TX, undone=3, after=0)  # the cap exactly: every key
        @example(before=KEYS_PER_TX, undone=0, after=1)  # one over
        @given(
            before=st.integers(0, 20) | st.integers(KEYS_PER_TX - 30, KEYS_PER_TX + 30),
            undone=st.integers(0, 40),
            after=st.integers(0, 40),
        )
        def one(before: int, undone: int, after: int) -> None:
            n = next(examples)
            with store.transaction() as tx:
                for i in range(before):
                    tx.put_host(Host(name=f"{n}-b{i}", pool="p"))
                tx.flush()
                with pytest.raises(RuntimeError), tx.savepoint():
                    for i in range(undone):
                        tx.put_host(Host(name=f"{n}-u{i}", pool="p"))
                    tx.flush()
                    raise RuntimeError("undone")
                for i in range(after):
                    tx.put_host(Host(name=f"{n}-a{i}", pool="p"))
            heard = heard_until(conn, mark(store, f"{n}-mark"))[:-1]
            committed = [f"host:{n}-b{i}" for i in range(before)]
            committed += [f"host:{n}-a{i}" for i in range(after)]
            want = committed[:KEYS_PER_TX] + (["host:*"] if len(committed) > KEYS_PER_TX else [])
            assert sorted(heard) == sorted(want)
            assert len(heard) <= KEYS_PER_TX + 1

        one()


def test_any_key_is_sent_as_itself_when_it_fits_else_as_its_table(pg_url: str) -> None:
    """Arbitrary keys through the real trigger, on a table of the same name in a schema
    of its own (the shipped tables cap their keys well under a payload): a key the
    payload holds arrives as itself (``decode`` gives it back), a longer one as
    ``host:*``."""
    with connect(pg_url) as conn, listener(pg_url) as heard_on:
        conn.execute("CREATE SCHEMA IF NOT EXISTS scratch")
        conn.execute("CREATE TABLE IF NOT EXISTS scratch.host (name text)")
        conn.execute(
            "CREATE OR REPLACE TRIGGER gputui_change_row AFTER INSERT ON scratch.host"
            " FOR EACH ROW EXECUTE FUNCTION gputui_change()"
        )
        examples = itertools.count()

        @settings(max_examples=60)
        @given(key=KEY_TEXT.filter(lambda k: k != "*") | st.integers(7990, 9000).map("é".__mul__))
        def one(key: str) -> None:
            done = f"done-{next(examples)}"
            with conn.transaction():
                conn.execute("INSERT INTO scratch.host (name) VALUES (%s)", (key,))
            conn.execute(f"NOTIFY {CHANNEL}, 'host:{done}'")  # the end of this example
            heard = heard_until(heard_on, f"host:{done}")[:-1]
            fits = len(f"host:{key}".encode()) <= PAYLOAD_MAX
            assert heard == [f"host:{key}" if fits else "host:*"]
            assert decode(heard[0]) == Change("host", key if fits else None)

        try:
            one()
        finally:
            conn.execute("DROP SCHEMA scratch CASCADE")


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
