"""Scheduling policy: pure functions from a view of the cluster to decisions.

No I/O and no database here: the daemon builds a ``ClusterView`` from the store
and the live host states, calls ``passes.decide``, and applies what comes back. That
keeps the policy testable on its own, benchmarked on its own (``bench/policy_pass.py``)
and checked against a plain reference implementation (``reference``). This module
holds the types and the reasons; ``passes`` does the pass.

One pass, in this order of rules:

1. **The line.** Waiting jobs and claims are ordered by: within quota before over
   quota; priority class (urgent first); fair-share factor (the group that used
   least against its share first); arrival. So a higher class never waits behind a
   lower one, and over-quota work only gets what nothing within quota wants.
2. **Placement.** Each, in line, goes on the host with the fewest free GPUs that
   fits (best fit, all of a request on one host), so big holes stay open; a host
   where clean cards alone fit it comes before one where it would need a card
   placement avoids (``GpuSlot.last``), and on a host clean cards are taken first.
3. **Preemption.** A job that cannot start, is within quota and could start if
   lower-class preemptible (or over-quota) jobs on one host stopped, preempts the
   fewest, youngest such victims, never one inside its minimum runtime. It then
   waits (``Preempting``) while they get SIGTERM, the grace period and SIGKILL.
   Claims never preempt and are never preempted.
4. **Reservations and backfill (EASY, per host).** A job that still cannot start
   reserves the host where it will fit soonest, judged by the time limits of what
   runs there (one reservation per host, given in line order). Later work may use
   a reserved host's free GPUs only if its own time limit ends before that start,
   or within the GPUs the reservation leaves spare. Work with no time limit never
   backfills, so a stream of small jobs can never hold a big one off.

Every request not placed waits with a reason, Slurm's names where they exist.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import NamedTuple

from gputui.common.i18n import N_
from gputui.scheduler.policy.lookup import no_host_words
from gputui.wire.words import Words, say

# Reasons, as the Reason column shows them (Slurm's names where they exist).
RESOURCES = "Resources"
PRIORITY = "Priority"
RESERVATION = "Reservation"
"""Free GPUs fit it, but they are reserved for a job ahead of it whose start its
time limit would delay."""
QUOTA = "QuotaExceeded"
OFF_HOURS = "OffHours"
DEPENDENCY = "Dependency"
CLASS_NOT_ALLOWED = "ClassNotAllowed"
PREEMPTING = "Preempting"
"""Lower-priority jobs are being preempted to make room for it."""
DRAINED = "Drained"
FENCED = "Fenced"
"""Only GPUs the head fenced off by itself (a critical hardware condition) could take it."""
HOST_DOWN = "HostDown"
HELD = "Held"
LOGIN_USER = "LoginUser"
ARRAY_LIMIT = "JobArrayTaskLimit"
"""Its array already has as many tasks running as its ``%N`` allows."""
"""Only hosts where the head logs in as another user (who runs only their own jobs)
could take it."""

INF = math.inf
DEFAULT_VENDOR = "nvidia"
"""The vendor whose cards a request without a pool takes (``vendors``)."""
LAST = attrgetter("last")
"""A card's sort key that puts clean cards first (``GpuSlot.last``)."""


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
    """False when the GPU is lost, in error, fenced, or its host is unreachable."""
    busy: bool = False
    """Allocated to a job or a claim."""
    fenced: bool = False
    """Fenced off by the head (then never ``healthy``): its own fence, or a problem
    placement never uses (``cards``); the reason says ``Fenced``."""
    last: bool = False
    """It shows a problem placement avoids (``cards``): used only when no clean card
    fits."""
    vendor: str = "nvidia"
    """``amd``: an AMD card, in a pool of its own (``vendors``): only a request naming
    its pool (or the card) takes it, so no placement mixes vendors."""
    mig_profile: str | None = None
    """A MIG slice's profile (``1g.10gb``): only a request for that profile takes it."""
    mig_enabled: bool = False
    """A card with MIG mode on: never placed as a whole card (its slices are)."""

    @property
    def free(self) -> bool:
        return not self.busy and not self.drained and self.healthy

    def held(self, busy: bool) -> GpuSlot:
        """This GPU, allocated (``busy``) or not: what a pass's caller sets."""
        return GpuSlot(
            self.uuid,
            self.host,
            self.index,
            self.pool,
            self.model,
            self.drained,
            self.healthy,
            busy,
            self.fenced,
            self.last,
            self.vendor,
            self.mig_profile,
            self.mig_enabled,
        )


