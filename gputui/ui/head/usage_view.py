"""The head's answer to ``usage``, as the console sees it: parsed once, clamped, cleaned.

The answer (``{"since", "until", "by", "currency", "rows", "totals", "hours"}``) comes
from the head, and the head's keys are user and group names anyone can choose, so
it is treated like host data: every key is cleaned (``gputui.common.text.clean``) and cut,
every number that is not a finite one in range becomes 0 or the cap, a busy figure
never exceeds its allocated one, lists are capped, and anything malformed is
dropped, never trusted. ``UsageReport.parse`` never raises. The per-day ``rows``
are not read: the screen shows totals and hours.

No Textual and no I/O: the usage screen reads these, tests build them from dicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gputui.common.i18n import N_, _
from gputui.common.text import clean_str as _text
from gputui.common.untrusted import epoch as _epoch

MAX_AMOUNT = 1e12
"""GPU-hours, kWh or money beyond this are nonsense from a broken head: capped."""
MAX_ITEMS = 100_000
"""Entries read from ``totals`` or ``hours``; the rest of a longer list is ignored."""
KEY_CELLS = 64
"""A user or group name is kept to this many cells (the bars cut it further)."""
NO_KEY = N_("(none)")
"""How an empty key (``by=project`` rows without a project) is shown."""
MAX_SPAN_S = 400 * 86_400.0


def amount(value: Any) -> float:
    """A non-negative finite number, capped at ``MAX_AMOUNT``; 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        number = float(value)
    except OverflowError:  # an int too big for a float
        return MAX_AMOUNT if value > 0 else 0.0
    if math.isnan(number) or number <= 0:
        return 0.0
    return min(number, MAX_AMOUNT)


def _key(value: Any) -> str:
    return _text(value, KEY_CELLS) or _(NO_KEY)


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """One user's (group's ...) use over the whole range."""

    key: str
    alloc_gpu_h: float
    busy_gpu_h: float
    """Never more than ``alloc_gpu_h``."""
    energy_kwh: float = 0.0
    cost: float = 0.0
    idle_held_kwh: float = 0.0
    """Of ``energy_kwh``: what cards held but idle drew (``power.mode`` report or lock)."""

    @property
    def idle_gpu_h(self) -> float:
        """Allocated but idle: the cards held and not used."""
        return self.alloc_gpu_h - self.busy_gpu_h

    @property
    def busy_share(self) -> float | None:
        """Busy GPU-hours over allocated ones (0..1); None with nothing allocated."""
        return self.busy_gpu_h / self.alloc_gpu_h if self.alloc_gpu_h > 0 else None


def total_of(key: str, parts: Iterable[UsageTotal]) -> UsageTotal:
    """``parts`` summed under ``key`` (the "others" line, the grand total)."""
    alloc = busy = energy = cost = idle = 0.0
    for part in parts:
        alloc += part.alloc_gpu_h
        busy += part.busy_gpu_h
        energy += part.energy_kwh
        cost += part.cost
        idle += part.idle_held_kwh
    return UsageTotal(key, alloc, min(busy, alloc), energy, cost, min(idle, energy))


@dataclass(frozen=True, slots=True)
class UsageHour:
    """One hour of the whole cluster (a ``ClusterHour`` row)."""

    hour: float
    """Epoch seconds of the hour's start."""
    gpu_h: float
    """GPU-hours present (GPUs that were there and reporting)."""
    alloc_gpu_h: float
    """Allocated GPU-hours; never more than present."""
    busy_gpu_h: float
    """Busy GPU-hours (allocated or not); never more than present."""


@dataclass(frozen=True, slots=True)
class UsageReport:
    """The parsed answer: who used what over ``since``..``until``, and the hours."""

    since: float
    until: float
    by: str
    currency: str
    totals: tuple[UsageTotal, ...]
    """One per key, most allocated first (then by key), duplicates summed."""
    hours: tuple[UsageHour, ...]
    """Hour ascending, one per hour."""

    @property
    def total(self) -> UsageTotal:
        return total_of("all", self.totals)

    @classmethod
    def parse(cls, result: Any, *, since: float, until: float, by: str = "user") -> UsageReport:
        """The head's ``result`` for a request over ``since``..``until``; never raises.

        The range the head says it answered for is used when it is sound, else the
        one asked for."""
        data: dict[Any, Any] = result if isinstance(result, dict) else {}
        start, end = _epoch(data.get("since")), _epoch(data.get("until"))
        if start is None or end is None or not 0 < end - start <= MAX_SPAN_S:
            start, end = since, until
        return cls(
            since=start,
            until=end,
            by=_text(data.get("by"), 16) or by,
            currency=_text(data.get("currency"), 8),
            totals=_totals(data.get("totals")),
            hours=_hours(data.get("hours")),
        )


def _totals(value: Any) -> tuple[UsageTotal, ...]:
    if not isinstance(value, list):
        return ()
    merged: dict[str, list[float]] = {}
    for item in value[:MAX_ITEMS]:
        if not isinstance(item, dict):
            continue
        key = _key(item.get("key"))
        alloc = amount(item.get("alloc_gpu_h"))
        busy = min(amount(item.get("busy_gpu_h")), alloc)
        sums = merged.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
        sums[0] += alloc
        sums[1] += busy
        sums[2] += amount(item.get("energy_kwh"))
        sums[3] += amount(item.get("cost"))
        sums[4] += amount(item.get("idle_held_kwh"))
    totals = [
        UsageTotal(
            k,
            min(a, MAX_AMOUNT),
            min(b, a, MAX_AMOUNT),
            min(e, MAX_AMOUNT),
            min(c, MAX_AMOUNT),
            min(i, e, MAX_AMOUNT),
        )
        for k, (a, b, e, c, i) in merged.items()
    ]
    totals.sort(key=lambda t: (-t.alloc_gpu_h, t.key))
    return tuple(totals)


def _hours(value: Any) -> tuple[UsageHour, ...]:
    if not isinstance(value, list):
        return ()
    seen: dict[float, UsageHour] = {}
    for item in value[:MAX_ITEMS]:
        if not isinstance(item, dict):
            continue
        hour = _epoch(item.get("hour"))
        if hour is None or hour in seen:
            continue
        present = amount(item.get("gpu_h"))
        seen[hour] = UsageHour(
            hour=hour,
            gpu_h=present,
            alloc_gpu_h=min(amount(item.get("alloc_gpu_h")), present),
            busy_gpu_h=min(amount(item.get("busy_gpu_h")), present),
        )
    return tuple(sorted(seen.values(), key=lambda h: h.hour))


def hours_text(value: float) -> str:
    """GPU-hours in at most 6 cells: ``0.5``, ``123.4``, ``12345``, ``1.2M``."""
    if value < 999.95:
        return f"{value:.1f}"
    if value < 99_999.5:
        return f"{value:.0f}"
    for scale, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T")):
        if value / scale < 999.5:
            return f"{value / scale:.0f}{suffix}"
    return ">999T"


def amount_text(value: float, decimals: int = 1) -> str:
    """A total with thousands separators: ``1,234.5``; huge ones in ``e`` notation."""
    if value >= 1e9:
        return f"{value:.2e}"
    return f"{value:,.{decimals}f}"


def share_text(share: float | None) -> str:
    """``62%``; ``-`` when there is nothing to share."""
    return "-" if share is None else f"{round(min(max(share, 0.0), 1.0) * 100):.0f}%"
