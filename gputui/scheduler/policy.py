"""Scheduling policy: pure functions from a view of the cluster to decisions.

No I/O and no database here: the daemon builds a ``ClusterView`` from the store
and the live host states, calls ``decide``, and applies what comes back. That
keeps the policy testable on its own and replaceable (the priority, fair-share
and backfill policy plugs in with the same signature).

The order here is first come, first served over jobs and claims together; each
is placed best-fit: on the host with the fewest free GPUs that still fits, so
big holes stay open for big requests. A request that cannot be placed now waits
with a reason a person understands; later requests that fit may start meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

# Reasons, as the Reason column shows them (Slurm's names where they exist).
RESOURCES = "Resources"
PRIORITY = "Priority"
DRAINED = "Drained"
HOST_DOWN = "HostDown"
HELD = "Held"
LOGIN_USER = "LoginUser"
"""Only hosts where the head logs in as another user (who runs only their own jobs)
could take it."""


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """One GPU as placement sees it."""

    uuid: str
    host: str
    index: int
    pool: str = "default"
    model: str = ""
    drained: bool = False
    """Drained by an admin (the GPU or its whole host)."""
    healthy: bool = True
    """False when the GPU is lost, in error, or its host is unreachable."""
    busy: bool = False
    """Allocated to a job or a claim."""

    @property
    def free(self) -> bool:
        return not self.busy and not self.drained and self.healthy


@dataclass(frozen=True, slots=True)
class Want:
    """A job or a claim waiting for GPUs."""

    kind: str
    """``job`` or ``claim``."""
    id: int
    gpus: int
    user: str = ""
    pool: str | None = None
    host: str | None = None
    model: str | None = None
    named: tuple[str, ...] = ()
    """Specific GPU uuids (a claim of named cards); empty for any ``gpus`` free ones."""
    since: float = 0.0
    barred: frozenset[str] = frozenset()
    """Hosts this request may not run on (e.g. the head logs in there as someone else)."""

    def fits(self, gpu: GpuSlot) -> bool:
        """Whether ``gpu`` is of the kind this request asks for (free or not)."""
        if gpu.host in self.barred:
            return False
        if self.named:
            return gpu.uuid in self.named
        if self.pool is not None and gpu.pool != self.pool:
            return False
        if self.host is not None and gpu.host != self.host:
            return False
        return self.model is None or self.model.lower() in gpu.model.lower()


@dataclass(frozen=True, slots=True)
class ClusterView:
    gpus: tuple[GpuSlot, ...]
    waiting: tuple[Want, ...]
    """In the order they arrived."""


@dataclass(frozen=True, slots=True)
class Place:
    kind: str
    id: int
    host: str
    gpu_uuids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Wait:
    kind: str
    id: int
    reason: str


@dataclass(frozen=True, slots=True)
class Decisions:
    place: tuple[Place, ...] = ()
    wait: tuple[Wait, ...] = field(default_factory=tuple)


Policy = Callable[[ClusterView], Decisions]


def _by_host(gpus: Iterable[GpuSlot]) -> dict[str, list[GpuSlot]]:
    hosts: dict[str, list[GpuSlot]] = {}
    for gpu in gpus:
        hosts.setdefault(gpu.host, []).append(gpu)
    for slots in hosts.values():
        slots.sort(key=lambda g: g.index)
    return hosts


def best_fit(want: Want, hosts: dict[str, list[GpuSlot]], taken: set[str]) -> Place | None:
    """The placement for ``want``: all on one host, the host with fewest free GPUs."""
    if want.named:
        chosen = [g for slots in hosts.values() for g in slots if g.uuid in want.named]
        if len(chosen) != len(set(want.named)) or len({g.host for g in chosen}) != 1:
            return None
        if all(g.free and g.uuid not in taken for g in chosen):
            return Place(want.kind, want.id, chosen[0].host, tuple(g.uuid for g in chosen))
        return None
    best: tuple[int, str, list[GpuSlot]] | None = None
    for host, slots in hosts.items():
        free = [g for g in slots if g.free and g.uuid not in taken and want.fits(g)]
        if len(free) < want.gpus:
            continue
        key = (len(free), host)
        if best is None or key < (best[0], best[1]):
            best = (len(free), host, free)
    if best is None:
        return None
    return Place(want.kind, want.id, best[1], tuple(g.uuid for g in best[2][: want.gpus]))


def why_waiting(want: Want, hosts: dict[str, list[GpuSlot]], taken: set[str]) -> str:
    """The reason a request that could not be placed is waiting."""
    could_hold = [
        slots for slots in hosts.values() if sum(1 for g in slots if want.fits(g)) >= want.gpus
    ]
    if not could_hold:
        anywhere = replace(want, barred=frozenset())
        if want.barred and any(
            sum(1 for g in slots if anywhere.fits(g)) >= want.gpus for slots in hosts.values()
        ):
            return LOGIN_USER
        return RESOURCES
    usable = [
        slots
        for slots in could_hold
        if sum(1 for g in slots if want.fits(g) and g.healthy and not g.drained) >= want.gpus
    ]
    if not usable:
        healthy = any(
            sum(1 for g in slots if want.fits(g) and g.healthy) >= want.gpus for slots in could_hold
        )
        return DRAINED if healthy else HOST_DOWN
    # Free now but given to an earlier request in this same pass: it waits its turn.
    if any(sum(1 for g in slots if want.fits(g) and g.free) >= want.gpus for slots in usable):
        return PRIORITY
    return RESOURCES


def decide(view: ClusterView) -> Decisions:
    """First come, first served, best fit; every request not placed gets its reason."""
    hosts = _by_host(view.gpus)
    taken: set[str] = set()
    placed: list[Place] = []
    waits: list[Wait] = []
    for want in view.waiting:
        place = best_fit(want, hosts, taken)
        if place is None:
            waits.append(Wait(want.kind, want.id, why_waiting(want, hosts, taken)))
            continue
        taken.update(place.gpu_uuids)
        placed.append(place)
    return Decisions(tuple(placed), tuple(waits))


def impossible(want: Want, gpus: Sequence[GpuSlot]) -> str | None:
    """Why no host could ever satisfy ``want`` (None when some host could).

    Only the cluster's shape counts here (which GPUs exist), not what is busy,
    drained or down now: those pass, and the request waits with its reason.
    """
    known_pools = sorted({g.pool for g in gpus})
    known_hosts = sorted({g.host for g in gpus})
    if want.pool is not None and want.pool not in known_pools:
        shown = ", ".join(known_pools[:8]) or "none"
        return f"no pool named {want.pool!r} (pools: {shown})"
    if want.host is not None and want.host not in known_hosts:
        shown = ", ".join(known_hosts[:8]) or "none"
        return f"no host named {want.host!r} (hosts: {shown})"
    if want.named:
        missing = [u for u in want.named if u not in {g.uuid for g in gpus}]
        if missing:
            return f"no GPU {missing[0]!r}"
        if len({g.host for g in gpus if g.uuid in want.named}) > 1:
            return "the GPUs named are on different hosts; all of a request's GPUs are on one"
        return None
    hosts = _by_host(gpus)
    most = max((sum(1 for g in slots if want.fits(g)) for slots in hosts.values()), default=0)
    if most < want.gpus:
        where = []
        if want.pool:
            where.append(f"pool {want.pool}")
        if want.host:
            where.append(f"host {want.host}")
        if want.model:
            where.append(f"model {want.model}")
        scope = f" ({', '.join(where)})" if where else ""
        return (
            f"{want.gpus} GPUs asked for, but no host{scope} has more than {most}; "
            "all of a job's GPUs are on one host"
        )
    return None
