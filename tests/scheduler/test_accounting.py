"""Accounting adds up: a scripted day of jobs and claims, through the real store.

A real SQLite file opened as the head opens it, the store's own allocate and free
(claims ended by ``claims.end_claim``, as an idle release does), samples fed through
the meter every 10 s with the holders read back from the store after each change (as
the daemon does), a fixed clock, and figures worked out by hand below.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from gputui.config.scheduler import Accounting, Quota, SchedulerConfig
from gputui.scheduler.head import explain_reads as reads
from gputui.scheduler.head import usage_reads
from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.batch import Item
from gputui.scheduler.head.claims import end_claim
from gputui.scheduler.head.watch.meter import HeadMeter, holders_of
from gputui.scheduler.policy import accounting
from gputui.scheduler.policy.meter import Meter, Metered, Reading
from gputui.scheduler.server.read_args import ReportArgs, UsageArgs
from gputui.scheduler.store.queries import SqlTx
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Claim, Gpu, Host, Job

H = 3600
D = 1709251200  # 2024-03-01 00:00 UTC
NOW = D + 27 * H + 15 * 60  # 2024-03-02 03:15: job 2 still runs
DAY1, DAY2 = "2024-03-01", "2024-03-02"
A0, A1, R0 = "GPU-h1-0", "GPU-h1-1", "GPU-h2-0"
SCHED = SchedulerConfig(
    accounting=Accounting(price_per_kwh=0.30, gpu_hour_rate={"a100": 2.0, "rtx": 0.5}),
    quotas=[
        Quota(group="ml", gpu_hours_per_week=4.0),
        Quota(group="vision", gpu_hours_per_week=20),
    ],
)


@pytest.fixture
def in_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run in a chosen local time zone (``in_zone("UTC")``), and back after."""

    def use(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()

    yield use
    monkeypatch.undo()
    time.tzset()


# -- the scripted day -------------------------------------------------------------------


def _load(uuid: str, t: float) -> tuple[float, float]:
    """(util %, power W) of a GPU during the 10 s that end at ``t``."""
    mid = t - 5
    if uuid == A0 and D + 9 * H <= mid < D + 10.5 * H:  # job 1 computes on its first GPU
        return 80, 300
    if uuid == A1 and mid >= D + 26 * H:  # job 2, still running
        return 100, 400
    if uuid == R0 and D + 15 * H <= mid < D + 15.5 * H:  # someone, without a job or claim
        return 30, 200
    if uuid == R0 and D + 23 * H <= mid < D + 24.5 * H:  # bob's claim, busy for 1.5 h
        return 50, 200
    return 0, 60  # idle (also job 1's second GPU, carol's claim, the end of bob's)


def _gap(host: str, t: float) -> bool:
    """h2 sends nothing from 16:00 to 16:05: its next sample counts only 30 s."""
    return host == "h2" and D + 16 * H < t < D + 16 * H + 300


class Day:
    """The store and the meter, driven through the day."""

    def __init__(self, engine: Engine) -> None:
        self.store = SqlStore(engine)
        self.meter = Meter()
        self.holders: dict[str, Any] = {}
        with self.store.transaction() as tx:
            tx.put_host(Host(name="h1", pool="a100"))
            tx.put_host(Host(name="h2", pool="rtx"))
            for uuid, host, index, pool in ((A0, "h1", 0, "a100"), (A1, "h1", 1, "a100")):
                tx.put_gpu(Gpu(uuid=uuid, host=host, index=index, pool=pool))
            tx.put_gpu(Gpu(uuid=R0, host="h2", index=0, pool="rtx"))
            self.job1 = self._job(tx, "alice", "ml", "p1")
            self.job2 = self._job(tx, "alice", "ml", "p2")
            self.bob = self._claim(tx, "bob", "vision", None)
            self.carol = self._claim(tx, "carol", "ml", "p1")

    def _job(self, tx: SqlTx, user: str, group: str, project: str) -> int:
        job = Job(uid=1, user=user, group=group, project=project, argv="[]", gpus=1)
        job.submitted_at = D
        tx.s.add(job)
        tx.flush()
        assert job.id is not None
        return job.id

    def _claim(self, tx: SqlTx, user: str, group: str, project: str | None) -> int:
        claim = Claim(uid=2, user=user, group=group, project=project, gpus=1, created_at=D)
        claim.state = "active"
        claim_id = tx.add_claim(claim).id
        assert claim_id is not None
        return claim_id  # the id, not the row: no row outlives its transaction

    def events(self) -> dict[float, Any]:
        def end(claim_id: int) -> Any:
            def act(tx: SqlTx, t: float) -> None:
                item = tx.claim(claim_id)
                assert item is not None
                end_claim(tx, item, Context(now=t, slots=()), "expired", "idle")

            return act

        return {
            D + 9 * H: lambda tx, t: tx.allocate([A0, A1], "h1", t, job_id=self.job1),
            D + 10.5 * H: lambda tx, t: tx.free(t, job_id=self.job1),
            D + 12 * H: lambda tx, t: tx.allocate([A1], "h1", t, claim_id=self.carol),
            D + 12.5 * H: end(self.carol),  # idle: released, allocated and never busy
            D + 23 * H: lambda tx, t: tx.allocate([R0], "h2", t, claim_id=self.bob),
            D + 25 * H: end(self.bob),  # across midnight
            D + 26 * H: lambda tx, t: tx.allocate([A1], "h1", t, job_id=self.job2),
        }

    def run(self) -> Metered:
        """Sample every 10 s from midnight to NOW; store the meter's count every 10
        minutes; the count since the last flush is handed back (not yet stored)."""
        events = self.events()
        t = float(D)
        while t <= NOW:
            for host, uuids in (("h1", (A0, A1)), ("h2", (R0,))):
                if not _gap(host, t):
                    readings = [Reading(u, *_load(u, t)) for u in uuids]
                    self.meter.observe(host, object(), readings, t, self.holders)
            if t in events:
                with self.store.transaction() as tx:
                    events[t](tx, t)
                with self.store.snapshot() as tx:  # the daemon's refresh after a commit
                    self.holders = holders_of(tx.usage.open_holders())
            if (t - D) % 600 == 0:
                taken = self.meter.take()
                with self.store.transaction() as tx:
                    tx.usage.add_metered(taken.usage_rows(), taken.cluster_rows())
            t += 10
        return self.meter.take()

    def ask(self, pending: Metered, by: str, **kw: Any) -> dict[str, Any]:
        args = UsageArgs(since=float(D), until=float(NOW), by=by, **kw)  # type: ignore[arg-type]
        with self.store.snapshot() as tx:
            return usage_reads.usage(tx, args, SCHED, pending, NOW)


def _row(day: str, key: str, alloc: float, busy: float, kwh: float, cost: float) -> dict[str, Any]:
    return {
        "day": day, "key": key, "alloc_gpu_h": alloc, "busy_gpu_h": busy,
        "energy_kwh": kwh, "cost": cost,
    }  # fmt: skip


def _approx(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: pytest.approx(v, abs=1e-6) if isinstance(v, float) else v for k, v in r.items()}
        for r in rows
    ]


