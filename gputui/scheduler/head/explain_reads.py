"""Read-only requests answered from a WAL snapshot on the head's reader thread:
``explain`` (why a job waits, its factors, what is ahead, when it may start) and
``quota`` (use against each weekly quota). They never hold the writer up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head.views import job_view
from gputui.scheduler.policy import cards, explain, line, model, passes, shares
from gputui.scheduler.policy.cards import CardProblem
from gputui.scheduler.policy.shares import Standing
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.read_args import ExplainArgs
from gputui.scheduler.server.wire import FINAL_JOB_STATES, Refusal
from gputui.scheduler.store.api import Tx

AHEAD_SHOWN = 20


def standing_of(tx: Tx, config: SchedulerConfig, now: float) -> Standing:
    """Fair-share factors and quota use from the allocations of the horizon that
    still counts: five half-lives, at least the week (quotas)."""
    horizon = max(5 * config.fair_share.half_life_days * 86400.0, shares.WEEK_S)
    spans = [
        shares.Span(group, pool, start, end, user)
        for group, user, pool, start, end in tx.usage.spans(now - horizon)
    ]
    return shares.standing(spans, config.fair_share.shares, config, now)


def _factors(
    want: model.Want | None, job: Any, config: SchedulerConfig, standing: Standing
) -> dict[str, Any]:
    group = job.group
    share = config.fair_share.shares.get(group, config.fair_share.default_share)
    klass = config.klass(job.priority)
    return {
        "class": job.priority,
        "class_rank": config.rank(job.priority) + 1,
        "classes": [c.name for c in config.classes],
        "class_preemptible": bool(klass and klass.preemptible),
        "off_hours_only": bool(klass and klass.off_hours),
        "group": group,
        "fair_share": standing.factor(group),
        "usage_gpu_h": standing.decayed.get(group, 0.0) / 3600.0,
        "share": share,
        "half_life_days": config.fair_share.half_life_days,
        "over_quota": bool(want.over_quota) if want is not None else job.over_quota,
        "quotas": [_quota_row(use) for use in standing.quotas if use.quota.group == group],
        "as_of": standing.at,
        "preemptible": line.preemptible(job, config),
        "time_limit_s": job.time_limit_s,
    }


def explain_job(
    tx: Tx,
    caller: Caller,
    args: ExplainArgs,
    *,
    config: SchedulerConfig,
    slots: tuple[model.GpuSlot, ...],
    now: float,
    grace_s: float,
    standing: Standing,
    problems: Mapping[str, Sequence[CardProblem]] | None = None,
) -> dict[str, Any]:
    """Anyone may ask about any job (as ``squeue`` and ``sprio`` show everyone's).

    ``standing``: the figures the scheduler works by now (``standings.Standings``),
    never worked out afresh here: what a person is told is what decides.
    ``problems``: what the head knows is wrong with each card (``cards``): the cards
    that would fit the job but placement puts last or never uses are named."""
    job = tx.job(args.job_id)
    if job is None:
        raise Refusal("unknown-job", f"no job {args.job_id}")
    built = line.build(tx, config, standing, now)
    busy = {a.gpu_uuid for a in tx.live_allocations()}
    gpus = tuple(s.held(s.uuid in busy) for s in slots)
    view = line.view(built, gpus, config, now, grace_s)
    wants = {(w.kind, w.id): w for w in built.wants}
    me = wants.get(("job", job.id or 0))
    deps = json.loads(job.after)
    dep_states = tx.job_states(deps) if deps else {}
    body: dict[str, Any] = {
        "job": job_view(job),
        "reason": job.reason,
        "factors": _factors(me, job, config, standing),
        "dependencies": [{"id": d, "state": dep_states.get(d, "gone")} for d in deps],
        "after_ok": job.after_ok,
        "position": None,
        "in_line": len(built.wants),
        "ahead": [],
        "ahead_count": 0,
        "estimate": {"start": None, "host": None, "why": f"the job is {job.state}"},
        "reservation": None,
        "passed_over": [],
    }
    if job.state not in FINAL_JOB_STATES:
        shape = me or model.Want(
            "job", job.id or 0, job.gpus, pool=job.pool, host=job.host_constraint
        )
        passed = cards.passed_over(
            shape,
            slots,
            problems or {},
            config.placement,
            busy=busy,
        )
        body["passed_over"] = [
            {"host": p.host, "index": p.index, "uuid": p.uuid, "never": p.never, "why": p.why}
            for p in passed
        ]
    if me is None:
        return body
    order = explain.line_of(view)
    place = order.index(me)
    body["position"] = place + 1
    body["ahead_count"] = place
    decided = passes.decide(view)
    reasons = {(w.kind, w.id): w for w in decided.wait}
    placed = {(p.kind, p.id) for p in decided.place}
    for other in order[: AHEAD_SHOWN if place > AHEAD_SHOWN else place]:
        row = built.rows[other.kind, other.id]
        wait = reasons.get((other.kind, other.id))
        body["ahead"].append(
            {
                "kind": other.kind,
                "id": other.id,
                "user": other.user,
                "gpus": other.gpus,
                "class": getattr(row, "priority", config.default_class),
                "fair_share": other.fair,
                "over_quota": other.over_quota,
                "reason": "starting"
                if (other.kind, other.id) in placed
                else (wait.reason if wait else ""),
            }
        )
    mine = reasons.get(("job", job.id or 0))
    if mine is not None:
        body["reason"] = mine.reason
        if mine.host is not None and mine.reason != model.PREEMPTING:
            body["reservation"] = {"host": mine.host, "start": mine.start_at}
    opens = shares.off_hours_start(now, config.off_hours)
    guess = explain.estimate_start(view, me, opens)
    body["estimate"] = {"start": guess.start, "host": guess.host, "why": guess.why_none}
    return body


def _quota_row(use: shares.QuotaUse) -> dict[str, Any]:
    return {
        "group": use.quota.group,
        "pool": use.quota.pool,
        "limit_gpu_h": use.quota.gpu_hours_per_week,
        "used_gpu_h": use.used_gpu_h,
        "over": use.over,
    }


def quota_table(standing: Standing) -> dict[str, Any]:
    """Use against each quota, as the scheduler counts it now (``as_of``)."""
    return {
        "week_start": shares.week_start(standing.at),
        "as_of": standing.at,
        "quotas": [_quota_row(use) for use in standing.quotas],
    }
