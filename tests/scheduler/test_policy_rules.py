"""The policy's arithmetic and its promises over time: fair share, quotas, the
off-hours window, dependencies, and no starvation behind a stream of small jobs."""

from __future__ import annotations

import dataclasses
import math
import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.scheduler import OffHours, SchedulerConfig
from gputui.scheduler.policy import line, model, passes, shares
from gputui.scheduler.policy.model import ClusterView, GpuSlot, Running, Want
from gputui.scheduler.policy.reference import decide_ref

HOUR = 3600.0


# -- fair share ------------------------------------------------------------------------


@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]), st.floats(0, 1e7, allow_nan=False), min_size=1
    ),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.floats(0.1, 100, allow_nan=False)),
)
def test_fair_share_follows_usage_over_share(
    usage: dict[str, float], share: dict[str, float]
) -> None:
    f = shares.fair_factors(usage, share, 1.0, usage)
    assert all(0.0 <= v <= 1.0 for v in f.values())
    ratio = {g: usage[g] / share.get(g, 1.0) for g in usage}
    for g in usage:
        for h in usage:
            if ratio[g] < ratio[h] * (1 - 1e-9):
                assert f[g] >= f[h]  # used less against its share: at least as far ahead
    if sum(usage.values()) == 0:
        assert set(f.values()) == {1.0}


def test_a_group_that_used_exactly_its_share_gets_a_half() -> None:
    f = shares.fair_factors({"a": 10.0, "b": 30.0}, {"a": 1.0, "b": 3.0}, 1.0, ["a", "b"])
    assert f == pytest.approx({"a": 0.5, "b": 0.5})


@given(st.floats(0, 30 * 86400), st.floats(1, 30 * 86400), st.floats(3600, 30 * 86400))
def test_decayed_use_halves_every_half_life(age: float, length: float, half_life: float) -> None:
    now = 1e9
    recent = shares.decayed_seconds(now - age - length, now - age, now, half_life)
    older = shares.decayed_seconds(
        now - age - length - half_life, now - age - half_life, now, half_life
    )
    assert 0 <= recent <= length + 1e-6
    assert older == pytest.approx(recent / 2, rel=1e-6, abs=1e-9)


def test_the_line_orders_a_class_by_fair_share_before_arrival() -> None:
    gpus = (GpuSlot("g0", "h", 0),)
    heavy = Want("job", 1, 1, group="heavy", since=1.0, fair=0.1)
    light = Want("job", 2, 1, group="light", since=2.0, fair=0.9)
    urgent_heavy = Want("job", 3, 1, group="heavy", since=3.0, fair=0.1, rank=0)
    d = passes.decide(ClusterView(gpus=gpus, waiting=(heavy, light)))
    assert [p.id for p in d.place] == [2]  # the light user's job goes first
    lower = (Want("job", 1, 1, since=1.0, rank=1, fair=1.0), urgent_heavy)
    d = passes.decide(ClusterView(gpus=gpus, waiting=lower))
    assert [p.id for p in d.place] == [3]  # class before fair share


# -- quotas -----------------------------------------------------------------------------


def test_quota_use_counts_this_week_only_and_per_pool() -> None:
    config = SchedulerConfig.model_validate(
        {
            "quotas": [
                {"group": "res", "pool": "rtx3090", "gpu_hours_per_week": 60},
                {"group": "interns", "gpu_hours_per_week": 20},
            ]
        },
        strict=False,
    )
    now = shares.week_start(time.time()) + 2 * 86400  # a Wednesday
    start = shares.week_start(now)
    spans = [
        shares.Span("res", "rtx3090", start - 10 * HOUR, start + 60 * HOUR),  # 60 h this week
        shares.Span("res", "rtx3090", now - 20 * HOUR, None),  # still running: 20 h
        shares.Span("res", "a100", now - 500 * HOUR, now),  # another pool
        shares.Span("interns", "a100", now - 5 * HOUR, now - 4 * HOUR),
    ]
    got = shares.standing(spans, [], config, now)
    used = {(q.quota.group, q.quota.pool): round(q.used_gpu_h, 6) for q in got.quotas}
    assert used == {("res", "rtx3090"): 68.0, ("interns", None): 1.0}  # 48 h + 20 h
    assert got.over_quota("res", "rtx3090") and got.over_quota("res", None)
    assert not got.over_quota("res", "a100") and not got.over_quota("interns", "a100")


