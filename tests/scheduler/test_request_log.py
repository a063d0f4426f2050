"""The request log (``store.requestlog``): append-only on disk, ids indexed in memory.

A retry finds its first answer across batches and restarts; a batch rolled back leaves
nothing a retry could take; the bound and the keep time leave memory and disk
together; and a batch of random ids writes the log's last pages, not a leaf each.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from gputui.scheduler.store.engine import open_database
from gputui.scheduler.store.sqlstore import SqlStore


@pytest.fixture
def log(store_on_both: Engine) -> Iterator[SqlStore]:
    kept = SqlStore(store_on_both)
    yield kept
    kept.close()


@pytest.fixture
def sqlite_log(store: Engine) -> Iterator[SqlStore]:
    kept = SqlStore(store)
    yield kept
    kept.close()


def _answer(n: int) -> dict[str, Any]:
    return {"id": n, "ok": True, "result": {"job": {"id": n}}}


def _replay(jobs: SqlStore, keys: list[tuple[int, str]]) -> dict[tuple[int, str], Any]:
    with jobs.batch() as tx:
        return tx.replay_many(keys)


def _disk_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM requestlog").scalar() or 0)


def test_a_retry_gets_the_first_answer_in_a_later_batch_and_after_a_restart(
    store_on_both: Engine, database: Path | str, mountinfo: Path
) -> None:
    first = SqlStore(store_on_both)
    with first.batch() as tx:
        tx.remember_many([(1000, "r1", _answer(1)), (1001, "r1", _answer(2))], 10.0)
    assert _replay(first, [(1000, "r1"), (1001, "r1"), (1000, "r2")]) == {
        (1000, "r1"): _answer(1),
        (1001, "r1"): _answer(2),
    }
    assert _replay(first, [(1002, "r1")]) == {}  # another user's id is another key
    first.close()
    again = SqlStore(open_database(database, mountinfo=mountinfo))  # a restarted head
    try:
        assert _replay(again, [(1000, "r1")]) == {(1000, "r1"): _answer(1)}
    finally:
        again.close()


def test_a_batch_rolled_back_leaves_nothing_a_retry_could_take(log: SqlStore) -> None:
    with pytest.raises(RuntimeError), log.batch() as tx:
        tx.remember_many([(1000, "lost", _answer(1))], 10.0)
        raise RuntimeError("the batch fails before its commit")
    assert _replay(log, [(1000, "lost")]) == {}
    with log.batch() as tx:  # the same seq is written again, under another id
        tx.remember_many([(1000, "kept", _answer(2))], 11.0)
    assert _replay(log, [(1000, "lost"), (1000, "kept")]) == {(1000, "kept"): _answer(2)}


def test_a_log_emptied_by_age_still_keeps_what_comes_after(
    log: SqlStore, store_on_both: Engine
) -> None:
    """An idle head forgets every answer; the next ones are numbered past the old
    (not from 1 again) and stay until they are old themselves."""
    with log.batch() as tx:
        tx.remember_many([(1000, f"old{n}", _answer(n)) for n in range(3)], 1.0)
    with log.batch() as tx:
        tx.forget_requests_before(100.0)
    assert _replay(log, [(1000, f"old{n}") for n in range(3)]) == {}
    assert _disk_rows(store_on_both) == 0
    with log.batch() as tx:
        tx.remember_many([(1000, "new", _answer(7))], 200.0)
    with log.batch() as tx:
        tx.forget_requests_before(150.0)
    assert _replay(log, [(1000, "new")]) == {(1000, "new"): _answer(7)}
    with log.batch() as tx:
        tx.forget_requests_before(300.0)
    assert _replay(log, [(1000, "new")]) == {}


def test_the_bound_and_the_keep_time_leave_memory_and_disk_together(
    log: SqlStore, store_on_both: Engine
) -> None:
    log.requests.limit = 4
    for n in range(6):
        with log.batch() as tx:
            tx.remember_many([(1000, f"r{n}", _answer(n))], float(n))
    assert len(log.requests) == 4
    assert _replay(log, [(1000, "r0"), (1000, "r1")]) == {}  # past the bound
    assert _disk_rows(store_on_both) == 6  # until the next tick
    with log.batch() as tx:
        assert tx.forget_requests_before(3.0) == 3  # r0, r1 (bound) and r2 (age)
    assert _disk_rows(store_on_both) == 3
    assert set(_replay(log, [(1000, f"r{n}") for n in range(6)])) == {
        (1000, "r3"),
        (1000, "r4"),
        (1000, "r5"),
    }


def _wal_frames(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return max(0, (wal.stat().st_size - 32) // (4096 + 24)) if wal.exists() else 0


def test_a_batch_of_random_ids_writes_the_logs_last_pages_not_a_leaf_each(
    sqlite_log: SqlStore, db: Path
) -> None:
    """With a disk index on the (random) ids, each of 16 new rows lands on a leaf of
    its own: 16 or more pages in the commit. Appended, they fill the last one or two."""
    for start in range(0, 20_000, 2_000):
        with sqlite_log.batch() as tx:
            rows = [(1000, uuid.uuid4().hex, _answer(n)) for n in range(start, start + 2_000)]
            tx.remember_many(rows, 1.0)
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        raw.close()
    assert _wal_frames(db) == 0
    with sqlite_log.batch() as tx:
        tx.remember_many([(1000, uuid.uuid4().hex, _answer(n)) for n in range(16)], 2.0)
    assert _wal_frames(db) <= 4


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["commit", "rollback", "restart", "forget"]),
            st.lists(st.tuples(st.integers(0, 2), st.integers(0, 9)), max_size=5),
        ),
        max_size=12,
    )
)
def test_the_log_answers_as_a_dict_of_committed_first_answers_would(
    tmp_path_factory: pytest.TempPathFactory,
    fresh_database: Callable[[], Path | str],
    steps: list[tuple[str, list[tuple[int, int]]]],
) -> None:
    root = tmp_path_factory.mktemp("log")
    (root / "mountinfo").write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
    db = fresh_database()
    jobs = SqlStore(open_database(db, mountinfo=root / "mountinfo"))
    model: dict[tuple[int, str], tuple[dict[str, Any], float]] = {}
    try:
        for now, (action, keys) in enumerate(steps):
            wanted = [(uid, f"r{n}") for uid, n in keys]
            if action == "restart":
                jobs.close()
                jobs = SqlStore(open_database(db, mountinfo=root / "mountinfo"))
            elif action == "forget":
                with jobs.batch() as tx:
                    tx.forget_requests_before(float(now - 3))
                model = {k: v for k, v in model.items() if v[1] >= now - 3}
            else:
                new = list(dict.fromkeys(k for k in wanted if k not in model))
                try:
                    with jobs.batch() as tx:
                        known = {k: model[k][0] for k in wanted if k in model}
                        assert tx.replay_many(wanted) == known
                        tx.remember_many([(u, r, _answer(now)) for u, r in new], float(now))
                        if action == "rollback":
                            raise RuntimeError("rolled back")
                except RuntimeError:
                    continue
                model.update({k: (_answer(now), float(now)) for k in new})
        everything = [(uid, f"r{n}") for uid in range(3) for n in range(10)]
        assert _replay(jobs, everything) == {k: v[0] for k, v in model.items()}
    finally:
        jobs.close()