# By hand: price 0.30 a kWh; an a100 GPU-hour 2.00, an rtx one 0.50.
# job 1 (alice, ml, p1): 2 a100 GPUs 09:00-10:30 = 3.0 GPU-h; busy 1.5 h (one GPU at
#   80 %); (300 W + 60 W) x 5400 s = 0.54 kWh; 0.54 x 0.3 + 3.0 x 2 = 6.162
# carol's claim (ml, p1): 1 a100 12:00-12:30 idle = 0.5 GPU-h, 60 W x 1800 s = 0.03 kWh,
#   0.009 + 1.0 = 1.009
# bob's claim (vision, no project): 1 rtx 23:00-01:00: day 1 1.0 GPU-h busy 1.0, 200 W x
#   3600 s = 0.2 kWh, 0.06 + 0.5 = 0.56; day 2 1.0 GPU-h busy 0.5, 200 W x 1800 s + 60 W
#   x 1800 s = 0.13 kWh, 0.039 + 0.5 = 0.539
# job 2 (alice, ml, p2): 1 a100 from 02:00, running at 03:15 = 1.25 GPU-h busy 1.25,
#   400 W x 4500 s = 0.5 kWh, 0.15 + 2.5 = 2.65
BY = {
    "user": [
        _row(DAY1, "alice", 3.0, 1.5, 0.54, 6.162),
        _row(DAY1, "bob", 1.0, 1.0, 0.2, 0.56),
        _row(DAY1, "carol", 0.5, 0.0, 0.03, 1.009),
        _row(DAY2, "alice", 1.25, 1.25, 0.5, 2.65),
        _row(DAY2, "bob", 1.0, 0.5, 0.13, 0.539),
    ],
    "group": [
        _row(DAY1, "ml", 3.5, 1.5, 0.57, 7.171),
        _row(DAY1, "vision", 1.0, 1.0, 0.2, 0.56),
        _row(DAY2, "ml", 1.25, 1.25, 0.5, 2.65),
        _row(DAY2, "vision", 1.0, 0.5, 0.13, 0.539),
    ],
    "project": [
        _row(DAY1, "", 1.0, 1.0, 0.2, 0.56),
        _row(DAY1, "p1", 3.5, 1.5, 0.57, 7.171),
        _row(DAY2, "", 1.0, 0.5, 0.13, 0.539),
        _row(DAY2, "p2", 1.25, 1.25, 0.5, 2.65),
    ],
    "pool": [
        _row(DAY1, "a100", 3.5, 1.5, 0.57, 7.171),
        _row(DAY1, "rtx", 1.0, 1.0, 0.2, 0.56),
        _row(DAY2, "a100", 1.25, 1.25, 0.5, 2.65),
        _row(DAY2, "rtx", 1.0, 0.5, 0.13, 0.539),
    ],
}
TOTALS = {
    "user": [("alice", 4.25, 2.75, 1.04, 8.812), ("bob", 2.0, 1.5, 0.33, 1.099),
             ("carol", 0.5, 0.0, 0.03, 1.009)],
    "group": [("ml", 4.75, 2.75, 1.07, 9.821), ("vision", 2.0, 1.5, 0.33, 1.099)],
    "project": [("p1", 3.5, 1.5, 0.57, 7.171), ("", 2.0, 1.5, 0.33, 1.099),
                ("p2", 1.25, 1.25, 0.5, 2.65)],
    "pool": [("a100", 4.75, 2.75, 1.07, 9.821), ("rtx", 2.0, 1.5, 0.33, 1.099)],
}  # fmt: skip