def test_over_quota_work_gets_only_what_within_quota_work_leaves() -> None:
    gpus = tuple(GpuSlot(f"g{i}", "h", i) for i in range(2))
    over = Want("job", 1, 1, since=1.0, rank=0, over_quota=True)
    within = Want("job", 2, 2, since=5.0, rank=3)
    d = passes.decide(ClusterView(gpus=gpus, waiting=(over, within)))
    assert [p.id for p in d.place] == [2]
    assert {w.id: w.reason for w in d.wait} == {1: model.QUOTA}


# -- the line ------------------------------------------------------------------------

# Few values of each field, so that pairs often tie on the first ones; and the edges.
_WANTS = st.builds(
    Want,
    kind=st.sampled_from(["job", "claim"]),
    id=st.integers(0, 3) | st.integers(0, 2**63),
    gpus=st.just(1),
    since=st.sampled_from([0.0, -0.0, 5e-324, 1.0, 1.8e9, math.inf])
    | st.floats(0, 4e9, allow_nan=False),
    rank=st.integers(0, 3) | st.integers(0, 2**31),
    fair=st.sampled_from([0.0, -0.0, 5e-324, 0.5, 1.0]) | st.floats(0, 1),
    over_quota=st.booleans(),
)


_FIELDS = ("over_quota", "rank", "fair", "since", "kind", "id")


@settings(max_examples=500)
@given(_WANTS, _WANTS, st.sampled_from(_FIELDS))
def test_the_line_key_orders_as_the_fields_do(a: Want, b: Want, field: str) -> None:
    """Against another request, and against itself with one field changed (so that
    it ties on all the others)."""

    def fields(w: Want) -> tuple[object, ...]:
        return (w.over_quota, w.rank, -w.fair, w.since, w.kind != "job", w.id)

    for other in (b, dataclasses.replace(a, **{field: getattr(b, field)})):
        assert (a.line_key() < other.line_key()) == (fields(a) < fields(other))
        assert (a.line_key() == other.line_key()) == (fields(a) == fields(other))


@given(st.floats(allow_nan=True), st.floats(allow_nan=True), st.integers(), st.integers())
def test_the_line_key_takes_any_numbers(fair: float, since: float, rank: int, ident: int) -> None:
    key = Want("job", ident, 1, since=since, rank=rank, fair=fair).line_key()
    assert 0 <= key < 2**226


# -- preemption ------------------------------------------------------------------------


