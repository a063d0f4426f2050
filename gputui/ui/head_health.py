"""What the head knows that the hosts' readings cannot show, as health findings.

Built from the head's pushed state (``HeadView``) with the same constructors the
head uses for its own board (``gputui.health.outside``): fences, drains, flagged
processes, idle jobs and idle claims.
"""

from __future__ import annotations

from gputui.health import outside
from gputui.health.finding import Finding
from gputui.ui.head_view import HeadView


def head_findings(view: HeadView, now: float) -> list[Finding]:
    out: list[Finding] = []
    for gpu in view.gpus:
        if gpu.state == "unhealthy":
            out.append(outside.fenced(gpu.host, gpu.index, gpu.uuid, gpu.reason))
        elif gpu.state == "drained":
            out.append(outside.drained(gpu.host, gpu.index, gpu.uuid, gpu.reason))
    for flag in view.flags:
        out.append(
            outside.process_flag(
                flag.host, flag.gpu_index, flag.gpu_uuid, flag.pid, flag.user, flag.name, flag.kind
            )
        )
    for job in view.jobs:
        idle = view.idle_for(job, now)
        if idle is not None and job.host is not None:
            out.append(outside.idle_job(job.host, job.id, job.user, idle))
    for claim in view.claims:
        if claim.state != "active":
            continue
        found = outside.claim_idle(
            claim.host,
            claim.id,
            claim.user,
            idle_since=claim.idle_since,
            now=now,
            after_s=view.claim_idle_after_s,
            session=claim.session,
            idle_release_s=claim.idle_release_s,
        )
        if found is not None:
            out.append(found)
    return out
