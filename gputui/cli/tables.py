"""The tables ``gputui queue``, ``gputui claims`` and ``gputui audit`` print (Slurm-like
columns)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gputui.cli.flagged import idle_reason
from gputui.durations import elapsed_text
from gputui.printable import shown


def when(epoch: float | None) -> str:
    return "-" if not epoch else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def queue_table(jobs: Sequence[dict[str, Any]], now: float, idle_after_s: Any = None) -> list[str]:
    """Slurm-like columns: JOBID USER NAME STATE GPUS HOST TIME REASON (a running job
    idle past the head's limit, ``idle_after_s``, says ``Idle 2h05m`` there)."""
    rows = [("JOBID", "USER", "NAME", "STATE", "GPUS", "HOST", "TIME", "REASON")]
    for job in jobs:
        started = job.get("started_at")
        ended = job.get("ended_at")
        elapsed = elapsed_text((ended or now) - started) if started else "0:00"
        rows.append(
            (
                str(job["id"]),
                shown(job.get("user", ""), 12),
                shown(job.get("name", ""), 20),
                shown(job.get("state", ""), 10),
                str(job.get("gpus", "")),
                shown(job.get("host") or "-", 16),
                elapsed,
                shown(idle_reason(job, idle_after_s, now) or job.get("reason") or "-", 40),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def claims_table(claims: Sequence[dict[str, Any]], now: float) -> list[str]:
    rows = [("CLAIM", "USER", "STATE", "GPUS", "HOST", "AGE", "EXPIRES", "NOTE")]
    for c in claims:
        since = c.get("granted_at") or c.get("created_at") or now
        expires = c.get("expires_at")
        rows.append(
            (
                f"c{c['id']}",
                shown(c.get("user", ""), 12),
                shown(c.get("state", ""), 9)
                + (
                    ""
                    if c.get("state") == "active"
                    else f" ({c.get('reason') or c.get('release_reason') or ''})"
                ),
                str(len(c.get("gpu_uuids") or []) or c.get("gpus", "")),
                shown(c.get("host") or "-", 16),
                elapsed_text(now - since),
                when(expires) if expires else "-",
                shown(c.get("note") or "", 30),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def audit_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """TIME ADMIN ACTION TARGET OWNER REASON OUTCOME: who did what to whose work, why,
    and what came of it."""
    out = [("TIME", "ADMIN", "ACTION", "TARGET", "OWNER", "REASON", "OUTCOME")]
    for r in rows:
        out.append(
            (
                when(r.get("time")),
                shown(r.get("user") or "", 12),
                shown(r.get("action") or "", 13),
                shown(r.get("target") or "", 16),
                shown(r.get("owner") or "-", 16),
                shown(r.get("reason") or "-", 40),
                shown(r.get("outcome") or "-", 60),
            )
        )
    widths = [max(len(r[i]) for r in out) for i in range(len(out[0]))]
    return ["  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in out]