@pytest.fixture
def day(store: Engine, in_zone: Any) -> tuple[Day, Metered]:
    in_zone("UTC")
    scripted = Day(store)
    pending = scripted.run()
    return scripted, pending


@pytest.mark.parametrize("by", ["user", "group", "project", "pool"])
def test_a_scripted_day_adds_up_by_every_key(day: tuple[Day, Metered], by: str) -> None:
    scripted, pending = day
    assert pending  # the last minutes are only in the meter: counted all the same
    result = scripted.ask(pending, by)
    assert (result["since"], result["until"], result["by"]) == (D, NOW, by)
    assert result["currency"] == "EUR" and result["hours"] == []
    assert result["rows"] == _approx(BY[by])
    totals = [
        {"key": k, "alloc_gpu_h": a, "busy_gpu_h": b, "energy_kwh": e, "cost": c}
        for k, a, b, e, c in TOTALS[by]
    ]
    assert result["totals"] == _approx(totals)


def test_what_is_stored_is_what_ended_and_what_was_flushed(day: tuple[Day, Metered]) -> None:
    """Without the meter's last count, the stored rows alone: job 2's allocation is
    still open (counted live only), the rest is in the usage table."""
    scripted, _pending = day
    with scripted.store.snapshot() as tx:
        stored = tx.usage.hours(D, NOW)
    alloc = {}
    for _hour, user, _g, _p, _pool, seconds, _b, _e in stored:
        alloc[user] = alloc.get(user, 0.0) + seconds
    assert alloc == {"alice": 3 * H, "bob": 2 * H, "carol": 0.5 * H}
    assert {(r[0], r[1]) for r in stored if r[0] == D + 23 * H} == {(D + 23 * H, "bob")}


