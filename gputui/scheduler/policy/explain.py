"""Why a job waits and when it may start: ``gputui explain``'s pure part.

``estimate_start`` plays the line forward from the time limits: the work running
now ends at its limit, and every request ahead of the job (then the job itself)
starts at the soonest time some host has room for it for as long as its limit,
each GPU free from then on until the request's end. Work with no limit never
ends in that projection, so behind it there is no estimate: that is said, not
guessed. Preemption and jobs submitted later are not foreseen.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.scheduler.policy.model import (
    DRAINED,
    FENCED,
    HOST_DOWN,
    INF,
    LOGIN_USER,
    RESOURCES,
    ClusterView,
    GpuSlot,
    Want,
    static_reason,
)

MAX_AHEAD = 300
"""Beyond this many requests ahead, no projection is made (it would be noise)."""

NO_ROOM_EVER = {
    DRAINED: "the GPUs that could take it are drained: no start until an admin undrains them",
    FENCED: (
        "the GPUs that could take it are fenced (a hardware fault) or show a problem"
        " placement never uses, until it clears"
    ),
    HOST_DOWN: "the hosts that could take it are not answering",
    LOGIN_USER: "only hosts the head reaches as another user could take it",
    RESOURCES: "no host has enough GPUs of the kind it asks for",
}
"""Why there is no estimate when no usable host could ever hold the job: what keeps
the GPUs out of use, not the work on them."""


@dataclass(frozen=True, slots=True)
class Projection:
    start: float | None
    """Estimated start (epoch s); None: no estimate."""
    host: str | None = None
    why_none: str = ""


def line_of(view: ClusterView) -> list[Want]:
    return sorted(view.waiting, key=Want.line_key)


def estimate_start(view: ClusterView, target: Want, opens_at: float | None = None) -> Projection:
    """When ``target`` would start if everything ran to its time limit.

    ``opens_at``: when the off-hours window next opens (for a night job)."""
    line = line_of(view)
    ahead = line[: line.index(target)] if target in line else line
    if len(ahead) > MAX_AHEAD:
        return Projection(None, why_none=f"more than {MAX_AHEAD} requests ahead")
    busy: dict[str, list[tuple[float, float]]] = {}
    """Per GPU: the intervals it is taken."""
    now = view.now
    for run in view.running:
        end = INF if run.ends_at is None else max(run.ends_at, now)
        if run.stopping:
            end = now + view.grace_s
        for uuid in run.gpus:
            busy.setdefault(uuid, []).append((now, end))
    hosts: dict[str, list[GpuSlot]] = {}
    for g in view.gpus:
        hosts.setdefault(g.host, []).append(g)
    blocked = static_reason(target, hosts)
    if blocked is not None:
        return Projection(None, why_none=NO_ROOM_EVER.get(blocked, blocked))
    usable = [g for g in view.gpus if g.healthy and not g.drained]
    for want in [*ahead, target]:
        if want.blocked is not None and want is not target:
            continue
        earliest = now
        if want.off_hours_only and opens_at is not None:
            earliest = max(earliest, opens_at)
        got = _soonest(want, usable, busy, earliest)
        if got is None:
            if want is target:
                return Projection(
                    None, why_none="no room for it before work with no time limit ends"
                )
            continue
        start, host, uuids = got
        end = INF if want.time_limit_s is None else start + want.time_limit_s
        if want is target:
            return Projection(start, host)
        for uuid in uuids:
            busy.setdefault(uuid, []).append((start, end))
    return Projection(None, why_none="not in line")


def _free_from(intervals: list[tuple[float, float]], start: float, end: float) -> bool:
    return all(e <= start or s >= end for s, e in intervals)


def _soonest(
    want: Want,
    gpus: list[GpuSlot],
    busy: dict[str, list[tuple[float, float]]],
    earliest: float,
) -> tuple[float, str, list[str]] | None:
    """The soonest (start, host, GPUs) with room for ``want`` for its whole limit:
    best fit (fewest free fitting GPUs) among the hosts with room at that time."""
    by_host: dict[str, list[GpuSlot]] = {}
    for g in gpus:
        if want.fits(g):
            by_host.setdefault(g.host, []).append(g)
    if not any(len(slots) >= want.gpus for slots in by_host.values()):
        return None
    ends = {e for iv in busy.values() for _, e in iv if earliest < e < INF}
    for t in sorted({earliest} | ends):
        end = INF if want.time_limit_s is None else t + want.time_limit_s
        best: tuple[int, str, list[str]] | None = None
        for host, slots in sorted(by_host.items()):
            free = [g.uuid for g in slots if _free_from(busy.get(g.uuid, []), t, end)]
            if len(free) >= want.gpus and (best is None or len(free) < best[0]):
                best = (len(free), host, free[: want.gpus])
        if best is not None:
            return t, best[1], best[2]
    return None
