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

Pure apart from the times the daemon passes in; the attribution is only as fresh as
the holder map the daemon keeps (refreshed after each commit that changes the
allocations), so a sample that lands in the milliseconds between a commit and that
refresh is counted to the GPU's previous holder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gputui.scheduler.policy.accounting import UsageKey, split_hours

MAX_GAP_S = 30.0
"""The most one sample of a GPU counts for, whatever the gap before it."""
MAX_POWER_W = 5000.0


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


@dataclass(slots=True)
class Metered:
    """Counted and not yet stored: usage by key -> [busy_s, energy_j]; the cluster by
    hour -> [present_s, busy_s, energy_j]; per job id -> [busy_s, energy_j] (the same
    seconds and joules as the job's usage keys)."""

    usage: dict[UsageKey, list[float]] = field(default_factory=dict)
    cluster: dict[int, list[float]] = field(default_factory=dict)
    jobs: dict[int, list[float]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.usage or self.cluster or self.jobs)

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


def clamp_util(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return min(100.0, max(0.0, float(value)))


def clamp_power(value: float | None) -> float:
    if value is None or not math.isfinite(value):
        return 0.0
    return min(MAX_POWER_W, max(0.0, float(value)))


class Meter:
    """Per-GPU time between samples, turned into busy seconds and joules."""

    def __init__(self, max_gap_s: float = MAX_GAP_S) -> None:
        self.max_gap_s = max_gap_s
        self.pending = Metered()
        self._last: dict[str, float] = {}
        """GPU uuid -> when its previous sample was counted."""
        self._seen: dict[str, object] = {}
        """Host -> the last sample object counted (a snapshot re-sent for another
        reason carries the same sample: it is not counted twice)."""

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
        if self._seen.get(host) is sample:
            return
        self._seen[host] = sample
        cap = self.max_gap_s if max_gap_s is None else min(self.max_gap_s, max_gap_s)
        for reading in readings:
            previous = self._last.get(reading.uuid)
            self._last[reading.uuid] = at
            if previous is None:
                continue
            dt = min(at - previous, cap)
            if not dt > 0:  # also NaN: a clock that went back counts nothing
                continue
            self.count(at - dt, at, reading.util, reading.power_w, holders.get(reading.uuid))

    def forget(self, uuid: str) -> None:
        """A GPU that is gone: its next sample, if it comes back, starts afresh."""
        self._last.pop(uuid, None)

    def count(
        self,
        start: float,
        end: float,
        util: float | None,
        power_w: float | None,
        holder: Holder | None,
    ) -> None:
        """``[start, end)`` of one GPU at ``util`` % and ``power_w`` W, held by ``holder``
        (charged only from ``holder.since``)."""
        if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
            return
        load = clamp_util(util)
        busy = load is not None and load > 0
        watts = clamp_power(power_w)
        for hour, seconds in split_hours(start, end):
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
        for hour, seconds in split_hours(max(start, holder.since), until):
            cell = self.pending.usage.setdefault((hour, *key_tail), [0.0, 0.0])
            if busy:
                cell[0] += seconds
            cell[1] += watts * seconds
            held += seconds
        if holder.job is not None and held > 0:
            cell = self.pending.jobs.setdefault(holder.job, [0.0, 0.0])
            if busy:
                cell[0] += held
            cell[1] += watts * held

    def take(self) -> Metered:
        """What was counted since the last ``take``, handed over (and forgotten here)."""
        out, self.pending = self.pending, Metered()
        return out