def test_the_cluster_hours_count_every_gpu_present_and_the_gap_only_to_the_cap(
    day: tuple[Day, Metered],
) -> None:
    scripted, pending = day
    hours = {h["hour"]: h for h in scripted.ask(pending, "user", hourly=True)["hours"]}
    assert sorted(hours) == [D + i * H for i in range(28)]
    assert hours[D + 9 * H] == {
        "hour": D + 9 * H,
        "gpu_h": 3.0,
        "alloc_gpu_h": 2.0,
        "busy_gpu_h": 1.0,
    }
    assert hours[D + 15 * H] == {
        "hour": D + 15 * H,
        "gpu_h": 3.0,
        "alloc_gpu_h": 0.0,
        "busy_gpu_h": 0.5,
    }
    # h2 silent 16:00-16:05: 300 s without a sample count 30 s.
    assert hours[D + 16 * H]["gpu_h"] == pytest.approx(3 - 270 / H, abs=1e-6)
    assert hours[D + 27 * H] == {
        "hour": D + 27 * H,
        "gpu_h": 0.75,
        "alloc_gpu_h": 0.25,
        "busy_gpu_h": 0.25,
    }


def test_the_report_sums_the_day_and_names_the_group_over_quota(day: tuple[Day, Metered]) -> None:
    scripted, pending = day
    with scripted.store.snapshot() as tx:
        standing = reads.standing_of(tx, SCHED, NOW)  # the scheduler's figures
        args = ReportArgs(since=float(D), until=float(NOW))
        result = usage_reads.report(tx, args, SCHED, pending, NOW, standing=standing)
    assert (
        result["total"]
        == _approx([{"alloc_gpu_h": 6.75, "busy_gpu_h": 4.25, "energy_kwh": 1.4, "cost": 10.92}])[0]
    )
    # Every GPU: 3 x 27.25 h less the 270 s not watched; busy 1.5 + 1.25 + 0.5 + 1.5 h;
    # energy (by hand, per GPU, idle at 60 W): 7,182,000 + 7,416,000 + 6,877,800 J.
    assert (
        result["cluster"]
        == _approx(
            [
                {
                    "gpu_h": 81.75 - 0.075,
                    "alloc_gpu_h": 6.75,
                    "busy_gpu_h": 4.75,
                    "energy_kwh": 5.9655,
                }
            ]
        )[0]
    )
    assert [u["key"] for u in result["users"]] == ["alice", "bob", "carol"]
    assert [g["key"] for g in result["groups"]] == ["ml", "vision"]
    # The quotas as the scheduler counts them (gputui quota): allocated since Monday
    # 00:00 (2024-02-26), so the whole scripted day: ml 3.0 + 0.5 + 1.25 of 4 GPU-h.
    assert result["quota_week_start"] == D - 4 * 86400
    assert result["quotas"] == [
        {"group": "ml", "pool": None, "limit_gpu_h": 4.0, "used_gpu_h": pytest.approx(4.75),
         "over": True},
        {"group": "vision", "pool": None, "limit_gpu_h": 20.0, "used_gpu_h": pytest.approx(2.0),
         "over": False},
    ]  # fmt: skip
    clock = {h["clock"]: h for h in result["hours_of_day"]}
    assert clock["09:00"]["busy_gpu_h"] == 1.0 and clock["02:00"]["busy_gpu_h"] == 1.0


def test_an_allocation_is_charged_to_its_gpus_pool_else_its_hosts(store: Engine) -> None:
    """The GPU's pool is the one its host's last inventory gave it; the host's row
    keeps the pool it was first stored with, so it only stands in for a GPU with no
    row; with neither, "default"."""
    js = SqlStore(store)
    with js.transaction() as tx:
        tx.put_host(Host(name="h1", pool="stale"))
        tx.put_host(Host(name="h2", pool="v100"))
        tx.put_gpu(Gpu(uuid=A0, host="h1", index=0, pool="a100"))
        job = Job(uid=1, user="u", group="g", argv="[]", gpus=3, submitted_at=D)
        tx.s.add(job)
        tx.flush()
        tx.allocate([A0], "h1", D, job_id=job.id)
        tx.allocate([R0], "h2", D, job_id=job.id)
        tx.allocate(["GPU-x"], "h9", D, job_id=job.id)
        pools = {uuid: pool for uuid, *_rest, pool in tx.usage.open_allocations()}
        assert pools == {A0: "a100", R0: "v100", "GPU-x": "default"}
        tx.free(D + H, job_id=job.id)
        charged = {(r[4], r[5]) for r in tx.usage.hours(D, D + H)}
    assert charged == {("a100", H), ("v100", H), ("default", H)}


