"""``Meter``: busy GPU-seconds and energy from the samples the head already receives.

Per GPU, the time since that GPU's previous sample (``dt``) is counted once: to the
cluster (present; busy when its utilisation is above zero; its power times ``dt`` as
energy), and to whoever holds the GPU then (a job or a claim), from the later of the
previous sample and the allocation's start; a job's own share is also added to that
job (``Metered.jobs``: its busy seconds and joules, whatever the hour). A gap longer
than the host's stale limit (at most ``MAX_GAP_S``) counts only that much: the head
was not watching. Sample
values are untrusted: utilisation is clamped to 0..100, power to 0..5000 W, and NaN
or infinity count as nothing. What is counted waits here, by UTC hour, until the
daemon takes it (``take``) and writes it to the store in one batch.

Held but idle (``power.mode`` report or lock; ``idle_after_s`` set): a GPU is *idle*
in a sample when its utilisation reads 0 and its memory activity reads 0 (or is not
known); it is *held but idle* once it has been idle in every sample for
``idle_after_s`` under the same holder (a job or a claim, the same allocation). Its
time and joules from that moment on (not before: the first ``idle_after_s`` are
grace) are also counted apart, by usage key (``Metered.idle``). The stretch starts at
the previous sample of the first idle one (the reading covers the time since then),
never before the allocation's start, and ends at the first sample that is not idle,
at a change of holder, or when the GPU has no holder.

MIG slices: NVML gives no power for a MIG device, only for its GPU. A slice's holder
is charged the GPU's power in proportion to the slice's share of the GPU: its
compute slices over the GPU's (``slice_share``: a ``1g.10gb`` slice of an A100 or
H100, which have 7, gets 1/7 of the card's watts; a ``3g.40gb`` 3/7; an A30 has 4).
A slice's reading (``Reading.part``) counts only to its holder: the cluster's
energy is the GPU's own reading, counted once. Busy time follows the slice's own
utilisation, where NVML gives it (mostly it does not: none is counted then).

Pure apart from the times the daemon passes in; the attribution is only as fresh as
the holder map the daemon keeps (refreshed after each commit that changes the
allocations), so a sample that lands in the milliseconds between a commit and that
refresh is counted to the GPU's previous holder.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from gputui.scheduler.policy.accounting import UsageKey, split_hours

MAX_GAP_S = 30.0
"""The most one sample of a GPU counts for, whatever the gap before it."""
MAX_POWER_W = 5000.0
GPU_COMPUTE_SLICES = 7
"""Compute slices of a MIG-capable GPU (A100, H100, H200, B200); ``SMALL_MIG_GPUS``
have 4."""
SMALL_MIG_GPUS = ("A30",)
_SLICES = re.compile(r"(?:([1-8])c\.)?([1-8])g\.")


def compute_slices(profile: str) -> int | None:
    """A MIG profile's compute slices: ``1g.10gb`` 1, ``3g.40gb`` 3, ``1c.3g.40gb`` 1
    (a compute instance of one slice in a 3-slice GPU instance); None: no profile."""
    found = _SLICES.match(profile.strip().lower())
    if found is None:
        return None
    return int(found.group(1) or found.group(2))


def gpu_compute_slices(model: str) -> int:
    """How many compute slices the GPU named ``model`` has (7; an A30 4)."""
    upper = model.upper()
    return 4 if any(name in upper for name in SMALL_MIG_GPUS) else GPU_COMPUTE_SLICES


def slice_share(profile: str | None, model: str) -> float:
    """The share of its GPU's power a slice of ``profile`` is charged (0 to 1; 0 for
    a slice with no profile NVML could name)."""
    own = compute_slices(profile) if profile is not None else None
    if own is None:
        return 0.0
    return min(1.0, own / gpu_compute_slices(model))


def slice_readings(
    power_w: float | None,
    model: str,
    slices: Iterable[tuple[str, str | None, float | None]],
) -> list[Reading]:
    """The readings of a MIG-enabled GPU's slices, ``(uuid, profile, utilisation)``
    each, from the GPU's ``power_w``: each its share (``slice_share``), charged to its
    holder only (``Reading.part``)."""
    watts = None if power_w is None else clamp_power(power_w)
    return [
        Reading(
            uuid, util, None if watts is None else watts * slice_share(profile, model), part=True
        )
        for uuid, profile, util in slices
    ]


@dataclass(frozen=True, slots=True)
class Holder:
    """Who a GPU's live allocation is charged to, and since when."""

    user: str
    group: str
    project: str
    pool: str
    since: float
    until: float | None = None
    """When the allocation ended (None: it is held still); nothing is charged past it."""
    job: int | None = None
    """The job it is allocated to (None: a claim)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One GPU in one sample: its uuid, utilisation (%) and power (W), either unknown."""

    uuid: str
    util: float | None
    power_w: float | None
    mem_util: float | None = None
    """Memory (bus) activity, % (None: not read)."""
    part: bool = False
    """A MIG slice: part of a GPU whose own reading the cluster counts; this one is
    charged to the slice's holder only."""

    @property
    def idle(self) -> bool:
        """Utilisation 0, and memory activity 0 or not known."""
        load, mem = clamp_util(self.util), clamp_util(self.mem_util)
        return load == 0 and (mem is None or mem == 0)


