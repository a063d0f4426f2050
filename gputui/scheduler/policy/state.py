"""What one scheduling pass (``passes.Pass``) keeps while it walks the line.

The cluster as the pass changes it (free GPUs, holds, GPUs coming free, victims,
reservations) and what it has decided, in a ``PassState``; and the work it shares
between requests: per *shape* (the same pool, host, model, named GPUs and barred
hosts) in a ``Shape``, per shape and size in a ``Sized``. A request looks its
``Sized`` up once; everything else it needs hangs off that, so the hot paths hash
no tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.scheduler.policy.bookings import by_card, until_free
from gputui.scheduler.policy.model import (
    DEFAULT_VENDOR,
    INF,
    LAST,
    ClusterView,
    GpuSlot,
    Place,
    Preempt,
    Running,
    Wait,
    Want,
    by_host,
)

Room = tuple[tuple[int, int, str], str, tuple[int, ...], list[GpuSlot], list[str]]
"""(its rank among hosts, host, victims, free GPUs, GPUs coming free) for a preemptor."""

RoomEntry = tuple[tuple[int, int, str], str, int, int, Room | None]
"""In a preemption heap: (rank, host, host version, 0 when exact and 1 for a bound,
the room when exact)."""


@dataclass(slots=True)
class Hold:
    """GPUs held on a host until ``end`` (a running job, or one placed this pass)."""

    end: float
    uuids: tuple[str, ...]
    running: Running | None = None


@dataclass(slots=True)
class Reservation:
    want: Want
    start: float
    spare: int
    """GPUs (that the reserved request fits) free at ``start`` beyond what it needs."""
    host: str = ""
    sized: Sized | None = None
    why: str | None = None
    """Why its request waits, given at the end of the pass."""

    @property
    def start_at(self) -> float | None:
        return None if self.start == INF else self.start


@dataclass(slots=True)
class Shape:
    """Work shared by the requests of one shape, whatever their size or class."""

    counts: dict[str, tuple[int, int, int, int, int]] | None = None
    """``PassState.counts``."""
    fit: dict[str, tuple[frozenset[str], bool]] = field(default_factory=dict)
    """Per host: the uuids of its GPUs the shape fits, and whether that is all of them."""
    free_soon: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per host: (host version, GPUs free or coming free for no one)."""
    timeline: dict[str, tuple[int, int, list[tuple[float, int]]]] = field(default_factory=dict)
    """Per host: (host version, ``rooms.timeline``)."""
    no_preempt: list[tuple[int, int]] = field(default_factory=list)
    """(size, class)es that found no room to preempt for. Room only gets scarcer in a
    pass (free GPUs, victims and unreserved hosts are used up, and a preemption
    frees no more than its victims held), and a bigger request or a lower class
    can only do worse, so none of those or worse finds any."""
    no_reserve: float = INF
    """The fewest GPUs for which every host that could hold it is reserved."""


@dataclass(slots=True)
class Sized:
    """What a pass knows about requests of one shape and size (they find the same
    room)."""

    shape: Shape
    fixed: str | None
    """The reason they all wait whatever else happens (``static_reason``), or None."""
    fail: float | None = None
    """The soonest end with which placement failed (free GPUs only get fewer, so a
    request ending no sooner fails too)."""
    why: str | None = None
    """Their reason at the end of the pass, when they have no reservation."""
    candidates: list[str] | None = None
    """The hosts that could ever hold them, by name."""
    hosts: set[str] | None = None
    """The same as a set, once they have a heap (a change on one of these marks it)."""
    res_heap: list[tuple[float, str, int, int]] | None = None
    """Reservations: (start, host, host version, spare)."""
    room_heaps: dict[int, list[RoomEntry]] = field(default_factory=dict)
    """Preemption, per class."""
    room_memo: dict[tuple[int, str], tuple[int, Room | None]] = field(default_factory=dict)
    """Per (class, host): (host version, ``Preemptor``'s room there)."""
    fit_at_start: bool | None = None
    room_reserved: list[Want] | None = None
    """The requests holding reservations on hosts with room for these at the end."""


