"""``gputui explain``'s text, from the head's answer: for the CLI and the console.

Stdlib only (the CLI stays light). Every value from the head is shown through
``shown`` (anything not printable becomes ``?``), cut to a width.
"""

from __future__ import annotations

import time
from typing import Any

from gputui.common import printable
from gputui.common.durations import elapsed_text

REASONS = {
    "Priority": "GPUs that fit it are going to work ahead of it in line",
    "Resources": "no host has enough free GPUs of the kind it asks for",
    "Reservation": "free GPUs are reserved for a job ahead whose start its time limit would delay",
    "QuotaExceeded": "its group is over a weekly quota: it gets only GPUs nothing else wants",
    "OffHours": "its class starts only inside the off-hours window",
    "Dependency": "it starts after other jobs end (--after / --after-ok)",
    "Held": "held: it starts only after release-hold",
    "Drained": "the GPUs that could take it are drained by an admin",
    "Fenced": (
        "the GPUs that could take it are fenced off (a hardware fault; see gputui queue)"
        " or show a problem placement never uses"
    ),
    "HostDown": "the hosts that could take it are not answering",
    "ClassNotAllowed": "its priority class is no longer in the configuration",
    "Preempting": "lower-priority jobs are being stopped to make room for it",
    "LoginUser": "only hosts the head reaches as another user could take it",
}


def shown(text: object, width: int = 160) -> str:
    """``printable.shown``, cut at 160 unless told (explain's lines are short)."""
    return printable.shown(text, width)


