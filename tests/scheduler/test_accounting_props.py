"""Accounting's invariants on generated inputs: splitting by hour conserves seconds,
the meter never counts more busy than present time, and bad samples (NaN, negative,
huge) never corrupt the totals, in the meter or once stored."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.cli import dates as cli_dates
from gputui.scheduler.client import HeadError
from gputui.scheduler.policy import accounting
from gputui.scheduler.policy.accounting import HOUR, MAX_SPAN_S, split_hours
from gputui.scheduler.policy.meter import MAX_GAP_S, MAX_POWER_W, Holder, Meter, Reading
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore

T0 = 1_700_000_000.0
times = st.floats(T0 - 10 * 86400, T0 + 10 * 86400, allow_nan=False)
wild = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, -math.inf, math.inf, -1.0, 0.0, 1e308, -1e308, 101.0, 5001.0]),
)


@given(start=times, length=st.floats(-86400, 40 * 86400, allow_nan=False))
def test_splitting_by_hour_conserves_seconds_and_is_never_negative(
    start: float, length: float
) -> None:
    end = start + length
    parts = split_hours(start, end)
    if end <= start:
        assert parts == []
        return
    assert all(0 < seconds <= HOUR for _, seconds in parts)
    assert all(hour % HOUR == 0 for hour, _ in parts)
    hours = [hour for hour, _ in parts]
    assert hours == list(range(hours[0], hours[-1] + 1, HOUR))  # consecutive, no repeats
    assert hours[0] <= start < hours[0] + HOUR
    assert hours[-1] < end <= hours[-1] + HOUR
    assert sum(s for _, s in parts) == pytest.approx(end - start, abs=1e-6)


@given(start=st.floats(-1e12, 1e12, allow_nan=False), length=st.floats(0, 1e12, allow_nan=False))
def test_a_span_longer_than_the_cap_counts_only_its_last_part(start: float, length: float) -> None:
    parts = split_hours(start, start + length)
    assert len(parts) <= MAX_SPAN_S / HOUR + 2
    assert sum(s for _, s in parts) <= min(length, MAX_SPAN_S) + 1e-3 * max(1.0, abs(start))


@given(
    hour=st.integers(-(10**9), 10**9),
    offset=st.one_of(st.floats(0, HOUR), st.sampled_from([0.0, HOUR - 1e-6, HOUR - 1.0])),
    length=st.one_of(
        st.floats(0, 2 * HOUR, allow_nan=False), st.sampled_from([1e-9, 1.0, HOUR, HOUR + 1e-6])
    ),
)
def test_the_one_hour_shortcut_splits_as_the_walk_does(
    hour: int, offset: float, length: float
) -> None:
    """A span within one hour (a sample's second: nearly every one) is answered without
    the walk over hours; exactly what the walk answers, at and either side of a boundary."""
    start = float(hour * HOUR) + offset
    end = start + length
    if end > start:
        assert split_hours(start, end) == accounting._split_hours(start, end)


nonfinite = st.sampled_from([math.nan, math.inf, -math.inf])


@given(pair=st.one_of(st.tuples(nonfinite, times), st.tuples(times, nonfinite)))
def test_splitting_nonsense_gives_nothing(pair: tuple[float, float]) -> None:
    assert split_hours(*pair) == []


# -- the meter ---------------------------------------------------------------------------

UUIDS = ("GPU-a", "GPU-b", "GPU-c")
holders = st.dictionaries(
    st.sampled_from(UUIDS),
    st.builds(
        Holder,
        user=st.sampled_from(["alice", "bob"]),
        group=st.just("ml"),
        project=st.just(""),
        pool=st.just("a100"),
        since=st.one_of(times, st.just(math.nan), st.just(-math.inf)),
    ),
)
step = st.tuples(
    st.floats(-5, 120, allow_nan=False),  # seconds since the previous sample (may go back)
    st.lists(st.tuples(st.sampled_from(UUIDS), wild, wild), max_size=4),
    holders,
    st.one_of(st.none(), st.floats(0.1, 100)),  # the host's stale limit, when it says
)


def _sane(value: float) -> bool:
    return math.isfinite(value) and value >= 0


@settings(max_examples=300)
@given(steps=st.lists(step, max_size=40))
def test_the_meter_never_counts_more_busy_than_present_nor_anything_insane(
    steps: list[
        tuple[float, list[tuple[str, float | None, float | None]], dict[str, Holder], float | None]
    ],
) -> None:
    meter = Meter()
    t = T0
    elapsed = 0.0
    for dt, readings, held, stale in steps:
        t += dt
        elapsed += max(0.0, dt)
        meter.observe("h", object(), [Reading(*r) for r in readings], t, held, max_gap_s=stale)
    counted = meter.take()
    for hour, (present, busy, energy) in counted.cluster.items():
        assert hour % HOUR == 0
        assert all(_sane(v) for v in (present, busy, energy))
        assert busy <= present + 1e-6
        assert energy <= MAX_POWER_W * present * (1 + 1e-9)
    present = sum(v[0] for v in counted.cluster.values())
    assert present <= len(UUIDS) * min(elapsed, MAX_GAP_S * len(steps)) + 1e-6
    charged: dict[int, float] = {}
    for key, (busy, energy) in counted.usage.items():
        assert _sane(busy) and _sane(energy)
        charged[key[0]] = charged.get(key[0], 0.0) + busy
    for hour, busy in charged.items():  # the holders' busy time is the cluster's too
        assert busy <= counted.cluster[hour][1] + 1e-6
    assert not meter.take()  # taken means handed over


@given(
    gaps=st.lists(st.floats(0.5, 20), min_size=1, max_size=30),
    bad=st.lists(st.tuples(wild, wild), min_size=1, max_size=30),
)
def test_bad_readings_count_as_nothing_or_as_the_clamped_value(
    gaps: list[float], bad: list[tuple[float | None, float | None]]
) -> None:
    """A GPU whose every reading is nonsense: present time as for a good one, busy only
    when a finite reading above 0 came, energy never above 5000 W, never NaN."""
    meter = Meter()
    t = T0
    meter.observe("h", object(), [Reading("GPU-a", 0, 0)], t, {})
    expected_present = 0.0
    expected_busy = 0.0
    for i, gap in enumerate(gaps):
        t += gap
        util, power = bad[i % len(bad)]
        meter.observe("h", object(), [Reading("GPU-a", util, power)], t, {})
        expected_present += gap
        if util is not None and math.isfinite(util) and util > 0:
            expected_busy += gap
    present, busy, energy = (sum(v[i] for v in meter.pending.cluster.values()) for i in range(3))
    assert present == pytest.approx(expected_present)
    assert busy == pytest.approx(expected_busy)
    assert 0 <= energy <= MAX_POWER_W * present * (1 + 1e-9)


def test_one_sample_seen_twice_is_counted_once() -> None:
    meter = Meter()
    sample = object()
    meter.observe("h", object(), [Reading("GPU-a", 50, 100)], T0, {})
    meter.observe("h", sample, [Reading("GPU-a", 50, 100)], T0 + 10, {})
    meter.observe("h", sample, [Reading("GPU-a", 50, 100)], T0 + 20, {})  # re-sent snapshot
    assert meter.pending.cluster[accounting.hour_of(T0)] == [10.0, 10.0, 1000.0]


def test_a_holder_is_charged_only_from_its_allocation_on() -> None:
    meter = Meter()
    holder = Holder("alice", "ml", "", "a100", since=T0 + 4)
    meter.observe("h", object(), [Reading("GPU-a", 100, 100)], T0, {})
    meter.observe("h", object(), [Reading("GPU-a", 100, 100)], T0 + 10, {"GPU-a": holder})
    ((key, (busy, energy)),) = meter.pending.usage.items()
    assert key == (accounting.hour_of(T0), "alice", "ml", "", "a100")
    assert (busy, energy) == (6.0, 600.0)
    assert meter.pending.cluster[accounting.hour_of(T0)] == [10.0, 10.0, 1000.0]


@given(
    since=st.floats(0, 100),
    length=st.floats(0, 100),
    samples=st.lists(st.floats(0.1, 30), min_size=1, max_size=12),
)
def test_a_holder_is_never_charged_past_its_allocations_end(
    since: float, length: float, samples: list[float]
) -> None:
    """Busy time charged to an allocation is within it: however late the sample after
    its end comes, busy GPU-hours never exceed allocated ones."""
    meter = Meter()
    holder = Holder("alice", "ml", "", "a100", since=T0 + since, until=T0 + since + length)
    t = T0
    meter.observe("h", object(), [Reading("GPU-a", 100, 10)], t, {})
    for gap in samples:
        t += gap
        meter.observe("h", object(), [Reading("GPU-a", 100, 10)], t, {"GPU-a": holder})
    charged = sum(busy for busy, _ in meter.pending.usage.values())
    assert charged <= length + 1e-6
    overlap = min(t, T0 + since + length) - (T0 + since)
    assert charged == pytest.approx(max(0.0, overlap), abs=1e-6)


# -- once stored -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlStore]:
    path: Path = tmp_path_factory.mktemp("acct") / "state" / "gputui.db"
    mounts = path.parent.parent / "mountinfo"
    mounts.write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
    store = SqlStore(open_store(path, mountinfo=mounts))
    yield store
    store.close()


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(step, min_size=1, max_size=20))
def test_stored_totals_stay_sane_whatever_the_samples(
    shared_store: SqlStore,
    steps: list[
        tuple[float, list[tuple[str, float | None, float | None]], dict[str, Holder], float | None]
    ],
) -> None:
    """What the meter hands over adds to the stored rows exactly, and every stored
    figure stays finite and non-negative."""
    with shared_store.snapshot() as tx:
        before = tx.usage.hours(0, 1e10)
        before_cluster = tx.usage.cluster_hours(0, 1e10)
    meter = Meter()
    t = T0
    for dt, readings, held, stale in steps:
        t += dt
        meter.observe("h", object(), [Reading(*r) for r in readings], t, held, max_gap_s=stale)
    taken = meter.take()
    with shared_store.transaction() as tx:
        tx.usage.add_metered(taken.usage_rows(), taken.cluster_rows())
    with shared_store.snapshot() as tx:
        after = tx.usage.hours(0, 1e10)
        after_cluster = tx.usage.cluster_hours(0, 1e10)
    for row in after:
        assert all(_sane(v) for v in row[5:])
    for row in after_cluster:
        assert all(_sane(v) for v in row[1:])
    added = sum(r[6] for r in after) - sum(r[6] for r in before)
    assert added == pytest.approx(sum(v[0] for v in taken.usage.values()), abs=1e-6)
    added = sum(r[1] for r in after_cluster) - sum(r[1] for r in before_cluster)
    assert added == pytest.approx(sum(v[0] for v in taken.cluster.values()), abs=1e-6)


# -- the CLI's dates -----------------------------------------------------------------------


@given(day=st.dates(min_value=date(1971, 1, 2), max_value=date(2200, 12, 30)))
def test_until_a_date_means_to_the_end_of_that_local_day(day: date) -> None:
    text = day.isoformat()
    start = cli_dates.when(text, "--since", 0.0, end_of_day=False)
    end = cli_dates.when(text, "--until", 0.0, end_of_day=True)
    assert start is not None and end is not None
    assert time.strftime("%Y-%m-%d %H:%M", time.localtime(start)) == f"{text} 00:00"
    after = time.localtime(end)
    assert (after.tm_hour, after.tm_min) == (0, 0)
    assert date(after.tm_year, after.tm_mon, after.tm_mday) == day + timedelta(days=1)


@given(n=st.integers(0, 99_999), unit=st.sampled_from("hdw"))
def test_a_relative_date_is_that_long_before_now(n: int, unit: str) -> None:
    now = 2e9
    got = cli_dates.when(f"{n}{unit}", "--since", now, end_of_day=False)
    assert got == now - n * {"h": 3600, "d": 86400, "w": 604800}[unit]


@given(text=st.text(max_size=60))
def test_any_date_text_is_a_time_in_range_or_one_line_naming_the_option(text: str) -> None:
    try:
        got = cli_dates.when(text, "--since", 2e9, end_of_day=False)
    except HeadError as exc:
        assert exc.code == "usage"
        assert exc.message.startswith("--since: ")
        assert exc.message.isprintable() and len(exc.message) < 200
    else:
        assert got is not None and math.isfinite(got) and got <= 2e9


# -- per job (``gputui history``) -------------------------------------------------------------

run = st.tuples(
    st.integers(1, 4),  # the job
    st.sampled_from(["GPU-a", "GPU-b", "GPU-c"]),
    st.floats(0, 3 * HOUR),  # start, after T0
    st.floats(0, 2 * HOUR),  # length
)


@settings(max_examples=150, deadline=None)
@given(
    runs=st.lists(run, min_size=1, max_size=8),
    gaps=st.lists(st.floats(0.5, 60), min_size=1, max_size=60),
    loads=st.lists(st.tuples(st.floats(0, 100), st.floats(0, 800)), min_size=1, max_size=6),
    claim=st.booleans(),
)
def test_per_job_figures_add_up_to_the_usage_totals(
    runs: list[tuple[int, str, float, float]],
    gaps: list[float],
    loads: list[tuple[float, float]],
    claim: bool,
) -> None:
    """Whatever the runs (several per job, over hour boundaries) and the samples, each
    job's allocated seconds (``charges`` then ``charged_seconds``, as the store adds
    them) and its busy seconds and joules (``Metered.jobs``) add up to what the usage
    rows get for the same hours; a claim's share goes to no job."""
    usage_alloc = 0.0
    job_alloc: dict[int, float] = {}
    for job, uuid, start, length in runs:
        row = (uuid, T0 + start, f"u{job % 2}", "ml", f"p{job}", "a100")
        charged, hours = accounting.charges([row], T0 + start + length)
        job_alloc[job] = job_alloc.get(job, 0.0) + accounting.charged_seconds(charged)
        usage_alloc += sum(charged.values())
        assert sum(charged.values()) == pytest.approx(sum(s for _, s in hours))
    assert math.fsum(job_alloc.values()) == pytest.approx(usage_alloc, rel=1e-9, abs=1e-6)

    meter = Meter()
    t = T0
    claimed = Holder("carol", "ml", "", "a100", since=T0) if claim else None
    for i, gap in enumerate(gaps):
        t += gap * 60
        holders = {
            uuid: Holder(f"u{job % 2}", "ml", f"p{job}", "a100", T0 + s, T0 + s + n, job=job)
            for job, uuid, s, n in runs
            if T0 + s <= t
        }
        if claimed is not None:
            holders["GPU-d"] = claimed
        util, watts = loads[i % len(loads)]
        readings = [Reading(u, util, watts) for u in ("GPU-a", "GPU-b", "GPU-c", "GPU-d")]
        meter.observe("h", object(), readings, t, holders, max_gap_s=MAX_GAP_S)
    jobs_busy = math.fsum(b for b, _ in meter.pending.jobs.values())
    jobs_energy = math.fsum(e for _, e in meter.pending.jobs.values())
    of_jobs = [v for k, v in meter.pending.usage.items() if k[1] != "carol"]
    assert jobs_busy == pytest.approx(math.fsum(v[0] for v in of_jobs), rel=1e-9, abs=1e-6)
    assert jobs_energy == pytest.approx(math.fsum(v[1] for v in of_jobs), rel=1e-9, abs=1e-3)
    assert set(meter.pending.jobs) <= {job for job, *_ in runs}
    assert all(busy >= 0 and energy >= 0 for busy, energy in meter.pending.jobs.values())