@dataclass(slots=True)
class Kin:
    """Requests of one shape, size, class, quota state and kind with no reservation:
    the pass treats them alike, and they wait for the same reason."""

    sized: Sized
    first: Want
    why: str | None = None
    """Given at the end of the pass."""
    start_at: None = None
    host: None = None
    """They have no reservation."""


Kind = tuple[str, str, bool, bool, bool, bool, bool, str | None, bool]
"""(pool, model, healthy, drained, free, fenced, of the default vendor, MIG profile,
MIG enabled)."""


class PassState:
    """The cluster as one pass changes it, what it has decided so far, and the work
    its requests share about which GPUs of a host a shape fits.

    ``passes.Pass`` owns one and walks the line over it; its ``rooms.Preemptor`` and
    ``rooms.Reserver`` are given it to work on."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.now = view.now
        self.hosts = by_host(view.gpus)
        self.free: dict[str, list[GpuSlot]] = {
            h: [g for g in slots if g.free] for h, slots in self.hosts.items()
        }
        """Per host: its free GPUs, clean cards first (then by index)."""
        self.any_last = any(g.last for g in view.gpus)
        """Whether any card is one placement avoids (``GpuSlot.last``): only then does
        placement count them."""
        if self.any_last:
            for free in self.free.values():
                free.sort(key=LAST)
        self.free_ids: set[str] = {g.uuid for slots in self.free.values() for g in slots}
        self.total_free = len(self.free_ids)
        self.kinds: dict[str, dict[Kind, int]] = {}
        """Per host: how many GPUs of each (pool, model, healthy, drained, free, fenced,
        of the default vendor, MIG profile, MIG enabled) (``Want.fits``'s rules, counted
        by kind)."""
        for host, slots in self.hosts.items():
            kinds = self.kinds[host] = {}
            for g in slots:
                kind = (
                    g.pool,
                    g.model,
                    g.healthy,
                    g.drained,
                    g.free,
                    g.fenced,
                    g.vendor == DEFAULT_VENDOR,
                    g.mig_profile,
                    g.mig_enabled,
                )
                kinds[kind] = kinds.get(kind, 0) + 1
        self.holds: dict[str, list[Hold]] = {h: [] for h in self.hosts}
        self.running_by_host: dict[str, list[Running]] = {}
        self.soon: dict[str, list[str]] = {}
        """Per host: GPUs of stopping jobs (promised to someone or not)."""
        for run in view.running:
            end = INF if run.ends_at is None else run.ends_at
            self.holds.setdefault(run.host, []).append(Hold(end, run.gpus, run))
            self.running_by_host.setdefault(run.host, []).append(run)
            if run.stopping:
                self.soon.setdefault(run.host, []).extend(run.gpus)
        self.promised: set[str] = set()
        self.victims: set[int] = set()
        self.reserved: dict[str, Reservation] = {}
        self.place: list[Place] = []
        self.wait: list[Wait] = []
        self.preempt: list[Preempt] = []
        self.version: dict[str, int] = {}
        """Per host: bumped whenever what reservations or preemption read there changes
        (``changed``)."""
        self.heaped: list[Sized] = []
        """Those with a heap (``heap_for``), to mark when a host changes for the better."""
        self._uuids: dict[str, frozenset[str]] = {}
        self.booked = by_card(view.bookings, view.now)
        """Per card: the bookings not yet over (empty: no booking, nothing to check)."""
        self.booked_until = until_free(self.booked)
        """Per booked card: when the last booking on it ends (reservations count it
        free no sooner)."""

    def changed(self, host: str) -> None:
        """Note that what reservations or preemption read on ``host`` changed."""
        self.version[host] = self.version.get(host, 0) + 1

    def take(self, host: str, taken: set[str]) -> None:
        """Free GPUs ``taken`` on ``host`` are free no more."""
        self.free[host] = [g for g in self.free[host] if g.uuid not in taken]
        self.free_ids -= taken
        self.total_free -= len(taken)

    def fit_on(self, want: Want, shape: Shape, host: str) -> tuple[frozenset[str], bool]:
        """The uuids of the GPUs on ``host`` that ``want``'s shape fits, and whether
        that is all of them."""
        memo = shape.fit.get(host)
        if memo is None:
            slots = self.hosts[host]
            fits = self.counts(want, shape)[host][0]
            if fits == len(slots):  # the usual case: all or none of a host's GPUs
                fitting = self._uuids_on(host)
            elif fits == 0:
                fitting = frozenset()
            else:
                fitting = frozenset(g.uuid for g in slots if want.fits(g))
            memo = shape.fit[host] = (fitting, fits == len(slots))
        return memo

    def _uuids_on(self, host: str) -> frozenset[str]:
        uuids = self._uuids.get(host)
        if uuids is None:
            uuids = self._uuids[host] = frozenset(g.uuid for g in self.hosts[host])
        return uuids

    def fitting_free(self, want: Want, shape: Shape, host: str) -> list[GpuSlot]:
        """The free GPUs on ``host`` that ``want``'s shape fits."""
        fitting, all_fit = self.fit_on(want, shape, host)
        free = self.free[host]
        return list(free) if all_fit else [g for g in free if g.uuid in fitting]

    def candidate_hosts(self, want: Want, sized: Sized) -> list[str]:
        """The hosts that could ever hold ``sized``'s requests, by name."""
        hosts = sized.candidates
        if hosts is None:
            counts = self.counts(want, sized.shape)
            hosts = sized.candidates = [h for h in sorted(self.hosts) if counts[h][0] >= want.gpus]
        return hosts

    def heap_for(self, want: Want, sized: Sized) -> list[str]:
        """The hosts for a new heap of ``sized``'s (noted in ``heaped``, so marks reach
        it)."""
        hosts = self.candidate_hosts(want, sized)
        if sized.hosts is None:
            sized.hosts = set(hosts)
            self.heaped.append(sized)
        return hosts

    def counts(self, want: Want, shape: Shape) -> dict[str, tuple[int, int, int, int, int]]:
        """Per host, of the GPUs ``want`` fits: (all, usable, healthy, free at the
        start, healthy or fenced), counted by kind of GPU rather than one by one
        (requests naming GPUs are counted one by one)."""
        if shape.counts is not None:
            return shape.counts
        counts = {}
        for host, slots in self.hosts.items():
            if want.named:
                fit = [g for g in slots if want.fits(g)]
                counts[host] = (
                    len(fit),
                    sum(1 for g in fit if g.healthy and not g.drained),
                    sum(1 for g in fit if g.healthy),
                    sum(1 for g in fit if g.free),
                    sum(1 for g in fit if g.healthy or g.fenced),
                )
                continue
            if host in want.barred or (want.host is not None and host != want.host):
                counts[host] = (0, 0, 0, 0, 0)
                continue
            total = usable = healthy = free = fenced = 0
            model = want.model.lower() if want.model is not None else None
            for kind, n in self.kinds[host].items():
                pool, name, ok, drained, is_free, off, default, profile, whole_mig = kind
                if whole_mig or profile != want.mig:
                    continue
                if want.pool is None and not default:
                    continue  # another vendor's card: only its pool takes it (``Want.fits``)
                if want.pool is not None and pool != want.pool:
                    continue
                if model is not None and model not in name.lower():
                    continue
                total += n
                usable += n if ok and not drained else 0
                healthy += n if ok else 0
                free += n if is_free else 0
                fenced += n if ok or off else 0
            counts[host] = (total, usable, healthy, free, fenced)
        shape.counts = counts
        return counts
