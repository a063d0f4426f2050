"""Accounting arithmetic: GPU-seconds by hour, the head's local days, cost, the sums
the ``usage`` and ``report`` requests answer with. Pure: no I/O, no SQL, no clock.

Everything is stored by UTC hour (``Usage``, ``ClusterHour``: the epoch seconds of the
hour's start). A day is the head's local day. In a time zone whose offset is not a
whole number of hours (India, Nepal, parts of Australia) a local day starts mid-hour;
an hour then belongs, whole, to the local day its start falls in. A range asked for
(``since`` to ``until``) holds the hours that *start* inside it, for the same reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HOUR = 3600
MAX_SPAN_S = 400 * 86400.0
"""An allocation is counted over at most this long back from its end: a clock that
jumped (or a start time that is nonsense) cannot make one free write a million rows."""
KEYS = ("user", "group", "project", "pool")
_DIGITS = 6

UsageKey = tuple[int, str, str, str, str]
"""(hour, user, group, project, pool): a ``Usage`` row's primary key."""
UsageRow = tuple[int, str, str, str, str, float, float, float]
"""A ``Usage`` row: its key, then allocated and busy GPU-seconds and energy (J)."""
IdleRow = tuple[int, str, str, str, str, float, float]
"""An ``IdleHeld`` row: a usage key, then held-but-idle GPU-seconds and energy (J)."""
ClusterRow = tuple[int, float, float, float, float]
"""A ``ClusterHour`` row: hour, GPU-seconds present, allocated, busy, energy (J)."""
OpenAllocation = tuple[str, float, str, str, str, str]
"""A live allocation: GPU uuid, start, then its holder's user, group, project, pool."""
OpenHolder = tuple[str, float, str, str, str, str, int | None]
"""An ``OpenAllocation`` and the job it is allocated to (None: a claim)."""


