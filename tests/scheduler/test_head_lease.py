"""The head's lease on a real PostgreSQL server (``store.lease``): one head leads;
the epoch fences every write, so a head that lost the lease writes nothing, even
one paused inside a transaction while another took over."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from headkit import ScriptedHosts
from headthread import poll
from hypothesis import given, settings
from hypothesis import strategies as st
from pgserver import PgServer, connect
from sqlalchemy.exc import SQLAlchemyError

from gputui.scheduler.head.hostops import GpuProcess
from gputui.scheduler.head.leader import Leadership, gone, holder_name, pid_namespace
from gputui.scheduler.head.leased_hosts import LeasedHosts
from gputui.scheduler.head.lifecycle import NOT_LEADING
from gputui.scheduler.store.engine import make_engine, open_database, prepare
from gputui.scheduler.store.lease import Fence, Fenced, HeadLease, fence, half_lease_ms
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


def _waiting_on_the_writers_lock(store: SqlStore) -> bool:
    with store.snapshot() as tx:
        rows = tx.s.connection().exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE 'SELECT pg_advisory_xact_lock%%'"
        )
        return int(rows.scalar_one()) > 0


def test_the_new_leaders_first_write_waits_for_the_old_leaders_write_under_way(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    """The taking waits for nothing; the writer's lock orders the two: a write past
    its check commits under the old epoch before the new leader's first transaction
    (its load of the store) goes on, which then reads it; the next write of the old
    leader is refused."""
    (store_a, a), (store_b, b) = heads
    fence_a = fence(store_a.engine, 30.0)  # its transaction is not ended for idling
    fence_b = fence(store_b.engine, 30.0)
    epoch = a.take()
    assert epoch is not None
    fence_a.epoch = epoch
    seen: list[set[str]] = []

    def first_write_of_b() -> None:
        with store_b.transaction() as tx:  # as ``Head._load``
            seen.append({h.name for h in tx.hosts()})

    with store_a.transaction() as tx:
        tx.put_host(Host(name="under-way", pool="p"))
        poll(lambda: (b.state() or a.state()).left_s < 0, timeout=5, what="the lease to expire")  # type: ignore[union-attr]
        fence_b.epoch = b.take()  # at once: no row lock to wait for
        assert fence_b.epoch == epoch + 1
        loader = threading.Thread(target=first_write_of_b)
        loader.start()
        poll(lambda: _waiting_on_the_writers_lock(store_b), timeout=10, what="b to wait")
        assert seen == []
    loader.join(10)
    assert seen == [{"under-way"}]
    with pytest.raises(Fenced):
        write(store_a, "late")
    assert "late" not in hosts(store_b)


def test_a_renewal_does_not_wait_behind_a_write_under_way(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    """The leader's own write transaction, open (a long batch), holds nothing a
    renewal needs: it goes through at once (it would time out at half the lease)."""
    (store_a, _), _ = heads
    fence_a = fence(store_a.engine, 60.0)  # the transaction is not ended while it waits
    a = HeadLease(store_a.engine, "a:2", 4.0)  # a renewal waits at most 2 s for a lock
    try:
        epoch = a.take() or poll(a.take, what="the lease")
        fence_a.epoch = epoch
        with store_a.transaction() as tx:
            tx.put_host(Host(name="long-batch", pool="p"))
            tx.flush()
            assert a.renew(epoch)
        assert "long-batch" in hosts(store_a)
    finally:
        a.close()


def test_a_write_after_the_lease_expired_is_refused_though_none_took_it(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    """A leader that stopped renewing (paused) writes nothing once its lease has
    expired by the server's clock, even before a standby takes it."""
    (store_a, a), _ = heads
    fence_a = fence(store_a.engine, LEASE_S)
    epoch = a.take()
    assert epoch is not None
    fence_a.epoch = epoch
    write(store_a, "in-time")
    poll(lambda: (a.state() or a.state()).left_s < 0, timeout=5, what="the lease to expire")  # type: ignore[union-attr]
    with pytest.raises(Fenced, match="has expired"):
        write(store_a, "expired")
    assert a.renew(epoch)  # none took it: renewed, it writes again
    write(store_a, "renewed")
    assert hosts(store_a) == {"in-time", "renewed"}


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
    here = f"{socket.gethostname()}:{{}}:{pid_namespace()}:{uuid.uuid4().hex}"
    said: list[str] = []
    for holder, expect_at_once in ((here.format(_pid_of_ended()), True), (holder_name(), False)):
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