def test_a_victim_taken_leaves_a_smaller_one_that_the_next_preemptor_counts() -> None:
    """Host a runs A (2 GPUs, the youngest) and B (1 GPU); host b runs D, host c
    runs G (1 GPU each), all preemptible. Z (1 GPU) preempts D on b; W1 (2 GPUs)
    preempts A on a. W2 (1 GPU) must now preempt B on a, one victim freeing one
    GPU, like G on c but a comes first by name; before W1, a's best for one GPU
    was A, freeing two, worse than c's. A pass that kept that older answer for a
    would send W2 to c."""
    now = 100_000.0
    gpus = tuple(
        GpuSlot(f"{h}{i}", h, i, busy=True)
        for h, n in (("a", 4), ("b", 2), ("c", 2))
        for i in range(n)
    )

    def job(ident: int, host: str, uuids: tuple[str, ...], age: float, low: bool) -> Running:
        return Running(
            "job", ident, host, uuids, rank=2 if low else 0, preemptible=low, started_at=now - age
        )

    running = (
        job(1, "a", ("a0", "a1"), 1_000, True),  # A
        job(2, "a", ("a2",), 5_000, True),  # B
        job(3, "a", ("a3",), 5_000, False),
        job(4, "b", ("b0",), 3_000, True),  # D
        job(5, "b", ("b1",), 3_000, False),
        job(6, "c", ("c0",), 9_000, True),  # G
        job(7, "c", ("c1",), 9_000, False),
    )
    line = (
        Want("job", 10, 1, since=1.0, rank=0),  # Z
        Want("job", 11, 2, since=2.0, rank=0),  # W1
        Want("job", 12, 1, since=3.0, rank=0),  # W2
    )
    view = ClusterView(
        gpus=gpus, waiting=line, running=running, now=now, preemption=True, off_hours=False
    )
    d = passes.decide(view)
    assert {(p.for_id, p.id, p.host) for p in d.preempt} == {
        (10, 4, "b"),
        (11, 1, "a"),
        (12, 2, "a"),
    }
    assert d == decide_ref(view)


def test_gpus_a_preemption_frees_for_no_one_count_for_the_next_preemptor() -> None:
    """Z (3 GPUs) preempts C on c. W1 (1 GPU, pool p: hosts m and z) preempts A on
    m, the youngest there, which holds two GPUs: one is W1's, one comes free for
    no one. W2 (3 GPUs) then needs two victims on m (B1, B2) and the GPU left
    over, freeing two; on n it also needs two (N1, N2) and a GPU coming free, but
    m comes first by name. Before W1, m needed two victims freeing three for W2's
    size; a pass that kept that older bound for m would send W2 to n."""
    now = 100_000.0
    hosts = (("m", "p", 5), ("z", "p", 4), ("c", "q", 4), ("n", "q", 4))
    gpus = tuple(
        GpuSlot(f"{h}{i}", h, i, pool=pool, busy=True) for h, pool, n in hosts for i in range(n)
    )

    def job(
        ident: int, uuids: str, age: float, low: bool = True, stopping: bool = False
    ) -> Running:
        return Running(
            "job",
            ident,
            uuids[0],
            tuple(uuids.split()),
            rank=2 if low else 0,
            preemptible=low,
            started_at=now - age,
            stopping=stopping,
        )

    running = (
        job(1, "m0 m1", 1_000),  # A, the youngest on m
        job(2, "m2", 5_000),  # B1
        job(3, "m3", 5_000),  # B2
        job(4, "m4", 5_000, low=False),
        job(5, "z0 z1", 2_000),
        job(6, "z2", 6_000),
        job(7, "z3", 6_000, low=False),
        job(8, "c0 c1 c2", 3_000),  # C
        job(9, "c3", 3_000, low=False),
        job(10, "n0", 3_000, stopping=True),
        job(11, "n1", 3_000),  # N1
        job(12, "n2", 3_000),  # N2
        job(13, "n3", 3_000, low=False),
    )
    line = (
        Want("job", 20, 3, since=1.0, rank=0),  # Z
        Want("job", 21, 1, since=2.0, rank=0, pool="p"),  # W1
        Want("job", 22, 3, since=3.0, rank=0),  # W2
    )
    view = ClusterView(
        gpus=gpus, waiting=line, running=running, now=now, preemption=True, off_hours=False
    )
    d = passes.decide(view)
    assert {(p.for_id, p.id, p.host) for p in d.preempt} == {
        (20, 8, "c"),
        (21, 1, "m"),
        (22, 2, "m"),
        (22, 3, "m"),
    }
    assert d == decide_ref(view)


# -- the off-hours window -----------------------------------------------------------