def hour_of(t: float) -> int:
    """The start of the UTC hour ``t`` falls in."""
    return int(t // HOUR) * HOUR


def split_hours(start: float, end: float) -> list[tuple[int, float]]:
    """``[start, end)`` cut at UTC hour boundaries: (hour, seconds in it), in order.

    Nothing for an empty, reversed or non-finite span; a span over ``MAX_SPAN_S`` is
    counted over its last ``MAX_SPAN_S`` only. The seconds add up to ``end - start``.
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        return []
    hour = int(start // HOUR) * HOUR
    if end <= hour + HOUR:  # the common case: a sample's second within one hour
        return [(hour, end - start)]
    return _split_hours(start, end)


def _split_hours(start: float, end: float) -> list[tuple[int, float]]:
    """``split_hours`` of a finite span that crosses an hour boundary."""
    start = max(start, end - MAX_SPAN_S)
    out: list[tuple[int, float]] = []
    hour = hour_of(start)
    t = start
    while t < end:
        stop = min(end, float(hour + HOUR))
        if stop > t:
            out.append((hour, stop - t))
        t, hour = stop, hour + HOUR
    return out


def local_day(hour: int) -> str:
    """The head's local day (``YYYY-MM-DD``) the hour starting at ``hour`` falls in."""
    return time.strftime("%Y-%m-%d", time.localtime(hour))


def local_clock(hour: int) -> str:
    """The local time of day (``HH:MM``) the hour starting at ``hour`` begins at."""
    return time.strftime("%H:%M", time.localtime(hour))


@dataclass(frozen=True, slots=True)
class Prices:
    """``scheduler.accounting``: a price per kWh and, per pool, per allocated GPU-hour."""

    price_per_kwh: float = 0.0
    gpu_hour_rate: Mapping[str, float] | None = None
    currency: str = "EUR"

    def cost(self, pool: str, alloc_gpu_s: float, energy_j: float) -> float:
        """energy_kwh * price_per_kwh + alloc_gpu_h * gpu_hour_rate.get(pool, 0)."""
        rate = (self.gpu_hour_rate or {}).get(pool, 0.0)
        return energy_j / 3.6e6 * self.price_per_kwh + alloc_gpu_s / HOUR * rate


# -- gathering: what is stored, plus what is still running ------------------------------


def _within(start: float, end: float, since: float, until: float) -> list[tuple[int, float]]:
    """``split_hours(start, end)``, only as far as the hours starting in [since, until)
    need (their seconds in full, also past ``until``)."""
    return split_hours(max(start, hour_of(since)), min(end, hour_of(until) + HOUR))


def gather(
    stored: Iterable[UsageRow],
    open_allocations: Iterable[OpenAllocation],
    metered: Iterable[tuple[UsageKey, float, float]],
    *,
    since: float,
    until: float,
    now: float,
) -> dict[UsageKey, list[float]]:
    """Usage by key (hour, user, group, project, pool) -> [alloc_s, busy_s, energy_j]
    for the hours starting in ``[since, until)``: the stored rows, the allocations still
    open (their time up to ``now``, which no row holds yet) and what the meter has
    counted since its last flush (``metered``: key, busy_s, energy_j)."""
    out: dict[UsageKey, list[float]] = {}

    def add(key: UsageKey, alloc: float, busy: float, energy: float) -> None:
        if since <= key[0] < until:
            cell = out.setdefault(key, [0.0, 0.0, 0.0])
            cell[0] += alloc
            cell[1] += busy
            cell[2] += energy

    for hour, user, group, project, pool, alloc, busy, energy in stored:
        add((hour, user, group, project, pool), alloc, busy, energy)
    for _uuid, start, user, group, project, pool in open_allocations:
        for hour, seconds in _within(start, now, since, until):
            add((hour, user, group, project, pool), seconds, 0.0, 0.0)
    for key, busy, energy in metered:
        add(key, 0.0, busy, energy)
    return out


def gather_cluster(
    stored: Iterable[ClusterRow],
    open_allocations: Iterable[OpenAllocation],
    metered: Iterable[tuple[int, float, float, float]],
    *,
    since: float,
    until: float,
    now: float,
) -> dict[int, list[float]]:
    """The cluster by hour -> [present_s, alloc_s, busy_s, energy_j], as ``gather``
    (``metered``: hour, present_s, busy_s, energy_j)."""
    out: dict[int, list[float]] = {}

    def add(hour: int, values: Sequence[float]) -> None:
        if since <= hour < until:
            cell = out.setdefault(hour, [0.0, 0.0, 0.0, 0.0])
            for i, v in enumerate(values):
                cell[i] += v

    for hour, present, alloc, busy, energy in stored:
        add(hour, (present, alloc, busy, energy))
    for _uuid, start, *_holder in open_allocations:
        for hour, seconds in _within(start, now, since, until):
            add(hour, (0.0, seconds, 0.0, 0.0))
    for hour, present, busy, energy in metered:
        add(hour, (present, 0.0, busy, energy))
    return out


def charges(
    ending: Iterable[Sequence[Any]], end: float
) -> tuple[dict[UsageKey, float], list[tuple[int, float]]]:
    """What allocations ending at ``end`` add: allocated seconds by usage key and by
    hour (``ending``: open-allocation rows, as ``OpenAllocation``)."""
    usage: dict[UsageKey, float] = {}
    cluster: dict[int, float] = {}
    for _uuid, start, user, group, project, pool in ending:
        for hour, seconds in split_hours(float(start), end):
            key = (hour, str(user), str(group), str(project), str(pool))
            usage[key] = usage.get(key, 0.0) + seconds
            cluster[hour] = cluster.get(hour, 0.0) + seconds
    return usage, sorted(cluster.items())


def charged_seconds(usage: Mapping[UsageKey, float]) -> float:
    """One job's allocated GPU-seconds from what ``charges`` adds for its ending run:
    the very seconds its usage rows get, so per-job GPU-hours add up to ``usage``'s."""
    return math.fsum(usage.values())


# -- summing up ---------------------------------------------------------------------------


def _figures(alloc_s: float, busy_s: float, energy_j: float, cost: float) -> dict[str, float]:
    return {
        "alloc_gpu_h": round(alloc_s / HOUR, _DIGITS),
        "busy_gpu_h": round(busy_s / HOUR, _DIGITS),
        "energy_kwh": round(energy_j / 3.6e6, _DIGITS),
        "cost": round(cost, _DIGITS),
    }


def idle_figures(idle_s: float, idle_j: float, prices: Prices) -> dict[str, float]:
    """Held but idle: GPU-hours, kWh, and what those kWh cost (energy only: the
    GPU-hour rate is charged for the allocation either way)."""
    return {
        "idle_held_gpu_h": round(idle_s / HOUR, _DIGITS),
        "idle_held_kwh": round(idle_j / 3.6e6, _DIGITS),
        "idle_held_cost": round(prices.cost("", 0.0, idle_j), _DIGITS),
    }


def gather_idle(
    stored: Iterable[IdleRow],
    metered: Iterable[tuple[UsageKey, float, float]],
    *,
    since: float,
    until: float,
) -> dict[UsageKey, list[float]]:
    """Held but idle by usage key -> [idle_s, energy_j] for the hours starting in
    ``[since, until)``: the stored rows and what the meter counted since its flush."""
    out: dict[UsageKey, list[float]] = {}

    def add(key: UsageKey, seconds: float, energy: float) -> None:
        if since <= key[0] < until:
            cell = out.setdefault(key, [0.0, 0.0])
            cell[0] += seconds
            cell[1] += energy

    for hour, user, group, project, pool, seconds, energy in stored:
        add((hour, user, group, project, pool), seconds, energy)
    for key, seconds, energy in metered:
        add(key, seconds, energy)
    return out


def summarize(
    usage: Mapping[UsageKey, Sequence[float]],
    by: str,
    prices: Prices,
    idle: Mapping[UsageKey, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """``rows`` (per local day and key, sorted by day, key) and ``totals`` (per key,
    most allocated first). Cost is worked out per pool before it is summed, so a
    user's total prices each pool's GPU-hours at that pool's rate. With ``idle``
    (held but idle by usage key: seconds, joules), each row and total also says
    ``idle_held_gpu_h``, ``idle_held_kwh`` and ``idle_held_cost``."""
    column = 1 + KEYS.index(by)
    daily: dict[tuple[str, str], list[float]] = {}
    totals: dict[str, list[float]] = {}
    days: dict[int, str] = {}

    def cells(key: UsageKey) -> tuple[list[float], list[float]]:
        hour, name = key[0], str(key[column])
        day = days.get(hour)
        if day is None:
            day = days[hour] = local_day(hour)
        return daily.setdefault((day, name), [0.0] * 6), totals.setdefault(name, [0.0] * 6)

    for key, (alloc, busy, energy) in usage.items():
        cost = prices.cost(key[4], alloc, energy)
        for cell in cells(key):
            cell[0] += alloc
            cell[1] += busy
            cell[2] += energy
            cell[3] += cost
    for key, (seconds, energy) in (idle or {}).items():
        for cell in cells(key):
            cell[4] += seconds
            cell[5] += energy

    def figures(v: Sequence[float]) -> dict[str, float]:
        out = _figures(*v[:4])
        if idle is not None:
            out.update(idle_figures(v[4], v[5], prices))
        return out

    rows = [{"key": k, "day": d, **figures(v)} for (d, k), v in sorted(daily.items())]
    ranked = sorted(totals.items(), key=lambda kv: (-round(kv[1][0] / HOUR, _DIGITS), kv[0]))
    total_rows = [{"key": k, **figures(v)} for k, v in ranked]
    return {"rows": rows, "totals": total_rows}


def hour_rows(cluster: Mapping[int, Sequence[float]]) -> list[dict[str, Any]]:
    """The cluster's hours, oldest first: GPU-hours present, allocated and busy."""
    return [
        {
            "hour": hour,
            "gpu_h": round(present / HOUR, _DIGITS),
            "alloc_gpu_h": round(alloc / HOUR, _DIGITS),
            "busy_gpu_h": round(busy / HOUR, _DIGITS),
        }
        for hour, (present, alloc, busy, _energy) in sorted(cluster.items())
    ]


def by_hour_of_day(cluster: Mapping[int, Sequence[float]]) -> list[dict[str, Any]]:
    """The cluster's hours folded onto the local time of day they start at (``HH:MM``):
    GPU-hours present, allocated and busy at that time over the whole range."""
    folded: dict[str, list[float]] = {}
    for hour, (present, alloc, busy, _energy) in cluster.items():
        cell = folded.setdefault(local_clock(hour), [0.0, 0.0, 0.0])
        cell[0] += present
        cell[1] += alloc
        cell[2] += busy
    return [
        {
            "clock": clock,
            "gpu_h": round(p / HOUR, _DIGITS),
            "alloc_gpu_h": round(a / HOUR, _DIGITS),
            "busy_gpu_h": round(b / HOUR, _DIGITS),
        }
        for clock, (p, a, b) in sorted(folded.items())
    ]
