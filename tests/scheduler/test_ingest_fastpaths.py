"""What the head counts on every sample of every host, against plain models of it.

The per-sample paths take shortcuts (a reading in range is taken as it is, a host's
GPUs share one split of their span into hours, a host's sample sent again is
counted once, the NVLink counters are summed a column at a time): each must count
exactly what the plain rule counts, for any readings a helper could send.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gputui.scheduler.head.metrics_state import LINK_COUNTERS, MetricsFeed, link_totals
from gputui.scheduler.policy.accounting import split_hours
from gputui.scheduler.policy.meter import MAX_GAP_S, MAX_POWER_W, Holder, Meter, Metered, Reading
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.health import NvLinkSample
from gputui.wire.messages import GpuSample, Sample

HOUR = 3600.0
COUNTER = st.none() | st.integers(0, 2**40)
ODD_FLOATS = st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -0.0, 0.0, 1e300])
UTIL = st.none() | st.integers(-5, 105) | st.floats(-10, 110) | ODD_FLOATS
POWER = st.none() | st.floats(-10, MAX_POWER_W * 1.5) | st.integers(-5, 20_000) | ODD_FLOATS


def _clamp(value: float | None, top: float) -> float | None:
    """The plain rule: a reading that is not a finite number is none; the rest, in range."""
    if value is None or not math.isfinite(value):
        return None
    return min(top, max(0.0, float(value)))


# -- NVLink counters --------------------------------------------------------------------


@given(links=st.none() | st.lists(st.tuples(COUNTER, COUNTER, COUNTER, COUNTER), max_size=18))
def test_link_totals_sum_each_counter_over_the_links_that_have_it(
    links: list[tuple[int | None, ...]] | None,
) -> None:
    nvlinks = (
        None
        if links is None
        else tuple(
            NvLinkSample(link=i, **dict(zip(LINK_COUNTERS, counts, strict=True)))
            for i, counts in enumerate(links)
        )
    )
    gpu = GpuSample(index=0, uuid="GPU-0", health_read=True, nvlinks=nvlinks)
    want = []
    for k in range(len(LINK_COUNTERS)):
        having = [counts[k] for counts in links or () if counts[k] is not None]
        want.append(sum(having) if having else None)
    assert link_totals(gpu) == tuple(want)


# -- energy for /metrics ------------------------------------------------------------------

GPUS = {"a": ("GPU-a0", "GPU-two"), "b": ("GPU-two",)}
"""(A uuid two hosts name, as a bad config or a moved card makes: its time is its own,
whichever host sent it; a host's sample sent again counts nothing, as in the meter.)"""

step = st.tuples(
    st.sampled_from(sorted(GPUS)),
    st.booleans(),  # the host's last sample sent again (the same object)
    st.floats(-5, 400, allow_nan=False),  # seconds on the head's clock since the last step
    st.lists(st.tuples(POWER, st.sampled_from(["ok", "ok", "lost"])), min_size=2, max_size=2),
    st.none() | st.floats(0.5, 1000, allow_nan=False),  # the host's stale limit
)


class _Clock:
    now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(step, max_size=30))
@example(  # the host's sample sent again: counted once
    steps=[("a", False, 1.0, [(100.0, "ok")] * 2, None)] * 2
    + [("a", True, 1.0, [(1.0, "ok")] * 2, None)]
)
def test_metrics_energy_is_each_gpus_power_over_the_time_since_its_last_sample(
    steps: list[tuple[Any, ...]],
) -> None:
    clock = _Clock()
    feed = MetricsFeed(None, None, None, clock)  # type: ignore[arg-type]
    last: dict[str, Sample] = {}
    counted_at: dict[str, float] = {}
    want: dict[str, float] = {}
    for host, again, dt, readings, limit in steps:
        clock.now += dt
        sample = last.get(host) if again else None
        if sample is None:
            gpus = tuple(
                GpuSample(index=i, uuid=uuid, power_w=_finite(power), state=state)
                for i, (uuid, (power, state)) in enumerate(zip(GPUS[host], readings, strict=False))
            )
            sample = Sample(seq=1, gpus=gpus)
            # The plain rule: each GPU's power over the time since its last sample was
            # counted (at most the cap), none for a lost one or a first sample.
            cap = MAX_GAP_S if limit is None else min(MAX_GAP_S, limit)
            for gpu in gpus:
                before = counted_at.get(gpu.uuid)
                counted_at[gpu.uuid] = clock.now
                if before is None or gpu.state == "lost":
                    continue
                span = min(clock.now - before, cap)
                if span > 0:
                    watts = _clamp(gpu.power_w, MAX_POWER_W) or 0.0
                    want[gpu.uuid] = want.get(gpu.uuid, 0.0) + watts * span * 1000
        last[host] = sample
        feed.observe(
            HostSnapshot(
                name=host, address=host, status=HostStatus.LIVE, sample=sample,
                stale_after_s=limit,
            )
        )  # fmt: skip
    assert feed.view({}, {}, frozenset(), {}).energy_mj == want


def _finite(power: float | None) -> float | None:
    """What a decoded sample can carry (the wire takes no NaN, no infinity, no negative)."""
    if power is None or not math.isfinite(power) or not 0 <= power <= 10_000:
        return None
    return float(power)


# -- the meter ------------------------------------------------------------------------------