def _ms(setting: str) -> int:
    """A PostgreSQL time setting as ``SHOW`` gives it (``750ms``, ``2s``, ``1min``)."""
    for unit, factor in (("ms", 1), ("s", 1000), ("min", 60_000)):
        if setting.endswith(unit) and setting[: -len(unit)].isdigit():
            return int(setting[: -len(unit)]) * factor
    raise AssertionError(f"not a time setting: {setting!r}")


def test_the_lease_connection_and_the_fence_wait_the_same_half_lease(url: str) -> None:
    """One timeout (``half_lease_ms``): the lease's own statements, and how long a write
    transaction may sit idle, whatever the lease."""
    engine = open_database(url)
    try:

        @settings(max_examples=12, deadline=None)
        @given(lease_s=st.floats(0.1, 600.0))
        def one(lease_s: float) -> None:
            lease = HeadLease(engine, "t:1", lease_s)
            try:
                with lease._cursor() as cursor:
                    cursor.execute("SHOW statement_timeout")
                    statement = _ms(cursor.fetchone()[0])
                    cursor.execute("SHOW lock_timeout")
                    lock = _ms(cursor.fetchone()[0])
            finally:
                lease.close()
            want = half_lease_ms(lease_s)
            assert want >= 500 and abs(want - lease_s * 500) < 500 + 1
            assert statement == lock == want == Fence(lease_s).idle_ms

        one()
    finally:
        engine.dispose()


def test_two_heads_of_one_host_and_pid_are_two_holders(
    heads: list[tuple[SqlStore, HeadLease]],
) -> None:
    """Two containers: each head pid 1, the hostname shared. The names differ (a token
    each), so the second never takes the first's lease as its own."""
    (store_a, _), (store_b, _) = heads
    a = HeadLease(store_a.engine, holder_name(), LEASE_S)
    b = HeadLease(store_b.engine, holder_name(), LEASE_S)
    try:
        assert a.holder.rsplit(":", 2)[0] == b.holder.rsplit(":", 2)[0]  # host:pid alike
        epoch = a.take()
        assert epoch is not None
        assert b.take() is None, "the other head took a live lease as its own"
        assert a.renew(epoch)
        state = b.state()
        assert state is not None and (state.epoch, state.holder) == (epoch, a.holder)
        assert a.holder != b.holder
    finally:
        a.close()
        b.close()


@given(pid=st.integers(1, (1 << 22) - 1), namespace=st.text("0123456789?", min_size=1, max_size=12))
def test_a_holder_of_another_pid_namespace_is_never_judged_gone(pid: int, namespace: str) -> None:
    """Its pid says nothing about a process here: whatever it is, wait the lease out."""
    if namespace == pid_namespace():
        return
    assert not gone(f"{socket.gethostname()}:{pid}:{namespace}:{uuid.uuid4().hex}")
    assert not gone(f"{socket.gethostname()}:{pid}")  # the old form: not ours to judge


def _renewal_waiting(store: SqlStore) -> bool:
    with store.snapshot() as tx:
        rows = tx.s.connection().exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE 'UPDATE head_lease SET expires%%'"
        )
        return int(rows.scalar_one()) > 0


