"""Read-only requests answered from a WAL snapshot on the head's reader thread:
``explain`` (why a job waits, its factors, what is ahead, when it may start),
``estimates`` (the estimated start of the first requests in line, from one play of
the line: the week board's estimated bars) and ``quota`` (use against each weekly
quota). They never hold the writer up, and the scheduling pass never works them out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gputui.common.i18n import N_
from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import bookings
from gputui.scheduler.head.views import job_view
from gputui.scheduler.policy import cards, explain, line, model, passes, shares
from gputui.scheduler.policy.cards import CardProblem
from gputui.scheduler.policy.shares import Standing
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.read_args import EstimatesArgs, ExplainArgs
from gputui.scheduler.server.wire import FINAL_JOB_STATES, Refusal
from gputui.scheduler.store.api import Tx
from gputui.wire.words import Words, say

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
        raise Refusal("unknown-job", say(N_("no job {job}"), job=args.job_id))
    built = line.build(tx, config, standing, now)
    busy = {a.gpu_uuid for a in tx.live_allocations()}
    view = _view(tx, built, slots, config, busy=busy, now=now, grace_s=grace_s)
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
        "estimate": _no_estimate(say(N_("the job is {state}"), state=job.state)),
        "reservation": None,
        "passed_over": [],
    }
    if job.state not in FINAL_JOB_STATES:
        shape = me or model.Want(
            "job", job.id or 0, job.gpus, pool=job.pool, host=job.host_constraint, mig=job.mig
        )
        passed = cards.passed_over(
            shape,
            slots,
            problems or {},
            config.placement,
            busy=busy,
        )
        body["passed_over"] = [
            {
                "host": p.host,
                "index": p.index,
                "uuid": p.uuid,
                "never": p.never,
                "why": p.why,
                **({"why_words": p.said.wire()} if p.said is not None else {}),
            }
            for p in passed
        ]
    if me is None:
        first = built.arrays.get(job.array_id) if job.array_id is not None else None
        if job.state == "queued" and first is not None and first.id != job.id:
            # A waiting task past the few of its array a pass reads: they start in order.
            why = say(
                N_(
                    "task {task} of array {array} starts after the tasks before it;"
                    " the array's first waiting task is job {first}"
                ),
                task=job.array_task or 0,
                array=job.array_id or 0,
                first=first.id or 0,
            )
            body["estimate"] = _no_estimate(why)
        elif job.state == "queued" and any(t.array_id == job.array_id for t in built.throttled):
            why = say(
                N_(
                    "array {array} has {count} tasks holding GPUs, as many as its %N allows:"
                    " its next task starts when one ends"
                ),
                array=job.array_id or 0,
                count=job.array_throttle or 0,
            )
            body["estimate"] = _no_estimate(why)
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
    if guess.said is not None:
        body["estimate"]["why_words"] = guess.said.wire()
    return body


def _view(
    tx: Tx,
    built: line.Line[Any],
    slots: tuple[model.GpuSlot, ...],
    config: SchedulerConfig,
    *,
    busy: set[str],
    now: float,
    grace_s: float,
) -> model.ClusterView:
    """The cluster as the pass sees it now: its GPUs (held or not), the line, what
    runs, and the bookings not yet over (kept free for their windows)."""
    gpus = tuple(s.held(s.uuid in busy) for s in slots)
    booked = tuple(bookings.as_policy(b) for b in tx.bookings(bookings.LIVE, ending_after=now))
    return line.view(built, gpus, config, now, grace_s, bookings=booked)


def estimates(
    tx: Tx,
    args: EstimatesArgs,
    *,
    config: SchedulerConfig,
    slots: tuple[model.GpuSlot, ...],
    now: float,
    grace_s: float,
    standing: Standing,
) -> dict[str, Any]:
    """The estimated start and end of the first ``args.limit`` requests in line
    (``explain``'s projection, played once for all of them): where the week board
    draws waiting work. A request with none (blocked, or behind work with no time
    limit) is left out. Anyone may ask (``queue`` shows the line to everyone); a
    claim's note is not carried."""
    built = line.build(tx, config, standing, now)
    busy = {a.gpu_uuid for a in tx.live_allocations()}
    view = _view(tx, built, slots, config, busy=busy, now=now, grace_s=grace_s)
    opens = shares.off_hours_start(now, config.off_hours)
    out = []
    for got in explain.project(view, opens, args.limit):
        want = got.want
        row = built.rows.get((want.kind, want.id))
        out.append(
            {
                "kind": want.kind,
                "id": want.id,
                "position": got.place,
                "user": want.user,
                "name": getattr(row, "name", None) if want.kind == "job" else None,
                "gpus": want.gpus,
                "pool": want.pool,
                "start": got.start,
                "end": got.end,
                "host": got.host,
                "gpu_uuids": list(got.uuids),
            }
        )
    return {"estimates": out, "in_line": len(built.wants), "as_of": now}


def _no_estimate(why: Words) -> dict[str, Any]:
    """An ``estimate`` with no start: ``why`` in English and as words."""
    return {"start": None, "host": None, "why": why.english(), "why_words": why.wire()}


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