def when(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    local = time.strftime("%a %H:%M", time.localtime(ts))
    return f"{local} (in {elapsed_text(max(0.0, ts - now))})" if ts > now else "now"


def explain_lines(body: dict[str, Any], now: float, *, ahead: bool = True) -> list[str]:
    """The answer to ``explain`` as lines: place, reason, factors, reservation,
    estimate, and (``ahead``) the requests ahead of it."""
    if body.get("scheduler") == "slurm":
        return slurm_lines(body, now)
    job, f = body["job"], body["factors"]
    out = [
        f"job {job['id']} ({shown(job['name'], 60)}) of {shown(job['user'], 40)}: {job['state']}"
    ]
    reason = body.get("reason") or ""
    if body.get("position") is not None:
        out.append(
            f"  place in line: {body['position']} of {body['in_line']}"
            f"  reason: {shown(reason, 40)}: {REASONS.get(reason, shown(reason))}"
        )
    elif reason:
        out.append(f"  reason: {shown(reason)}")
    as_of = f.get("as_of")
    if isinstance(as_of, (int, float)) and as_of > 0:
        at = time.strftime("%H:%M:%S", time.localtime(as_of))
        out.append(f"  factors (the scheduler's, worked out at {at}):")
    else:
        out.append("  factors:")
    klass = f"{f['class']} ({f['class_rank']} of {len(f['classes'])}: {', '.join(f['classes'])})"
    out.append(f"    class          {shown(klass)}")
    out.append(
        f"    fair share     {f['fair_share']:.3f}  group {shown(f['group'], 40)}: "
        f"{f['usage_gpu_h']:.1f} GPU-h decayed (half-life {f['half_life_days']:g} d), "
        f"share {f['share']:g}"
    )
    if f["quotas"]:
        for q in f["quotas"]:
            pool = q["pool"] or "all pools"
            state = "OVER" if q["over"] else "within"
            out.append(
                f"    quota          {state}: {q['used_gpu_h']:.1f} of {q['limit_gpu_h']:g} "
                f"GPU-h this week ({shown(pool, 40)})"
            )
    else:
        out.append("    quota          none for its group")
    limit = f["time_limit_s"]
    out.append(
        f"    time limit     {elapsed_text(limit) if limit else 'none (it never backfills)'}"
        f"{'; preemptible' if f['preemptible'] else ''}"
        f"{'; starts only off hours' if f['off_hours_only'] else ''}"
    )
    for dep in body.get("dependencies", []):
        kind = "completed" if body.get("after_ok") else "ended"
        out.append(f"    after job {dep['id']} has {kind}: it is {dep['state']}")
    res = body.get("reservation")
    if res:
        start = res["start"]
        at = when(start, now) if start is not None else "when work there with no time limit ends"
        out.append(f"  reservation: {shown(res['host'], 60)} from {at}")
    est = body["estimate"]
    if est["start"] is not None:
        out.append(f"  estimated start: {when(est['start'], now)} on {shown(est['host'], 60)}")
    elif body.get("position") is not None:
        out.append(f"  estimated start: unknown ({shown(est['why'])})")
    out += [f"  {line}" for line in passed_lines(body)]
    listed = body.get("ahead", []) if ahead else []
    if listed:
        out.append(f"  ahead of it ({body['ahead_count']}):")
        out.append("    ID       USER         GPUS CLASS    SHARE  REASON")
        for w in listed:
            ref = ("j" if w["kind"] == "job" else "c") + str(w["id"])
            over = " over-quota" if w["over_quota"] else ""
            out.append(
                f"    {ref:<8} {shown(w['user'], 12):<12} {w['gpus']:>4} {shown(w['class'], 8):<8}"
                f" {w['fair_share']:.3f}  {shown(w['reason'], 24)}{over}"
            )
        if body["ahead_count"] > len(listed):
            out.append(f"    … and {body['ahead_count'] - len(listed)} more")
    return out


SLURM_REASONS = {
    "Resources": "no node has enough free GPUs (or CPUs, memory) for it now",
    "Priority": "jobs of higher priority are ahead of it for these resources",
    "Dependency": "it waits for the jobs it depends on (--dependency)",
    "DependencyNeverSatisfied": "a job it depends on ended in a way that never satisfies it",
    "JobHeldUser": "held by its owner: it starts only after release-hold",
    "JobHeldAdmin": "held by an admin: it starts only after release-hold (by an admin)",
    "BeginTime": "its start time (--begin) has not come",
    "ReqNodeNotAvail": "a node it needs is down, drained or reserved",
    "PartitionTimeLimit": "its time limit is over its partition's",
    "QOSMaxGRESPerUser": "its owner is at the QOS's limit of GPUs a user",
    "AssocGrpGRES": "its account is at its limit of GPUs",
    "QOSGrpGRES": "its QOS is at its limit of GPUs",
    "None": "not yet looked at by the scheduler",
}
"""Slurm's common pending reasons (``squeue``'s REASON), as a person reads them."""


_SPRIO = (
    ("age", "age"),
    ("fair_share", "fair share"),
    ("job_size", "job size"),
    ("partition", "partition"),
    ("qos", "QOS"),
)


def slurm_lines(body: dict[str, Any], now: float) -> list[str]:
    """``explain`` of a Slurm job: squeue's reason, sprio's factors, sshare's fair
    share and ``squeue --start``'s estimate, on one screen."""
    job = body["job"]
    out = [
        f"job {job['id']} ({shown(job['name'], 60)}) of {shown(job['user'], 40)}:"
        f" {shown(job['state'], 20)}"
    ]
    reason = str(body.get("reason") or "None")
    out.append(f"  reason: {shown(reason, 60)}: {SLURM_REASONS.get(reason, 'as Slurm says')}")
    prio = body.get("priority")
    if isinstance(prio, dict):
        parts = ", ".join(f"{label} {prio.get(key, 0)}" for key, label in _SPRIO)
        nice = f", nice {prio['nice']}" if prio.get("nice") else ""
        out.append(f"  priority (sprio): {prio.get('total', 0)} = {parts}{nice}")
    elif job["state"] == "PENDING":
        out.append("  priority (sprio): not given")
    share = body.get("fair_share")
    if isinstance(share, dict):
        out.append(
            f"  fair share (sshare): {share['fair_share']:.3f}  account"
            f" {shown(share['account'], 40)}: shares {shown(share['raw_shares'], 16)}"
            f" ({share['norm_shares']:.3f} of all), usage {share['effective_usage']:.3f}"
        )
    else:
        out.append(f"  fair share (sshare): {shown(body.get('fair_share_why') or 'unknown', 120)}")
    est = body.get("estimate") or {}
    if job["state"] == "PENDING":
        start = est.get("start")
        where = f" on {shown(est['nodes'], 60)}" if est.get("nodes") else ""
        if isinstance(start, (int, float)):
            out.append(f"  estimated start (squeue --start): {when(start, now)}{where}")
        else:
            out.append(
                "  estimated start (squeue --start): none yet (the backfill scheduler"
                " gives one once it has planned the job, and only for jobs with a time limit)"
            )
    limit = job.get("time_limit_s")
    out.append(f"  time limit: {elapsed_text(limit) if limit else 'none'}")
    return out


def passed_lines(body: dict[str, Any]) -> list[str]:
    """The cards that fit the job but were passed over (``scheduler.placement``), and why:
    ``gpu3 on node1 passed over: 20.0 GiB held by no process (used last)``."""
    out = []
    passed = body.get("passed_over")
    for p in passed if isinstance(passed, list) else []:
        if not isinstance(p, dict):
            continue
        how = "never used" if p.get("never") is True else "used last"
        out.append(
            f"gpu{shown(p.get('index'), 4)} on {shown(p.get('host'), 40)} passed over:"
            f" {shown(p.get('why'), 120)} ({how})"
        )
    return out


def explain_pairs(body: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """The answer to ``explain`` as short (label, value) pairs, for a narrow pane."""
    if body.get("scheduler") == "slurm":
        return slurm_pairs(body, now)
    f = body["factors"]
    reason = str(body.get("reason") or "")
    pairs: list[tuple[str, str]] = []
    if body.get("position") is not None:
        pairs.append(("line", f"{body['position']} of {body['in_line']}: {shown(reason, 40)}"))
    if reason in REASONS:
        pairs.append(("why", REASONS[reason]))
    pairs.append(("class", f"{shown(f['class'], 40)} ({f['class_rank']} of {len(f['classes'])})"))
    pairs.append(
        ("share", f"{f['fair_share']:.3f} ({shown(f['group'], 30)}: {f['usage_gpu_h']:.1f} GPU-h)")
    )
    for q in f["quotas"]:
        state = "over" if q["over"] else "within"
        pairs.append(("quota", f"{state}: {q['used_gpu_h']:.1f} of {q['limit_gpu_h']:g} GPU-h"))
    est = body["estimate"]
    if est["start"] is not None:
        pairs.append(("starts", f"{when(est['start'], now)} on {shown(est['host'], 40)}"))
    elif body.get("position") is not None:
        pairs.append(("starts", f"unknown: {shown(est['why'], 80)}"))
    return pairs


def slurm_pairs(body: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """``slurm_lines`` as short (label, value) pairs, for the queue screen's pane."""
    reason = str(body.get("reason") or "None")
    pairs = [("reason", shown(reason, 40)), ("why", SLURM_REASONS.get(reason, "as Slurm says"))]
    prio = body.get("priority")
    if isinstance(prio, dict):
        pairs.append(
            ("priority", f"{prio.get('total', 0)} (fair share {prio.get('fair_share', 0)})")
        )
    share = body.get("fair_share")
    if isinstance(share, dict):
        pairs.append(("share", f"{share['fair_share']:.3f} ({shown(share['account'], 30)})"))
    est = body.get("estimate") or {}
    start = est.get("start")
    if isinstance(start, (int, float)):
        pairs.append(("starts", when(start, now)))
    return pairs