async def test_a_renewal_is_timed_from_before_it_starts(
    heads: list[tuple[SqlStore, HeadLease]], url: str
) -> None:
    """A renewal held up (here behind a row lock an admin holds): the lease is good,
    as this head judges it, until the renewal's start plus the lease, never its end
    (the server set its expiry somewhere between)."""
    (store_a, _), _ = heads
    leader = Leadership(
        HeadLease(store_a.engine, holder_name(), 4.0), fence(store_a.engine, 4.0), [].append
    )
    try:
        assert await leader.wait(asyncio.Event())
        with connect(url) as admin, admin.transaction():
            admin.execute("SELECT * FROM head_lease WHERE id = 1 FOR UPDATE")
            started = leader.clock()
            renewal = asyncio.ensure_future(leader.renew())
            await asyncio.to_thread(
                poll, lambda: _renewal_waiting(store_a), 10, what="the renewal to wait"
            )
            waiting = leader.clock()  # the renewal began before this; it ends after
        assert await renewal
        assert started + 4.0 <= leader.good_until <= waiting + 4.0
    finally:
        leader.close()


async def test_a_deposed_leader_sends_nothing_to_its_hosts(
    heads: list[tuple[SqlStore, HeadLease]], caplog: pytest.LogCaptureFixture
) -> None:
    """Stopped renewing (as SIGSTOP stops it): once its lease has run out by its own
    clock, each action is refused with one line and never reaches a host, before
    the head has heard of any standby; a lease lost (the fence's epoch gone) too."""
    (store_a, a), _ = heads
    leader = Leadership(a, fence(store_a.engine, LEASE_S), [].append)
    scripted = ScriptedHosts({"gpu01": 1})
    hosts = LeasedHosts(scripted, leader.may_act)
    await hosts.start()
    assert await leader.wait(asyncio.Event())
    assert (await hosts.signal_job("gpu01", 7, "TERM", 5.0)).ok  # leading: sent
    assert scripted.signals == [("gpu01", 7, "TERM")]
    # No renewal runs: the lease runs out by this head's clock.
    await asyncio.to_thread(
        poll, lambda: leader.may_act() is not None, LEASE_S * 5, what="the lease to run out"
    )
    assert leader.clock() >= leader.good_until
    process = GpuProcess("GPU-0", 4242, 1000, 1)
    answers = [
        await hosts.signal_job("gpu01", 7, "KILL", None),
        await hosts.signal_process("gpu01", process, "TERM"),
        await hosts.forget("gpu01", [7]),
        await hosts.reset_gpu("gpu01", 0, "GPU-0"),
    ]
    assert {(x.ok, x.code) for x in answers} == {(False, NOT_LEADING)}
    assert "ran out" in answers[0].message
    assert scripted.signals == [("gpu01", 7, "TERM")] and scripted.process_signals == []
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("leased_hosts")]
    assert len(lines) == len(answers) and lines[0].startswith("head: SIGKILL to run 7 on gpu01")
    assert await leader.renew()  # none took it: renewed, it acts again
    assert (await hosts.signal_job("gpu01", 7, "INT", None)).ok
    leader.guard.epoch = None  # the lease lost (``keep`` fences first)
    assert (await hosts.signal_job("gpu01", 7, "KILL", None)).code == NOT_LEADING
    assert scripted.signals[-1] == ("gpu01", 7, "INT")
    await hosts.close()


def test_heads_starting_at_once_on_an_empty_database_make_one_lease(pg_server: PgServer) -> None:
    """The lease's table is made by whichever head comes first (under an advisory
    lock: ``CREATE TABLE IF NOT EXISTS`` alone races in the server's catalog); one of
    them takes the lease, and migrating afterwards (the leader) keeps that row."""
    url = pg_server.database(migrated=False)
    engine = make_engine(url)
    leases = [HeadLease(engine, holder_name(), 30.0) for _ in range(6)]
    start = threading.Barrier(len(leases))
    taken: list[int | Exception | None] = []

    def take(lease: HeadLease) -> None:
        start.wait(10)
        try:
            taken.append(lease.take())
        except Exception as exc:
            taken.append(exc)

    threads = [threading.Thread(target=take, args=(lease,)) for lease in leases]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(taken, key=repr) == sorted([1] + [None] * (len(leases) - 1), key=repr)
        guard = fence(engine, 30.0)
        guard.epoch = 1
        prepare(engine)  # the leader migrates: 0010 finds the table and its row
        state = leases[0].state()
        assert state is not None and state.epoch == 1 and state.left_s > 0
    finally:
        for lease in leases:
            lease.close()
        engine.dispose()