@pytest.fixture
def utc() -> object:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield None
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_the_window_spans_midnight(utc: object) -> None:
    window = OffHours(start="22:00", end="08:00")
    day = 1_796_000_000 - 1_796_000_000 % 86400  # a UTC midnight
    inside = [day + 22 * HOUR, day + 23.99 * HOUR, day + 86400, day + 86400 + 7.99 * HOUR]
    outside = [day + 8 * HOUR, day + 12 * HOUR, day + 21.99 * HOUR]
    assert all(shares.in_off_hours(t, window) for t in inside)
    assert not any(shares.in_off_hours(t, window) for t in outside)
    assert shares.off_hours_start(day + 12 * HOUR, window) == day + 22 * HOUR
    daytime = OffHours(start="09:00", end="17:00")
    assert shares.in_off_hours(day + 9 * HOUR, daytime)
    assert not shares.in_off_hours(day + 17 * HOUR, daytime)


# -- dependencies -------------------------------------------------------------------


def test_dependency_states() -> None:
    states = {1: "completed", 2: "running", 3: "failed", 4: "cancelled"}
    assert line.dependency_state([1], True, states) is None
    assert line.dependency_state([1, 2], True, states) == model.DEPENDENCY
    assert line.dependency_state([3], False, states) is None  # --after: any end will do
    assert line.dependency_state([1, 3], True, states) == "dependency job 3 failed"
    assert line.dependency_state([4, 2], True, states) == "dependency job 4 cancelled"
    assert line.dependency_state([99], True, states) is None  # purged: it had ended


# -- no starvation -----------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    limit=st.sampled_from([600.0, 1800.0, 3600.0]),
    every=st.sampled_from([30.0, 60.0, 120.0]),
    offset=st.floats(0, 1),
)
def test_a_big_job_behind_a_stream_of_small_ones_starts_by_its_reservation(
    limit: float, every: float, offset: float
) -> None:
    """An 8-GPU host full of 1-GPU jobs, a 4-GPU job arrives, and 1-GPU jobs keep
    coming faster than they end: it starts no later than the reservation it got
    on arriving. Each job runs its whole time limit (the worst case)."""
    gpus = tuple(GpuSlot(f"g{i}", "h", i) for i in range(8))
    now = 0.0
    running: dict[int, tuple[tuple[str, ...], float, float]] = {}
    for i in range(8):  # started at staggered times
        start = -limit * (i + offset) / 8
        running[i + 1] = ((f"g{i}",), start, start + limit)
    waiting: dict[int, Want] = {}
    next_id = 100
    big = Want("job", 99, 4, since=0.0, time_limit_s=limit)
    waiting[99] = big
    promised: float | None = None
    step = min(every, limit / 8) / 2
    while now < 20 * limit:
        # Jobs at their limit end; a new small job arrives every `every` seconds.
        for job_id, (_, _, end) in list(running.items()):
            if end <= now:
                del running[job_id]
        if now % every < step:
            waiting[next_id] = Want("job", next_id, 1, since=now, time_limit_s=limit)
            next_id += 1
        busy = {u for held, _, _ in running.values() for u in held}
        view = ClusterView(
            gpus=tuple(GpuSlot(g.uuid, g.host, g.index, busy=g.uuid in busy) for g in gpus),
            waiting=tuple(waiting.values()),
            running=tuple(
                Running("job", i, "h", held, started_at=s, ends_at=e)
                for i, (held, s, e) in running.items()
            ),
            now=now,
        )
        d = passes.decide(view)
        for p in d.place:
            if p.id == 99:
                # (The simulation's clock moves in steps: it starts at the first one.)
                assert promised is not None and now <= promised + step
                return
            running[p.id] = (p.gpu_uuids, now, now + limit)
            del waiting[p.id]
        mine = next(w for w in d.wait if w.id == 99)
        if promised is None:
            assert mine.start_at is not None and math.isfinite(mine.start_at)
            promised = mine.start_at
        else:
            assert mine.start_at is not None and mine.start_at <= promised + 1e-6
        now += step
    raise AssertionError("the 4-GPU job never started")
