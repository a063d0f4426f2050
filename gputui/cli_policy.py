"""The policy's command-line verbs: ``gputui explain JOB`` and ``gputui quota``.

Like ``cli_head`` (which dispatches them), these import only the light client.
``explain`` is ``sprio`` and ``sshare`` for one job: its place in line, each
factor that put it there, the requests ahead of it and a start estimated from
the time limits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from gputui.durations import elapsed_text
from gputui.scheduler.client import HeadClient

EXIT_OK = 0

REASONS = {
    "Priority": "GPUs that fit it are going to work ahead of it in line",
    "Resources": "no host has enough free GPUs of the kind it asks for",
    "Reservation": "free GPUs are reserved for a job ahead whose start its time limit would delay",
    "QuotaExceeded": "its group is over a weekly quota: it gets only GPUs nothing else wants",
    "OffHours": "its class starts only inside the off-hours window",
    "Dependency": "it starts after other jobs end (--after / --after-ok)",
    "Held": "held: it starts only after release-hold",
    "Drained": "the GPUs that could take it are drained by an admin",
    "HostDown": "the hosts that could take it are not answering",
    "ClassNotAllowed": "its priority class is no longer in the configuration",
    "Preempting": "lower-priority jobs are being stopped to make room for it",
    "LoginUser": "only hosts the head reaches as another user could take it",
}


def add_parsers(sub: Any, job_id: Any) -> None:
    e = sub.add_parser("explain", help="why a job waits: its place, factors, start estimate")
    e.add_argument("job", type=job_id)
    e.add_argument("--json", action="store_true")
    q = sub.add_parser("quota", help="use against each weekly GPU-hour quota")
    q.add_argument("--json", action="store_true")


def _line(text: object, width: int = 160) -> str:
    """A value from the head, safe for a terminal (anything not printable is ``?``;
    ``gputui.text.clean`` would pull in rich), cut to ``width``."""
    value = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    return value if len(value) <= width else value[: width - 1] + "…"


def _when(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    local = time.strftime("%a %H:%M", time.localtime(ts))
    return f"{local} (in {elapsed_text(max(0.0, ts - now))})" if ts > now else "now"


def explain(client: HeadClient, a: argparse.Namespace) -> int:
    body = client.call("explain", {"job_id": a.job})
    if a.json:
        json.dump(body, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    now = time.time()
    job, f = body["job"], body["factors"]
    out = [
        f"job {job['id']} ({_line(job['name'], 60)}) of {_line(job['user'], 40)}: {job['state']}"
    ]
    reason = body.get("reason") or ""
    if body.get("position") is not None:
        out.append(
            f"  place in line: {body['position']} of {body['in_line']}"
            f"  reason: {_line(reason, 40)}: {REASONS.get(reason, _line(reason))}"
        )
    elif reason:
        out.append(f"  reason: {_line(reason)}")
    out.append("  factors:")
    klass = f"{f['class']} ({f['class_rank']} of {len(f['classes'])}: {', '.join(f['classes'])})"
    out.append(f"    class          {_line(klass)}")
    out.append(
        f"    fair share     {f['fair_share']:.3f}  group {_line(f['group'], 40)}: "
        f"{f['usage_gpu_h']:.1f} GPU-h decayed (half-life {f['half_life_days']:g} d), "
        f"share {f['share']:g}"
    )
    if f["quotas"]:
        for q in f["quotas"]:
            pool = q["pool"] or "all pools"
            state = "OVER" if q["over"] else "within"
            out.append(
                f"    quota          {state}: {q['used_gpu_h']:.1f} of {q['limit_gpu_h']:g} "
                f"GPU-h this week ({_line(pool, 40)})"
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
        out.append(f"  reservation: {_line(res['host'], 60)} from {_when(res['start'], now)}")
    est = body["estimate"]
    if est["start"] is not None:
        out.append(f"  estimated start: {_when(est['start'], now)} on {_line(est['host'], 60)}")
    elif body.get("position") is not None:
        out.append(f"  estimated start: unknown ({_line(est['why'])})")
    ahead = body.get("ahead", [])
    if ahead:
        out.append(f"  ahead of it ({body['ahead_count']}):")
        out.append("    ID       USER         GPUS CLASS    SHARE  REASON")
        for w in ahead:
            ref = ("j" if w["kind"] == "job" else "c") + str(w["id"])
            over = " over-quota" if w["over_quota"] else ""
            out.append(
                f"    {ref:<8} {_line(w['user'], 12):<12} {w['gpus']:>4} {_line(w['class'], 8):<8}"
                f" {w['fair_share']:.3f}  {_line(w['reason'], 24)}{over}"
            )
        if body["ahead_count"] > len(ahead):
            out.append(f"    … and {body['ahead_count'] - len(ahead)} more")
    print("\n".join(out))
    return EXIT_OK


def quota(client: HeadClient, a: argparse.Namespace) -> int:
    body = client.call("quota")
    if a.json:
        json.dump(body, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    rows = body["quotas"]
    since = time.strftime("%a %Y-%m-%d %H:%M", time.localtime(body["week_start"]))
    if not rows:
        print("no quotas configured (scheduler.quotas in hosts.yaml)")
        return EXIT_OK
    print(f"weekly GPU-hour quotas, this week since {since}")
    print(f"{'GROUP':<16} {'POOL':<12} {'USED':>9} {'LIMIT':>9} {'USE%':>6}  STATE")
    for q in rows:
        limit = q["limit_gpu_h"]
        pct = 100.0 * q["used_gpu_h"] / limit if limit else 100.0
        state = "over: its jobs run only on idle GPUs, preemptible" if q["over"] else "within"
        print(
            f"{_line(q['group'], 16):<16} {_line(q['pool'] or '(all)', 12):<12}"
            f" {q['used_gpu_h']:>9.1f} {limit:>9g} {pct:>5.0f}%  {state}"
        )
    return EXIT_OK
