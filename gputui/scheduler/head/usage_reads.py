"""The ``usage`` and ``report`` requests: read-only, answered from a snapshot.

Usage is team-visible (as Slurm's ``sshare``): anyone may ask about everyone. The
figures are the stored hours, the allocations still open (counted up to now) and
what the meter has counted since its last flush, so they are right while jobs run.
"""

from __future__ import annotations

from typing import Any

from gputui.common.i18n import N_
from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import explain_reads
from gputui.scheduler.policy import accounting
from gputui.scheduler.policy.accounting import Prices
from gputui.scheduler.policy.meter import Metered
from gputui.scheduler.policy.shares import Standing
from gputui.scheduler.policy.slurm_meter import SlurmMetered
from gputui.scheduler.server.read_args import (
    MAX_USAGE_DAYS,
    ReportArgs,
    SlurmEnergyArgs,
    UsageArgs,
)
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import Tx
from gputui.wire.words import say

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
        raise Refusal("bad-args", say(N_("{op}: until must be after since"), op=op))
    if end - start > MAX_USAGE_DAYS * 86400:
        raise Refusal(
            "bad-args",
            say(N_("{op}: a range of at most {days} days, please"), op=op, days=MAX_USAGE_DAYS),
        )
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


def _idle(
    tx: Tx, sched: SchedulerConfig, since: float, until: float, pending: Metered
) -> dict[accounting.UsageKey, list[float]] | None:
    """Held but idle by usage key (None while ``power.mode`` is off: not counted)."""
    if sched.power.mode == "off":
        return None
    stored = tx.usage.idle_hours(since, until)
    return accounting.gather_idle(stored, pending.idle_rows(), since=since, until=until)


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
    idle = _idle(tx, sched, since, until, pending)
    return {
        "since": since,
        "until": until,
        "by": args.by,
        "currency": cost.currency,
        "power_mode": sched.power.mode,
        **accounting.summarize(rows, args.by, cost, idle),
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
    idle = _idle(tx, sched, since, until, pending)
    users = accounting.summarize(rows, "user", cost, idle)["totals"]
    groups = accounting.summarize(rows, "group", cost, idle)["totals"]
    names = ["alloc_gpu_h", "busy_gpu_h", "energy_kwh", "cost"]
    if idle is not None:
        names += ["idle_held_gpu_h", "idle_held_kwh", "idle_held_cost"]
    total = {name: round(sum(r[name] for r in users), 6) for name in names}
    present, alloc, busy, energy = (sum(v[i] for v in hours.values()) for i in range(4))
    quotas = explain_reads.quota_table(standing)
    return {
        "since": since,
        "until": until,
        "days": round((until - since) / 86400, 6),
        "currency": cost.currency,
        "power_mode": sched.power.mode,
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


def slurm_energy(
    tx: Tx, args: SlurmEnergyArgs, sched: SchedulerConfig, pending: SlurmMetered, now: float
) -> dict[str, Any]:
    """What a head that relays Slurm metered of Slurm's jobs in the hours starting in
    ``[since, until)``: per job the GPU-seconds it metered, busy GPU-seconds and joules
    (the last two in total and by the
    head's local day, and whether a share was a node's split; and the head's prices
    (``usage`` on Slurm joins these with ``sacct``'s allocations, job by job)."""
    since, until = window("slurm_energy", args.since, args.until, now)
    stored = tx.usage.slurm_energy(since, until)
    fresh = [r for r in pending.rows() if since <= r[0] < until]
    jobs: dict[int, dict[str, Any]] = {}
    for hour, job, user, partition, held, busy, joules, per_node in [*stored, *fresh]:
        entry = jobs.setdefault(
            job, {"job": job, "user": user, "partition": partition, "held_gpu_s": 0.0,
                  "busy_gpu_s": 0.0, "energy_j": 0.0, "per_node": False, "days": {}}
        )  # fmt: skip
        entry["held_gpu_s"] += held
        entry["busy_gpu_s"] += busy
        entry["energy_j"] += joules
        entry["per_node"] = entry["per_node"] or per_node
        day = entry["days"].setdefault(accounting.local_day(hour), [0.0, 0.0, 0.0])
        day[0] += busy
        day[1] += joules
        day[2] += held
    cost = prices(sched)
    return {
        "since": since,
        "until": until,
        "jobs": [jobs[j] for j in sorted(jobs)],
        "price_per_kwh": cost.price_per_kwh,
        "gpu_hour_rate": dict(cost.gpu_hour_rate or {}),
        "currency": cost.currency,
    }