holder = st.none() | st.builds(
    lambda since, until, job: Holder("alice", "lab", "p", "default", since, until, job),
    st.floats(-2 * HOUR, 2 * HOUR, allow_nan=False) | st.just(-math.inf),
    st.none() | st.floats(-HOUR, 2 * HOUR, allow_nan=False),
    st.none() | st.integers(1, 9),
)


def _plain(
    out: Metered,
    start: float,
    end: float,
    util: float | None,
    power: float | None,
    holder: Holder | None,
    idle_from: float | None = None,
    cluster: bool = True,
) -> None:
    """The plain rule for one GPU's ``[start, end)``, into ``out``: clamped first, each
    part's span split into hours on its own (what ``Meter.count`` is held to)."""
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        return
    load = _clamp(util, 100.0)
    busy = load is not None and load > 0
    watts = _clamp(power, MAX_POWER_W) or 0.0
    for hour, seconds in split_hours(start, end) if cluster else ():
        cell = out.cluster.setdefault(hour, [0.0, 0.0, 0.0])
        cell[0] += seconds
        cell[1] += seconds if busy else 0.0
        cell[2] += watts * seconds
    if holder is None or not math.isfinite(holder.since):
        return
    tail = (holder.user, holder.group, holder.project, holder.pool)
    until = end if holder.until is None else min(end, holder.until)
    held = 0.0
    for hour, seconds in split_hours(max(start, holder.since), until):
        cell = out.usage.setdefault((hour, *tail), [0.0, 0.0])
        cell[0] += seconds if busy else 0.0
        cell[1] += watts * seconds
        held += seconds
    if idle_from is not None and math.isfinite(idle_from):
        for hour, seconds in split_hours(max(start, holder.since, idle_from), until):
            cell = out.idle.setdefault((hour, *tail), [0.0, 0.0])
            cell[0] += seconds
            cell[1] += watts * seconds
    if holder.job is not None and held > 0:
        cell = out.jobs.setdefault(holder.job, [0.0, 0.0])
        cell[0] += held if busy else 0.0
        cell[1] += watts * held


def _from(base: float, held: Holder) -> Holder:
    """``held``, its times counted from ``base`` (an hour's start)."""
    until = None if held.until is None else base + held.until
    return Holder(
        held.user, held.group, held.project, held.pool, base + held.since, until, held.job
    )


@settings(max_examples=300, deadline=None)
@given(
    start=st.floats(-0.5 * HOUR, 1.5 * HOUR, allow_nan=False),
    length=st.floats(0, 2.5 * HOUR, allow_nan=False),
    util=UTIL,
    power=POWER,
    held=holder,
    idle=st.none() | st.floats(-HOUR, 2 * HOUR, allow_nan=False),
    part=st.booleans(),
)
@example(start=0.0, length=10.0, util=101, power=1.0, held=None, idle=None, part=False)
@example(start=0.0, length=10.0, util=50, power=MAX_POWER_W + 1, held=None, idle=None, part=False)
def test_counting_a_reading_is_counting_it_clamped_and_with_its_hours_given(
    start: float,
    length: float,
    util: float | None,
    power: float | None,
    held: Holder | None,
    idle: float | None,
    part: bool,
) -> None:
    """``count`` takes a reading in range as it is, and the span's hours where given
    (for its holder too where the holder held all of it): what the plain rule counts."""
    base = 1_800_000_000.0 // HOUR * HOUR
    end = base + start + length
    holder_at = None if held is None else _from(base, held)
    idle_from = None if idle is None else base + idle
    fast, plain = Meter(), Metered()
    fast.count(base + start, end, util, power, holder_at, idle_from=idle_from, cluster=not part,
               hours=split_hours(base + start, end))  # fmt: skip
    _plain(plain, base + start, end, util, power, holder_at, idle_from, cluster=not part)
    assert fast.pending == plain


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(
        st.tuples(st.floats(0, 3 * HOUR, allow_nan=False), st.lists(st.booleans(), min_size=4)),
        min_size=1,
        max_size=6,
    ),
    readings=st.lists(st.tuples(UTIL, POWER, holder), min_size=1, max_size=4),
    offset=st.floats(0, HOUR, allow_nan=False),
)
def test_a_hosts_gpus_sharing_a_span_count_as_each_counted_alone(
    gaps: list[tuple[float, list[bool]]], readings: list[tuple[Any, ...]], offset: float
) -> None:
    """``observe`` splits a host's span into hours once for the GPUs that share it
    (those absent from a sample start their span later): what it counts is what the
    plain rule counts for each GPU's reading on its own."""
    base = 1_800_000_000.0 // HOUR * HOUR + offset
    uuids = [f"GPU-{i}" for i in range(len(readings))]
    holders = {
        uuid: _from(base, h)
        for uuid, (_, _, h) in zip(uuids, readings, strict=True)
        if h is not None
    }
    meter, alone = Meter(), Metered()
    at = base
    previous: dict[str, float] = {}
    for gap, present in gaps:
        at += gap
        seen = [
            Reading(u, util, power)
            for u, (util, power, _), there in zip(uuids, readings, present, strict=False)
            if there
        ]
        meter.observe("h", object(), seen, at, holders)
        for reading in seen:
            before = previous.get(reading.uuid)
            previous[reading.uuid] = at
            span = 0.0 if before is None else min(at - before, MAX_GAP_S)
            if span > 0:
                _plain(
                    alone, at - span, at, reading.util, reading.power_w, holders.get(reading.uuid)
                )
    assert meter.pending == alone