@dataclass(slots=True)
class Metered:
    """Counted and not yet stored: usage by key -> [busy_s, energy_j]; the cluster by
    hour -> [present_s, busy_s, energy_j]; per job id -> [busy_s, energy_j] (the same
    seconds and joules as the job's usage keys); held but idle by usage key ->
    [idle_s, energy_j] (a part of the same key's time and joules)."""

    usage: dict[UsageKey, list[float]] = field(default_factory=dict)
    cluster: dict[int, list[float]] = field(default_factory=dict)
    jobs: dict[int, list[float]] = field(default_factory=dict)
    idle: dict[UsageKey, list[float]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.usage or self.cluster or self.jobs or self.idle)

    def merge(self, other: Metered) -> None:
        for key, (busy, energy) in other.usage.items():
            cell = self.usage.setdefault(key, [0.0, 0.0])
            cell[0] += busy
            cell[1] += energy
        for hour, values in other.cluster.items():
            into = self.cluster.setdefault(hour, [0.0, 0.0, 0.0])
            for i, v in enumerate(values):
                into[i] += v
        for job, (busy, energy) in other.jobs.items():
            cell = self.jobs.setdefault(job, [0.0, 0.0])
            cell[0] += busy
            cell[1] += energy
        for key, (seconds, energy) in other.idle.items():
            cell = self.idle.setdefault(key, [0.0, 0.0])
            cell[0] += seconds
            cell[1] += energy

    def copy(self) -> Metered:
        out = Metered()
        out.merge(self)
        return out

    def usage_rows(self) -> list[tuple[UsageKey, float, float]]:
        return [(key, busy, energy) for key, (busy, energy) in self.usage.items()]

    def cluster_rows(self) -> list[tuple[int, float, float, float]]:
        return [(hour, p, b, e) for hour, (p, b, e) in self.cluster.items()]

    def job_rows(self) -> list[tuple[int, float, float]]:
        return [(job, busy, energy) for job, (busy, energy) in self.jobs.items()]

    def idle_rows(self) -> list[tuple[UsageKey, float, float]]:
        return [(key, seconds, energy) for key, (seconds, energy) in self.idle.items()]


def clamp_util(value: float | None) -> float | None:
    if value is not None and 0 <= value <= 100:  # (most readings: taken as they are)
        return float(value)
    if value is None or not math.isfinite(value):
        return None
    return min(100.0, max(0.0, float(value)))


def clamp_power(value: float | None) -> float:
    if value is not None and 0 <= value <= MAX_POWER_W:  # (most readings: as they are)
        return float(value)
    if value is None or not math.isfinite(value):
        return 0.0
    return min(MAX_POWER_W, max(0.0, float(value)))


class GpuSpans:
    """The time each GPU's reading covers: since that GPU's previous sample, at most
    ``max_gap_s`` (less where the host's own stale limit is less); a host's sample
    re-sent (the same object) covers nothing. What ``Meter`` and ``SlurmMeter``
    count their time by."""

    def __init__(self, max_gap_s: float = MAX_GAP_S) -> None:
        self.max_gap_s = max_gap_s
        self._last: dict[str, float] = {}
        """GPU uuid -> when its previous sample was counted."""
        self._seen: dict[str, object] = {}
        """Host -> the last sample object counted (a snapshot re-sent for another
        reason carries the same sample: it is not counted twice)."""

    def spans(
        self,
        host: str,
        sample: object,
        readings: Iterable[Reading],
        at: float,
        max_gap_s: float | None,
    ) -> Iterator[tuple[Reading, float]]:
        """Each of ``readings`` (``host``'s ``sample``, arrived at ``at``) with the
        seconds it covers up to ``at``: 0 for a GPU's first sample, and where the
        clock went back (or reads NaN); nothing at all for the host's previous
        sample again. Each GPU's time is taken as it is yielded: iterate it whole."""
        if self._seen.get(host) is sample:
            return
        self._seen[host] = sample
        cap = self.max_gap_s if max_gap_s is None else min(self.max_gap_s, max_gap_s)
        last = self._last
        for reading in readings:
            previous = last.get(reading.uuid)
            last[reading.uuid] = at
            dt = 0.0 if previous is None else min(at - previous, cap)
            yield reading, (dt if dt > 0 else 0.0)  # ``not > 0``: NaN too

    def forget(self, uuid: str) -> None:
        """A GPU that is gone: its next sample, if it comes back, starts afresh."""
        self._last.pop(uuid, None)


