"""The head's lease on a real PostgreSQL server (``store.lease``): one head leads;
the epoch fences every write, so a head that lost the lease writes nothing, even
one paused inside a transaction while another took over."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headthread import poll
from pgserver import PgServer
from sqlalchemy.exc import SQLAlchemyError

from gputui.scheduler.head.leader import Leadership
from gputui.scheduler.store.engine import open_database
from gputui.scheduler.store.lease import Fenced, HeadLease, fence
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Host

LEASE_S = 1.0


@pytest.fixture
def url(pg_server: PgServer) -> str:
    return pg_server.database()


@pytest.fixture
def heads(url: str) -> Iterator[list[tuple[SqlStore, HeadLease]]]:
    """Two heads' stores on one database, each fenced, and their leases."""
    made: list[tuple[SqlStore, HeadLease]] = []
    for name in ("a", "b"):
        store = SqlStore(open_database(url))
        made.append((store, HeadLease(store.engine, f"{name}:1", LEASE_S)))
    yield made
    for store, lease in made:
        lease.close()
        store.close()


def hosts(store: SqlStore) -> set[str]:
    with store.snapshot() as tx:
        return {h.name for h in tx.hosts()}


def write(store: SqlStore, name: str) -> None:
    with store.transaction() as tx:
        tx.put_host(Host(name=name, pool="p"))


def test_one_head_takes_the_lease_and_the_other_waits_for_it(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    (_, a), (_, b) = heads
    first = a.take()
    assert first is not None
    assert b.take() is None
    state = b.state()
    assert state is not None and (state.epoch, state.holder) == (first, "a:1")
    assert 0 < state.left_s <= LEASE_S
    assert a.renew(first)
    a.release(first)  # a clean stop: the standby need not wait out the lease
    second = b.take()
    assert second == first + 1
    assert not a.renew(first), "a renewal after the lease was taken must fail"
    assert a.take() is None


def test_an_expired_lease_is_taken_and_the_old_leaders_writes_are_refused(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    (store_a, a), (store_b, b) = heads
    fence_a, fence_b = fence(store_a.engine, LEASE_S), fence(store_b.engine, LEASE_S)
    with pytest.raises(Fenced):  # no lease yet: nothing is written
        write(store_a, "before")
    epoch = a.take()
    assert epoch is not None
    fence_a.epoch = epoch
    write(store_a, "a-leads")
    with pytest.raises(Fenced):  # the standby writes nothing
        write(store_b, "b-standby")
    # a stops renewing (paused): b takes the lease once it has expired.
    taken = poll(b.take, timeout=LEASE_S * 5, what="the standby to take the lease")
    fence_b.epoch = taken
    assert taken == epoch + 1
    with pytest.raises(Fenced):
        write(store_a, "a-after")
    write(store_b, "b-leads")
    assert hosts(store_b) == {"a-leads", "b-leads"}


def _waiting_on_a_lock(store: SqlStore) -> bool:
    with store.snapshot() as tx:
        rows = tx.s.connection().exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE 'UPDATE head_lease SET epoch%%'"
        )
        return int(rows.scalar_one()) > 0


def test_a_taking_waits_for_the_leaders_write_already_under_way(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    """The share lock orders them: a write past its check commits under the old
    epoch, then the lease moves; the next write of the old leader is refused."""
    (store_a, a), (store_b, b) = heads
    fence_a = fence(store_a.engine, 30.0)  # its transaction is not ended for idling
    epoch = a.take()
    assert epoch is not None
    fence_a.epoch = epoch
    poll(lambda: (b.state() or a.state()).left_s < 0, timeout=5, what="the lease to expire")  # type: ignore[union-attr]
    taken: list[Any] = []
    with store_a.transaction() as tx:
        tx.put_host(Host(name="under-way", pool="p"))
        taker = threading.Thread(target=lambda: taken.append(b.take()))
        taker.start()
        poll(lambda: _waiting_on_a_lock(store_b), timeout=10, what="the taking to wait")
        assert taken == []
    taker.join(10)
    assert taken == [epoch + 1]
    assert "under-way" in hosts(store_b)
    with pytest.raises(Fenced):
        write(store_a, "late")
    assert "late" not in hosts(store_b)


def test_a_leader_paused_inside_a_transaction_is_ended_and_its_commit_fails(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    """The leader stops (as SIGSTOP stops it) with a write transaction open: the
    server ends that transaction after half the lease, the standby takes over
    within the lease, and the old leader's commit fails: nothing of it lands."""
    (store_a, a), (store_b, b) = heads
    fence_a = fence(store_a.engine, LEASE_S)
    epoch = a.take()
    assert epoch is not None
    fence_a.epoch = epoch
    started = time.monotonic()
    with pytest.raises(SQLAlchemyError), store_a.transaction() as tx:
        tx.put_host(Host(name="paused", pool="p"))
        taken = poll(b.take, timeout=LEASE_S * 5, what="the standby to take the lease")
        assert taken == epoch + 1
        assert time.monotonic() - started < LEASE_S * 3
    assert "paused" not in hosts(store_b)


async def test_a_restarted_head_takes_the_lease_of_its_dead_predecessor_at_once(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    """A holder of this machine whose process has ended is not waited out; one that
    still runs is (with its lease of 300 s, the test would time out waiting)."""
    (store_a, _), (store_b, _) = heads
    dead = f"{socket.gethostname()}:{_pid_of_ended()}"
    said: list[str] = []
    for holder, expect_at_once in ((dead, True), (f"{socket.gethostname()}:{os.getpid()}", False)):
        long = HeadLease(store_a.engine, holder, 300.0)
        epoch = long.take() or poll(lambda long=long: long.take(), what="the lease")
        leader = Leadership(
            HeadLease(store_b.engine, "b:1", LEASE_S), fence(store_b.engine, LEASE_S), said.append
        )
        stop = asyncio.Event()
        waiting = asyncio.ensure_future(leader.wait(stop))
        done, _ = await asyncio.wait([waiting], timeout=LEASE_S)
        assert bool(done) is expect_at_once, said
        if expect_at_once:
            assert waiting.result() is True and leader.epoch == epoch + 1
            long.close()
            leader.close()
            continue
        assert said[-1] == f"standby: waiting for the lease held by {holder} (epoch {epoch})"
        stop.set()
        assert await waiting is False
        long.release(epoch)
        long.close()
        leader.close()


def _pid_of_ended() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def test_a_leader_that_cannot_renew_for_a_whole_lease_stops_writing(
    heads: list[tuple[SqlStore, HeadLease]], tmp_path: Path
) -> None:
    """The database out of reach (here: the lease's connection pointed at a socket
    directory with no server in it): a lease later, the fence refuses every write
    and the head is told to stop, saying why."""
    (store_a, a), _ = heads
    said: list[str] = []
    leader = Leadership(a, fence(store_a.engine, LEASE_S), said.append)
    stop = asyncio.Event()
    assert await leader.wait(stop)
    write(store_a, "leading")
    a.close()
    args, params = a._connect_args
    a._connect_args = (args, {**params, "host": str(tmp_path)})  # nothing listens there
    started = time.monotonic()
    await asyncio.wait_for(leader.keep(stop), LEASE_S * 5)
    assert stop.is_set() and time.monotonic() - started >= LEASE_S
    assert leader.lost is not None and leader.lost.startswith("could not renew the lease")
    with pytest.raises(Fenced):
        write(store_a, "after")