_PAIR = struct.Struct(">dd").pack
_BITS = (1 << 64) - 1


def _line(want: Want) -> int:
    """``Want.line_key``: (over quota, rank, -fair, since, kind, id) as one integer.

    A non-negative float's bits, read as an integer, order as the float does: fair
    share is clamped to 0..1 (the highest goes first), arrival to 0 and up (NaN
    counts as 0); rank and id are clamped to 0..2^32 and 0..2^64. Both floats are
    packed at once, as this runs for every request of every pass."""
    fair, since = want.fair, want.since
    if not 0.0 <= fair <= 1.0:
        fair = 1.0 if fair > 1.0 else 0.0
    if not since > 0.0:
        since = 0.0
    both = int.from_bytes(_PAIR(fair + 0.0, since), "big")  # + 0.0: -0.0 is 0.0
    rank, ident = want.rank, want.id
    if not 0 <= rank <= _BITS >> 32:
        rank = 0 if rank < 0 else _BITS >> 32
    if not 0 <= ident <= _BITS:
        ident = 0 if ident < 0 else _BITS
    key = ((1 if want.over_quota else 0) << 32 | rank) << 64 | (_BITS - (both >> 64))
    key = (key << 64 | (both & _BITS)) << 1 | (0 if want.kind == "job" else 1)
    return key << 64 | ident


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
    group: str = ""
    rank: int = 0
    """Its priority class's place: 0 is the highest."""
    fair: float = 1.0
    """Its group's fair-share factor, 0..1: 1 for a group that used nothing lately."""
    over_quota: bool = False
    off_hours_only: bool = False
    """Its class starts only inside the off-hours window."""
    time_limit_s: float | None = None
    """None: no limit (it never backfills)."""
    preemptible: bool = False
    """It may be preempted: it may go on booked cards until the booking starts."""
    booking: int | None = None
    """``--booking ID``: it goes only on that booking's cards, while it is on."""
    blocked: str | None = None
    """A reason decided before placement (a dependency, a class not allowed): it
    waits with it and takes nothing."""
    mig: str | None = None
    """A MIG slice profile (``--mig 1g.10gb``): it takes free slices of that profile
    only; None: whole cards only, never a slice."""
    shape: tuple[object, ...] = field(default=(), init=False, compare=False, repr=False)
    """What decides which GPUs fit it (requests of one shape share cached work)."""
    line: int = field(default=0, init=False, compare=False, repr=False)
    """See ``line_key``."""
    sized: tuple[object, ...] = field(default=(), init=False, compare=False, repr=False)
    """(shape, gpus): requests that find the same room."""
    kin: tuple[object, ...] = field(default=(), init=False, compare=False, repr=False)
    """(shape, gpus, class, over quota, kind): requests the pass treats alike."""

    def fits(self, gpu: GpuSlot) -> bool:
        """Whether ``gpu`` is of the kind this request asks for (free or not)."""
        if gpu.host in self.barred or gpu.mig_enabled:
            return False
        if self.named:
            return gpu.uuid in self.named
        if self.mig != gpu.mig_profile:
            return False
        if self.pool is None:
            if gpu.vendor != DEFAULT_VENDOR:
                return False
        elif gpu.pool != self.pool:
            return False
        if self.host is not None and gpu.host != self.host:
            return False
        return self.model is None or self.model.lower() in gpu.model.lower()

    def line_key(self) -> int:
        """Its place in line (smaller goes first): within quota before over quota,
        then class, then fair share (highest first), then arrival, then claims
        after jobs, then id.

        One integer with those fields from the most significant bits down, in the
        same order as their tuple would be: a pass sorts 10,000 of these, and
        integers compare three times faster than tuples."""
        return self.line

    def __post_init__(self) -> None:
        # Worked out once here, not in every pass that sorts or groups 10,000 of them.
        shape = (
            self.pool,
            self.host,
            self.model,
            self.named,
            self.barred,
            self.preemptible,
            self.booking,
            self.mig,
        )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "line", _line(self))
        object.__setattr__(self, "sized", (shape, self.gpus))
        kin = (shape, self.gpus, self.rank, self.over_quota, self.kind)
        object.__setattr__(self, "kin", kin)