def test_the_usage_range_is_read_through_the_primary_key(store: Engine) -> None:
    """The hour leads the primary key: the store's range read (``usage``'s) is an
    index search, not a scan, with no index of its own."""
    statements: list[str] = []
    with SqlStore(store).snapshot() as tx:
        cursor = tx._cursor()
        cursor.connection.set_trace_callback(statements.append)
        tx.usage.hours(D, NOW)
        cursor.connection.set_trace_callback(None)
        reads = [q for q in statements if "FROM usage" in q]
        assert len(reads) == 1, statements
        for sql in reads:
            plan = [str(row[-1]) for row in cursor.execute(f"EXPLAIN QUERY PLAN {sql}")]
            assert any(step.startswith("SEARCH usage USING INDEX") for step in plan), plan


# -- days in the head's time zone ----------------------------------------------------------


def test_in_a_half_hour_zone_an_hour_belongs_to_the_day_it_starts_in(in_zone: Any) -> None:
    """India is UTC+5:30: the UTC hour 18:00 is 23:30-00:30 local, all of it on the
    day it starts in; a range from local midnight starts with the hour after."""
    in_zone("IST-5:30")
    evening = D + 18 * H  # 2024-03-01 23:30 local
    alloc: accounting.OpenAllocation = (A0, float(evening), "alice", "ml", "", "a100")
    midnight = time.mktime((2024, 3, 2, 0, 0, 0, 0, 0, -1))
    assert midnight == D + 18.5 * H
    gathered = accounting.gather([], [alloc], [], since=D, until=D + 48 * H, now=evening + 2 * H)
    rows = accounting.summarize(gathered, "user", accounting.Prices())["rows"]
    assert [(r["day"], r["alloc_gpu_h"]) for r in rows] == [(DAY1, 1.0), (DAY2, 1.0)]
    later = accounting.gather(
        [], [alloc], [], since=midnight, until=D + 48 * H, now=evening + 2 * H
    )
    assert list(later) == [(evening + H, "alice", "ml", "", "a100")]


def test_the_local_day_follows_the_zone(in_zone: Any) -> None:
    in_zone("UTC")
    assert accounting.local_day(D - 1) == "2024-02-29"
    in_zone("EST+5")
    assert accounting.local_day(D + 4 * H) == "2024-02-29"
    assert accounting.local_day(D + 5 * H) == DAY1
    assert os.environ["TZ"] == "EST+5"


# -- the daemon's side: a full inbox, a stop -----------------------------------------------


async def test_counts_the_writer_could_not_take_are_kept_and_stored_at_the_stop(
    store: Engine,
) -> None:
    """A flush into a full inbox keeps the counts for the next one; at the stop, the
    counts and the ``meter`` items still waiting in the inbox all go to the store."""
    js = SqlStore(store)
    offered: list[Item] = []
    full = True

    def post(item: Item) -> bool:
        offered.append(item)
        return not full

    async def read(fn: Any) -> Any:
        return fn()

    head = HeadMeter(js, read, post, clock=lambda: float(D))
    head.meter.count(D, D + 10, 50, 100, None)
    head.flush()  # refused: kept
    assert len(offered) == 1 and head.pending().cluster == {D: [10.0, 10.0, 1000.0]}
    full = False
    head.flush()  # taken by the "writer", which never applies it
    waiting = offered[-1]
    assert waiting.kind == "meter" and not head.pending()
    head.meter.count(D + 10, D + 20, 0, 40, None)
    await head.close([Item("tick"), waiting])
    with js.snapshot() as tx:
        assert tx.usage.cluster_hours(D, D + H) == [(D, 20.0, 0.0, 10.0, 1400.0)]
