"""Fair share, quotas, the off-hours window: the arithmetic, pure and stdlib only.

*Fair share* (Slurm's classic factor): a group's decayed usage ``U`` (GPU-seconds,
each second counting half as much every half-life ago it was used) and its share
``S`` are each taken as a fraction of all groups', and its factor is
``2 ** -(U_frac / S_frac)``: 1 for a group that used nothing lately, 0.5 for one
that used exactly its share, towards 0 for one far over it. Within a class the
line goes by this factor, highest first.

*Quotas* count GPU-hours allocated since the start of the week (Monday 00:00, the
head's local time), per group and pool or per group over all pools.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gputui.config.scheduler import OffHours, Quota, SchedulerConfig

WEEK_S = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class Span:
    """GPU time of one allocation: who it counts for, from ``start`` to ``end``."""

    group: str
    pool: str
    start: float
    end: float | None
    """None: still allocated (counts up to now)."""
    user: str = ""


def decayed_seconds(start: float, end: float, now: float, half_life_s: float) -> float:
    """GPU-seconds from ``start`` to ``end``, each weighted ``2 ** -(age / half_life)``."""
    end = min(end, now)
    if end <= start:
        return 0.0
    k = math.log(2) / half_life_s
    return (math.exp(-k * (now - end)) - math.exp(-k * (now - start))) / k


def decayed_usage(spans: Iterable[Span], now: float, half_life_s: float) -> dict[str, float]:
    usage: dict[str, float] = {}
    for span in spans:
        end = now if span.end is None else span.end
        usage[span.group] = usage.get(span.group, 0.0) + decayed_seconds(
            span.start, end, now, half_life_s
        )
    return usage


def fair_factors(
    usage: Mapping[str, float],
    shares: Mapping[str, float],
    default_share: float,
    groups: Iterable[str],
) -> dict[str, float]:
    """Each of ``groups``' factor in 0..1 (see the module's docstring)."""
    names = set(groups) | set(usage)
    if not names:
        return {}
    total_usage = sum(max(0.0, usage.get(g, 0.0)) for g in names)
    share = {g: shares.get(g, default_share) for g in names}
    total_share = sum(share.values())
    out: dict[str, float] = {}
    for g in names:
        if total_usage <= 0:
            out[g] = 1.0
            continue
        u = max(0.0, usage.get(g, 0.0)) / total_usage
        s = share[g] / total_share
        out[g] = 2.0 ** (-(u / s))
    return out


def week_start(now: float) -> float:
    """Monday 00:00 of this week in the head's local time, as epoch seconds."""
    local = datetime.fromtimestamp(now).astimezone()
    monday = (local - timedelta(days=local.weekday())).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    return monday.timestamp()


def in_off_hours(now: float, window: OffHours) -> bool:
    """Whether ``now`` (the head's local time) is inside the window; a window whose
    end is before its start spans midnight."""
    local = datetime.fromtimestamp(now).astimezone()
    minute = local.hour * 60 + local.minute
    start, end = window.minutes()
    if start < end:
        return start <= minute < end
    return minute >= start or minute < end


def off_hours_start(now: float, window: OffHours) -> float:
    """When the window next opens (``now`` when it is open)."""
    if in_off_hours(now, window):
        return now
    local = datetime.fromtimestamp(now).astimezone()
    start, _ = window.minutes()
    opens = local.replace(hour=start // 60, minute=start % 60, second=0, microsecond=0)
    if opens <= local:
        opens += timedelta(days=1)
    return opens.timestamp()


@dataclass(frozen=True, slots=True)
class QuotaUse:
    quota: Quota
    used_gpu_h: float

    @property
    def over(self) -> bool:
        return self.used_gpu_h >= self.quota.gpu_hours_per_week


@dataclass(slots=True)
class Standing:
    """What the line needs from usage, worked out once for many passes."""

    fair: dict[str, float] = field(default_factory=dict)
    decayed: dict[str, float] = field(default_factory=dict)
    quotas: list[QuotaUse] = field(default_factory=list)
    at: float = 0.0

    def factor(self, group: str) -> float:
        return self.fair.get(group, 1.0)

    def over_quota(self, group: str, pool: str | None) -> bool:
        """Over a quota of its group: one over all pools, or the one of the pool it
        asked for. A request that names no pool counts against every pool quota of
        its group (naming the pool lets it run within quota elsewhere)."""
        for use in self.quotas:
            if use.quota.group != group or not use.over:
                continue
            if use.quota.pool is None or pool is None or use.quota.pool == pool:
                return True
        return False


def standing(
    spans: Iterable[Span], groups: Iterable[str], config: SchedulerConfig, now: float
) -> Standing:
    """Fair-share factors and quota use from allocation spans."""
    spans = list(spans)
    half_life = config.fair_share.half_life_days * 86400.0
    decayed = decayed_usage(spans, now, half_life)
    fair = fair_factors(decayed, config.fair_share.shares, config.fair_share.default_share, groups)
    since = week_start(now)
    week: dict[tuple[str, str], float] = {}
    for span in spans:
        end = now if span.end is None else min(span.end, now)
        seconds = end - max(span.start, since)
        if seconds > 0:
            week[span.group, span.pool] = week.get((span.group, span.pool), 0.0) + seconds
    quotas = []
    for quota in config.quotas:
        used = sum(
            s
            for (group, pool), s in week.items()
            if group == quota.group and (quota.pool is None or pool == quota.pool)
        )
        quotas.append(QuotaUse(quota, used / 3600.0))
    return Standing(fair=fair, decayed=decayed, quotas=quotas, at=now)
