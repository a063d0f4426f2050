"""The ``usage`` and ``report`` requests: read-only, answered from a snapshot.

Usage is team-visible (as Slurm's ``sshare``): anyone may ask about everyone. The
figures are the stored hours, the allocations still open (counted up to now) and
what the meter has counted since its last flush, so they are right while jobs run.
"""

from __future__ import annotations

from typing import Any

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import explain_reads
from gputui.scheduler.policy import accounting
from gputui.scheduler.policy.accounting import Prices
from gputui.scheduler.policy.meter import Metered
from gputui.scheduler.policy.shares import Standing
from gputui.scheduler.server.read_args import MAX_USAGE_DAYS, ReportArgs, UsageArgs
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import Tx

DEFAULT_DAYS = 7.0
OPS = frozenset({"usage", "report"})


def prices(sched: SchedulerConfig) -> Prices:
    a = sched.accounting
    return Prices(a.price_per_kwh, dict(a.gpu_hour_rate), a.currency)


def window(op: str, since: float | None, until: float | None, now: float) -> tuple[float, float]:
    """``[since, until)``: by default the seven days up to now; refused when empty or
    longer than ``MAX_USAGE_DAYS``."""
    end = now if until is None else until
    start = end - DEFAULT_DAYS * 86400 if since is None else since
    if end <= start:
        raise Refusal("bad-args", f"{op}: until must be after since")
    if end - start > MAX_USAGE_DAYS * 86400:
        raise Refusal("bad-args", f"{op}: a range of at most {MAX_USAGE_DAYS} days, please")
    return start, end


def _gathered(
    tx: Tx, since: float, until: float, pending: Metered, now: float, *, cluster: bool
) -> tuple[dict[accounting.UsageKey, list[float]], dict[int, list[float]]]:
    opened = tx.usage.open_allocations()
    span = {"since": since, "until": until, "now": now}
    usage = accounting.gather(tx.usage.hours(since, until), opened, pending.usage_rows(), **span)
    hours: dict[int, list[float]] = {}
    if cluster:
        stored = tx.usage.cluster_hours(since, until)
        hours = accounting.gather_cluster(stored, opened, pending.cluster_rows(), **span)
    return usage, hours


def usage(
    tx: Tx,
    args: UsageArgs,
    sched: SchedulerConfig,
    pending: Metered,
    now: float,
) -> dict[str, Any]:
    since, until = window("usage", args.since, args.until, now)
    rows, hours = _gathered(tx, since, until, pending, now, cluster=args.hourly)
    cost = prices(sched)
    return {
        "since": since,
        "until": until,
        "by": args.by,
        "currency": cost.currency,
        **accounting.summarize(rows, args.by, cost),
        "hours": accounting.hour_rows(hours) if args.hourly else [],
    }


def report(
    tx: Tx,
    args: ReportArgs,
    sched: SchedulerConfig,
    pending: Metered,
    now: float,
    *,
    standing: Standing,
) -> dict[str, Any]:
    """The range's totals, top users and groups, the hours of the day, and each quota
    as the scheduler counts it (this week, from Monday: ``gputui quota``'s figures,
    ``standing``)."""
    since, until = window("report", args.since, args.until, now)
    rows, hours = _gathered(tx, since, until, pending, now, cluster=True)
    cost = prices(sched)
    users = accounting.summarize(rows, "user", cost)["totals"]
    groups = accounting.summarize(rows, "group", cost)["totals"]
    total = {
        name: round(sum(r[name] for r in users), 6)
        for name in ("alloc_gpu_h", "busy_gpu_h", "energy_kwh", "cost")
    }
    present, alloc, busy, energy = (sum(v[i] for v in hours.values()) for i in range(4))
    quotas = explain_reads.quota_table(standing)
    return {
        "since": since,
        "until": until,
        "days": round((until - since) / 86400, 6),
        "currency": cost.currency,
        "total": total,
        "cluster": {
            "gpu_h": round(present / 3600, 6),
            "alloc_gpu_h": round(alloc / 3600, 6),
            "busy_gpu_h": round(busy / 3600, 6),
            "energy_kwh": round(energy / 3.6e6, 6),
        },
        "users": users[: args.top],
        "groups": groups[: args.top],
        "hours_of_day": accounting.by_hour_of_day(hours),
        "quota_week_start": quotas["week_start"],
        "quotas": quotas["quotas"],
    }
