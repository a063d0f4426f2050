"""The writer's transactions (``SqlStore.batch``): one connection kept from batch to
batch, each batch all or nothing, and no row outliving its batch; on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm.exc import DetachedInstanceError

from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Host


@pytest.fixture
def jobs(store_on_both: Engine) -> Iterator[SqlStore]:
    kept = SqlStore(store_on_both)
    yield kept
    kept.close()


def _hosts(jobs: SqlStore) -> list[str]:
    with jobs.snapshot() as tx:
        return [h.name for h in tx.hosts()]


def test_batches_keep_one_connection_and_each_commits(
    store_on_both: Engine, jobs: SqlStore
) -> None:
    for name in ("a", "b", "c"):
        with jobs.batch() as tx:
            tx.put_host(Host(name=name, pool="p"))
        assert _hosts(jobs)[-1] == name  # committed: another connection sees it
        assert store_on_both.pool.checkedout() == 1  # kept, not given back


def test_a_failed_batch_stores_nothing_and_the_next_starts_afresh(jobs: SqlStore) -> None:
    with jobs.batch() as tx:
        tx.put_host(Host(name="kept", pool="p"))
    with pytest.raises(RuntimeError), jobs.batch() as tx:
        tx.put_host(Host(name="lost", pool="p"))
        tx.flush()
        raise RuntimeError("a bug met half-way")
    with jobs.batch() as tx:  # rolled back, given back to the pool, taken afresh
        tx.put_host(Host(name="after", pool="p"))
    assert _hosts(jobs) == ["after", "kept"]


def test_no_row_outlives_its_batch(jobs: SqlStore) -> None:
    with jobs.batch() as tx:
        host = tx.put_host(Host(name="h", pool="p"))
    with pytest.raises(DetachedInstanceError):
        _ = host.pool
    with jobs.batch() as tx:
        again = tx.host("h")
        assert again is not None and again.pool == "p"


def test_closing_the_store_gives_the_writers_connection_back(store_on_both: Engine) -> None:
    jobs = SqlStore(store_on_both)
    with jobs.batch() as tx:
        tx.put_host(Host(name="h", pool="p"))
    assert store_on_both.pool.checkedout() == 1
    jobs.close()
    assert store_on_both.pool.checkedout() == 0