@dataclass(frozen=True, slots=True)
class Running:
    """A job or claim holding GPUs now: what preemption and reservations judge."""

    kind: str
    id: int
    host: str
    gpus: tuple[str, ...]
    rank: int = 0
    preemptible: bool = False
    """Its class is preemptible, or it was submitted ``--preemptible``."""
    over_quota: bool = False
    started_at: float = 0.0
    ends_at: float | None = None
    """When its time limit (a claim: its ``--for``) runs out; None: no limit."""
    stopping: bool = False
    """Already being killed or preempted: its GPUs come free within the grace period."""
    booking: int | None = None
    """The booking it runs in (``--booking ID``), if any."""


@dataclass(frozen=True, slots=True)
class Booked:
    """One booking as the policy sees it."""

    id: int
    user: str
    uuids: tuple[str, ...]
    start: float
    end: float
    maint: bool = False
    """A maintenance window (an admin's): its cards are drained for it."""

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


@dataclass(frozen=True, slots=True)
class ClusterView:
    gpus: tuple[GpuSlot, ...]
    waiting: tuple[Want, ...]
    """In any order: the policy puts them in line."""
    running: tuple[Running, ...] = ()
    now: float = 0.0
    off_hours: bool = True
    """Whether it is inside the off-hours window now."""
    preemption: bool = False
    min_runtime_s: float = 0.0
    grace_s: float = 10.0
    backfill: bool = True
    """False: strict order; nothing starts on a host reserved for a job ahead."""
    bookings: tuple[Booked, ...] = ()
    """Bookings not yet over (``bookings``): the pass keeps work off their cards."""


@dataclass(frozen=True, slots=True)
class Place:
    kind: str
    id: int
    host: str
    gpu_uuids: tuple[str, ...]


class Wait(NamedTuple):
    """A request that waits, and why (a tuple: a pass makes one for nearly every
    request in line, and a tuple is made three times faster than a dataclass)."""

    kind: str
    id: int
    reason: str
    start_at: float | None = None
    """Its reservation's start (estimated from time limits), when it holds one."""
    host: str | None = None
    """The host it holds a reservation on."""


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop job ``id`` (SIGTERM, grace, SIGKILL, requeue) to make room for ``for_id``."""

    id: int
    host: str
    for_kind: str
    for_id: int


@dataclass(frozen=True, slots=True)
class Decisions:
    place: tuple[Place, ...] = ()
    wait: tuple[Wait, ...] = field(default_factory=tuple)
    preempt: tuple[Preempt, ...] = ()


Policy = Callable[[ClusterView], Decisions]


def by_host(gpus: Iterable[GpuSlot]) -> dict[str, list[GpuSlot]]:
    """Each host's GPUs, in index order."""
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
    best: tuple[tuple[int, int, str], list[GpuSlot]] | None = None
    for host, slots in hosts.items():
        free = [g for g in slots if g.free and g.uuid not in taken and want.fits(g)]
        if len(free) < want.gpus:
            continue
        free.sort(key=LAST)  # clean cards first (a stable sort: then by index)
        key = (last_among(free[: want.gpus]), len(free), host)
        if best is None or key < best[0]:
            best = (key, free)
    if best is None:
        return None
    host = best[0][2]
    return Place(want.kind, want.id, host, tuple(g.uuid for g in best[1][: want.gpus]))


def last_among(chosen: Iterable[GpuSlot]) -> int:
    """How many of ``chosen`` are cards placement avoids (``GpuSlot.last``)."""
    return sum(1 for g in chosen if g.last)