class Meter(GpuSpans):
    """Per-GPU time between samples, turned into busy seconds and joules."""

    def __init__(self, max_gap_s: float = MAX_GAP_S, idle_after_s: float | None = None) -> None:
        super().__init__(max_gap_s)
        self.idle_after_s = idle_after_s
        """Held but idle after this long (None: not counted apart)."""
        self._idle: dict[str, tuple[float, float]] = {}
        """GPU uuid -> (its holder's since, when its idle stretch began)."""
        self.pending = Metered()

    def observe(
        self,
        host: str,
        sample: object,
        readings: Iterable[Reading],
        at: float,
        holders: Mapping[str, Holder],
        *,
        max_gap_s: float | None = None,
    ) -> None:
        """Count one host's sample that arrived at ``at``; ``sample`` is only compared
        by identity with the host's previous one."""
        spans: tuple[float, list[tuple[int, float]]] | None = None  # (start, its hours)
        for reading, dt in self.spans(host, sample, readings, at, max_gap_s):
            holder = holders.get(reading.uuid)
            start = at - dt
            idle_from = self._idle_step(reading, holder, start)
            if dt > 0:
                if spans is None or spans[0] != start:  # a host's GPUs: mostly one span
                    spans = (start, split_hours(start, at))
                self.count(
                    start,
                    at,
                    reading.util,
                    reading.power_w,
                    holder,
                    idle_from=idle_from,
                    cluster=not reading.part,
                    hours=spans[1],
                )

    def _idle_step(self, reading: Reading, holder: Holder | None, start: float) -> float | None:
        """Whether ``reading`` (covering ``start`` up to now) goes on an idle stretch:
        when the GPU is (or will be) held but idle from, or None."""
        after = self.idle_after_s
        if (
            after is None
            or holder is None
            or not reading.idle
            or not math.isfinite(holder.since)
            or not math.isfinite(start)
            or (holder.until is not None and holder.until <= start)
        ):
            self._idle.pop(reading.uuid, None)
            return None
        known = self._idle.get(reading.uuid)
        if known is None or known[0] != holder.since:
            known = (holder.since, max(start, holder.since))
            self._idle[reading.uuid] = known
        return known[1] + after

    def held_idle(self, uuid: str, at: float) -> bool:
        """Whether the GPU is held but idle at ``at`` (as of its last sample)."""
        known = self._idle.get(uuid)
        return (
            known is not None
            and self.idle_after_s is not None
            and at >= known[1] + self.idle_after_s
        )

    def idle_since(self, uuid: str) -> float | None:
        """When the GPU's idle stretch began (None: it is not idle and held)."""
        known = self._idle.get(uuid)
        return None if known is None else known[1]

    def forget(self, uuid: str) -> None:
        super().forget(uuid)
        self._idle.pop(uuid, None)

    def count(
        self,
        start: float,
        end: float,
        util: float | None,
        power_w: float | None,
        holder: Holder | None,
        *,
        idle_from: float | None = None,
        cluster: bool = True,
        hours: list[tuple[int, float]] | None = None,
    ) -> None:
        """``[start, end)`` of one GPU at ``util`` % and ``power_w`` W, held by ``holder``
        (charged only from ``holder.since``); held but idle from ``idle_from`` on;
        counted to the cluster too unless ``cluster`` is False (a MIG slice).
        ``hours``: ``split_hours(start, end)``, where the caller has it already."""
        if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
            return
        load = clamp_util(util)
        busy = load is not None and load > 0
        watts = clamp_power(power_w)
        if hours is None:
            hours = split_hours(start, end)
        for hour, seconds in hours if cluster else ():
            cell = self.pending.cluster.setdefault(hour, [0.0, 0.0, 0.0])
            cell[0] += seconds
            if busy:
                cell[1] += seconds
            cell[2] += watts * seconds
        if holder is None or not math.isfinite(holder.since):
            return
        key_tail = (holder.user, holder.group, holder.project, holder.pool)
        until = end if holder.until is None else min(end, holder.until)
        held = 0.0
        held_hours = (
            hours
            if holder.since <= start and until == end
            else split_hours(max(start, holder.since), until)
        )
        for hour, seconds in held_hours:
            cell = self.pending.usage.setdefault((hour, *key_tail), [0.0, 0.0])
            if busy:
                cell[0] += seconds
            cell[1] += watts * seconds
            held += seconds
        if idle_from is not None and math.isfinite(idle_from):
            for hour, seconds in split_hours(max(start, holder.since, idle_from), until):
                cell = self.pending.idle.setdefault((hour, *key_tail), [0.0, 0.0])
                cell[0] += seconds
                cell[1] += watts * seconds
        if holder.job is not None and held > 0:
            cell = self.pending.jobs.setdefault(holder.job, [0.0, 0.0])
            if busy:
                cell[0] += held
            cell[1] += watts * held

    def take(self) -> Metered:
        """What was counted since the last ``take``, handed over (and forgotten here)."""
        out, self.pending = self.pending, Metered()
        return out
