"""What the head knows that the hosts' readings cannot show, as health findings.

Cards the head fenced (critical) or an admin drained (a note); processes on a GPU
where their owner holds no job or claim (``ROGUE``), or holds one on another GPU of
that host (``STRAY``); and jobs whose GPUs have sat at 0% past the head's idle
limit. The health view lists them beside the hosts' own problems.
"""

from __future__ import annotations

from gputui.health.finding import Finding
from gputui.text import clean
from gputui.ui.head_view import HeadView


def head_findings(view: HeadView, now: float) -> list[Finding]:
    out: list[Finding] = []
    for gpu in view.gpus:
        why = gpu.reason or "no reason given"
        if gpu.state == "unhealthy":
            out.append(
                Finding(
                    "fenced",
                    "crit",
                    gpu.host,
                    gpu.index,
                    f"fenced by the head: {why}",
                    "no new claim or job lands on it until the condition clears",
                    f"fix the cause, or: gputui unfence {gpu.host}:{gpu.index} --reason ...",
                    why,
                    gpu.uuid,
                    "FENCE",
                )
            )
        elif gpu.state == "drained":
            out.append(
                Finding(
                    "drained",
                    "info",
                    gpu.host,
                    gpu.index,
                    f"drained: {why}",
                    "an admin keeps new work off it; what runs there finishes",
                    f"when it is back: gputui undrain {gpu.host}:{gpu.index}",
                    why,
                    gpu.uuid,
                    "DRAIN",
                )
            )
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
                subject=str(flag.pid),
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
                subject=str(job.id),
            )
        )
    return out