def static_reason(want: Want, hosts: dict[str, list[GpuSlot]]) -> str | None:
    """Why ``want`` cannot run whatever else happens (shape, drains, fences, hosts
    down), or None when some host could hold it once work there ends.

    Drained when the GPUs would do but for drains; else Fenced when they would but
    for drains and fences; else HostDown."""
    could_hold = [
        slots for slots in hosts.values() if sum(1 for g in slots if want.fits(g)) >= want.gpus
    ]
    if not could_hold:
        if want.barred:
            anywhere = replace(want, barred=frozenset())
            if any(
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
        if healthy:
            return DRAINED
        fenced = any(
            sum(1 for g in slots if want.fits(g) and (g.healthy or g.fenced)) >= want.gpus
            for slots in could_hold
        )
        return FENCED if fenced else HOST_DOWN
    return None


def victims_for(need: int, candidates: Sequence[tuple[int, float, int]]) -> tuple[int, ...] | None:
    """The fewest, then youngest, victims whose GPUs add up to ``need``.

    ``candidates``: (GPUs it would free, started_at, id). Fewest: the smallest count
    ``c`` such that the ``c`` largest reach ``need``. Youngest: among sets of that
    count, youngest first, each pick kept only if the rest can still reach ``need``
    with the largest of what is left. None when all of them together are too few.
    """
    if need <= 0:
        return ()
    sizes = sorted((c[0] for c in candidates), reverse=True)
    total, count = 0, 0
    for size in sizes:
        total += size
        count += 1
        if total >= need:
            break
    else:
        return None
    chosen: list[int] = []
    left_need, left_slots = need, count
    pool = sorted(candidates, key=lambda c: (-c[1], c[2]))  # youngest first
    for i, (gpus, _started, job_id) in enumerate(pool):
        if left_slots == 0 or left_need <= 0:
            break
        rest = sorted((c[0] for c in pool[i + 1 :]), reverse=True)[: left_slots - 1]
        if gpus + sum(rest) >= left_need:
            chosen.append(job_id)
            left_need -= gpus
            left_slots -= 1
    return tuple(chosen) if left_need <= 0 else None


def impossible(want: Want, gpus: Sequence[GpuSlot]) -> str | None:
    """Why no host could ever satisfy ``want`` (None when some host could).

    Only the cluster's shape counts here (which GPUs exist), not what is busy,
    drained or down now: those pass, and the request waits with its reason.
    """
    words = impossible_words(want, gpus)
    return None if words is None else words.english()


def impossible_words(want: Want, gpus: Sequence[GpuSlot]) -> Words | None:
    """``impossible``'s line as the head's ``Words`` (its template and args)."""
    known_pools = sorted({g.pool for g in gpus})
    known_hosts = sorted({g.host for g in gpus})
    if want.pool is not None and want.pool not in known_pools:
        return no_pool_words(want.pool, known_pools)
    if want.host is not None and want.host not in known_hosts:
        return no_host_words(want.host, known_hosts)
    if want.named:
        missing = [u for u in want.named if u not in {g.uuid for g in gpus}]
        if missing:
            return say(N_("no GPU {gpu}"), gpu=repr(missing[0]))
        if len({g.host for g in gpus if g.uuid in want.named}) > 1:
            return say(
                N_("the GPUs named are on different hosts; all of a request's GPUs are on one")
            )
        return None
    hosts = by_host(gpus)
    most = max((sum(1 for g in slots if want.fits(g)) for slots in hosts.values()), default=0)
    if most < want.gpus:
        where: list[Words] = []
        if want.pool:
            where.append(say(N_("pool {pool}"), pool=want.pool))
        if want.host:
            where.append(say(N_("host {host}"), host=want.host))
        if want.model:
            where.append(say(N_("model {model}"), model=want.model))
        if want.mig:
            where.append(say(N_("MIG {mig} slices"), mig=want.mig))
        own: list[str] = []
        if want.pool is None:
            own = sorted({g.pool for g in gpus if g.vendor != DEFAULT_VENDOR})
        n, pools = want.gpus, ", ".join(own[:4])
        if where and own:  # cards only their pool takes (``vendors``): say how to ask
            return say(
                N_(
                    "{n} GPUs asked for, but no host ({scope}) has more than {most}; all of a"
                    " job's GPUs are on one host; {pools} cards are asked for with --pool"
                ),
                n=n, scope=tuple(where), most=most, pools=pools,
            )  # fmt: skip
        if where:
            return say(
                N_(
                    "{n} GPUs asked for, but no host ({scope}) has more than {most}; all of a"
                    " job's GPUs are on one host"
                ),
                n=n, scope=tuple(where), most=most,
            )  # fmt: skip
        if own:
            return say(
                N_(
                    "{n} GPUs asked for, but no host has more than {most}; all of a job's GPUs"
                    " are on one host; {pools} cards are asked for with --pool"
                ),
                n=n, most=most, pools=pools,
            )  # fmt: skip
        return say(
            N_(
                "{n} GPUs asked for, but no host has more than {most}; all of a job's GPUs are"
                " on one host"
            ),
            n=n, most=most,
        )  # fmt: skip
    return None


def no_pool_words(pool: str, known: Sequence[str]) -> Words:
    """``no pool named 'x' (pools: a, b)``: the first few known pools, or none."""
    shown = ", ".join(known[:8])
    if not shown:
        return say(N_("no pool named {pool} (pools: none)"), pool=repr(pool))
    return say(N_("no pool named {pool} (pools: {pools})"), pool=repr(pool), pools=shown)
