"""What the head knows that the hosts' readings cannot show, as health findings.

Processes on a GPU where their owner holds no job or claim (``ROGUE``), or holds one
on another GPU of that host (``STRAY``), and jobs whose GPUs have sat at 0% past the
head's idle limit: the health view lists them beside the hosts' own problems.
"""

from __future__ import annotations

from gputui.health.problems import Finding
from gputui.text import clean
from gputui.ui.head_view import HeadView


def head_findings(view: HeadView, now: float) -> list[Finding]:
    out: list[Finding] = []
    for flag in view.flags:
        rogue = flag.kind == "no-allocation"
        who = f"pid {flag.pid} ({clean(flag.user, 32)}, {clean(flag.name, 48)})"
        out.append(
            Finding(
                "rogue-process" if rogue else "stray-process",
                "warn",
                flag.host,
                flag.gpu_index,
                f"{flag.label}: {who}",
                "a process whose owner holds no job or claim on this host"
                if rogue
                else "a process on a GPU other than the ones its owner holds here",
                "ask the owner to claim the GPU or stop it; an admin may signal it (T, K)",
                f"pid {flag.pid}",
                flag.gpu_uuid,
            )
        )
    for job in view.jobs:
        idle = view.idle_for(job, now)
        if idle is None or job.host is None:
            continue
        out.append(
            Finding(
                "idle-job",
                "info",
                job.host,
                None,
                f"job {job.id} ({clean(job.user, 32)}) idle for {idle / 3600:.1f} h",
                "its GPUs have shown 0% utilisation past the head's idle limit",
                "ask the owner; cancel it if it is stuck",
                f"job {job.id}",
            )
        )
    return out
