"""The scheduling pass of ``policy``, done fast enough for 10,000 waiting jobs.

The rules are ``policy``'s (its docstring); this module is how they are applied in
one sort and one walk down the line, with work shared between requests of one
*shape* (the same pool, host, model, named GPUs and barred hosts):

* which hosts could ever hold a shape, and why not (drained, down), is worked
  out once per shape and size;
* free GPUs only ever become fewer during a pass, so once a shape of some size
  fails to find room with some end time, every later request of that shape, at
  least that size, ending no sooner, fails too without looking (the same holds
  for preemption, whose candidates are only ever used up);
* when no GPU is free anywhere, placement is not tried at all.

``policy_ref`` applies the same rules the plain way (re-sort and re-scan for every
request); the benchmark times both and a test checks they decide the same.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from operator import attrgetter

from .policy import (
    DRAINED,
    HOST_DOWN,
    INF,
    OFF_HOURS,
    PREEMPTING,
    PRIORITY,
    QUOTA,
    RESERVATION,
    RESOURCES,
    ClusterView,
    Decisions,
    GpuSlot,
    Place,
    Preempt,
    Running,
    Wait,
    Want,
    _by_host,
    static_reason,
    victims_for,
)

_LINE = attrgetter("line")

_Room = tuple[tuple[int, int, str], str, tuple[int, ...], list[GpuSlot], list[str]]
"""(its rank among hosts, host, victims, free GPUs, GPUs coming free) for a preemptor."""


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


def end_of(want: Want, now: float) -> float:
    return INF if want.time_limit_s is None else now + want.time_limit_s


def start_on(
    want: Want,
    *,
    slots: list[GpuSlot],
    free: set[str],
    holds: list[Hold],
    now: float,
    grace_s: float,
    held_for_others: set[str],
) -> tuple[float, int] | None:
    """When ``want`` would fit on this host (from the time limits of what holds its
    GPUs) and how many of the GPUs it fits are spare then; None if it never fits."""
    fitting = {g.uuid for g in slots if want.fits(g)}
    if len(fitting) < want.gpus:
        return None
    have = len(fitting & free)
    events: list[tuple[float, int]] = []
    for hold in holds:
        count = sum(1 for u in hold.uuids if u in fitting and u not in held_for_others)
        if not count:
            continue
        end = max(hold.end, now)  # past its limit: it is being stopped now
        if hold.running is not None and hold.running.stopping:
            end = now + grace_s
        events.append((end, count))
    events.sort()
    start: float | None = now if have >= want.gpus else None
    for end, count in events:
        if start is not None and end > start:
            break
        have += count
        if start is None and have >= want.gpus:
            start = end
    if start is None:
        return None
    return start, have - want.gpus


class Pass:
    """One scheduling pass over a ``ClusterView``."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.now = view.now
        self.hosts = _by_host(view.gpus)
        self.free: dict[str, list[GpuSlot]] = {
            h: [g for g in slots if g.free] for h, slots in self.hosts.items()
        }
        self.free_ids: set[str] = {g.uuid for slots in self.free.values() for g in slots}
        self.total_free = len(self.free_ids)
        self.kinds: dict[str, dict[tuple[str, str, bool, bool, bool], int]] = {}
        """Per host: how many GPUs of each (pool, model, healthy, drained, free)."""
        for host, slots in self.hosts.items():
            kinds = self.kinds[host] = {}
            for g in slots:
                kind = (g.pool, g.model, g.healthy, g.drained, g.free)
                kinds[kind] = kinds.get(kind, 0) + 1
        self._counts: dict[tuple[object, ...], dict[str, tuple[int, int, int, int]]] = {}
        self.holds: dict[str, list[Hold]] = {h: [] for h in self.hosts}
        self.running_by_host: dict[str, list[Running]] = {}
        for run in view.running:
            end = INF if run.ends_at is None else run.ends_at
            self.holds.setdefault(run.host, []).append(Hold(end, run.gpus, run))
            self.running_by_host.setdefault(run.host, []).append(run)
        self.soon: dict[str, list[str]] = {}
        """Per host: GPUs of stopping jobs not yet promised to anyone."""
        for run in view.running:
            if run.stopping:
                self.soon.setdefault(run.host, []).extend(run.gpus)
        self.promised: set[str] = set()
        self.victims: set[int] = set()
        self.reserved: dict[str, Reservation] = {}
        self.place: list[Place] = []
        self.wait: list[Wait] = []
        self.preempt: list[Preempt] = []
        # Work shared between requests of one shape.
        self._static: dict[tuple[object, ...], str | None] = {}
        self._candidates: dict[tuple[object, ...], list[str]] = {}
        self._all_fit: dict[tuple[object, ...], bool] = {}
        self._fail: dict[tuple[object, ...], float] = {}
        """Per shape and size: the soonest end with which placement failed."""
        self._no_preempt: set[tuple[object, ...]] = set()
        self._res_heap: dict[tuple[object, ...], list[tuple[float, str, int, int]]] = {}
        self._version: dict[str, int] = {}
        self._heap_hosts: dict[tuple[object, ...], set[str]] = {}
        """Per (shape, size): the hosts that could ever hold it (those in its heaps)."""
        self._free_soon: dict[tuple[object, ...], tuple[int, int]] = {}
        self._room_memo: dict[tuple[object, ...], tuple[int, _Room | None]] = {}
        self._room_heaps: dict[
            tuple[object, ...], list[tuple[tuple[int, int, str], str, int, _Room | None]]
        ] = {}
        """Per host: bumped whenever what ``start_on`` reads there changes."""
        self._no_reserve: dict[tuple[object, ...], int] = {}
        """Per shape: the fewest GPUs for which every host that could hold it is reserved."""
        self._fit_at_start: dict[tuple[object, ...], bool] = {}
        self._room_reserved: dict[tuple[object, ...], list[Want]] = {}
        self._dead: set[tuple[object, ...]] = set()
        """(shape, size, class, over quota, kind)s for which nothing can be had any more
        this pass (by a request ending no sooner than the ``_fail`` end)."""
        self._undecided: list[tuple[Want, float | None, str | None]] = []
        """Waiting for a reason that depends on the whole pass (given at its end)."""

    # -- the walk -----------------------------------------------------------------

    def run(self) -> Decisions:
        one, dead, fail = self._one, self._dead, self._fail
        undecided = self._undecided
        now = self.now
        for want in sorted(self.view.waiting, key=_LINE):
            # The common case in a long line: a request whose shape, size and class
            # already found no room, no victims and no host to reserve, ending no
            # sooner than the one that found that. It waits; nothing is tried again.
            if want.blocked is None and not want.off_hours_only:
                failed = fail.get(want.sized)
                if failed is not None and want.kin in dead:
                    limit = want.time_limit_s
                    if (INF if limit is None else now + limit) >= failed:
                        undecided.append((want, None, None))
                        continue
            one(want)
        wait = self.wait
        reason = self._reason
        new = tuple.__new__  # a Wait made straight from its fields: the fastest way
        alike: dict[tuple[object, ...], str] = {}
        """A request with no reservation of its own has its shape and size's reason."""
        for want, start, host in undecided:
            if want.over_quota:
                why = QUOTA
            elif host is None:
                known = alike.get(want.sized)
                why = known if known is not None else alike.setdefault(want.sized, reason(want))
            else:
                why = reason(want)
            wait.append(new(Wait, (want.kind, want.id, why, start, host)))
        return Decisions(tuple(self.place), tuple(wait), tuple(self.preempt))

    def _one(self, want: Want) -> None:
        if want.blocked is not None:
            self._waits(want, want.blocked)
            return
        if want.off_hours_only and not self.view.off_hours:
            self._waits(want, OFF_HOURS)
            return
        key = (want.shape, want.gpus)
        if key not in self._static:
            self._static[key] = self._static_reason(want)
        fixed = self._static[key]
        if fixed is not None:
            self._waits(want, fixed)
            return
        end = end_of(want, self.now)
        failed = self._fail.get(key)
        if self.total_free < want.gpus:
            self._fail[key] = -INF  # never again this pass: free GPUs only get fewer
        elif failed is None or end < failed:
            if self._try_place(want, end):
                return
            self._fail[key] = end if failed is None else min(failed, end)
        if want.kind == "job" and self._try_preempt(want):
            return
        if want.kind == "job" and self._try_reserve(want):
            return
        self._undecided.append((want, None, None))
        if self._fail.get(key) is not None and self._hopeless(want):
            self._dead.add(want.kin)

    def counts(self, want: Want) -> dict[str, tuple[int, int, int, int]]:
        """Per host, of the GPUs ``want`` fits: (all, usable, healthy, free at the
        start), counted by kind of GPU rather than one by one (requests naming
        GPUs are counted one by one)."""
        counts = self._counts.get(want.shape)
        if counts is not None:
            return counts
        counts = {}
        for host, slots in self.hosts.items():
            if want.named:
                fit = [g for g in slots if want.fits(g)]
                counts[host] = (
                    len(fit),
                    sum(1 for g in fit if g.healthy and not g.drained),
                    sum(1 for g in fit if g.healthy),
                    sum(1 for g in fit if g.free),
                )
                continue
            if host in want.barred or (want.host is not None and host != want.host):
                counts[host] = (0, 0, 0, 0)
                continue
            total = usable = healthy = free = 0
            model = want.model.lower() if want.model is not None else None
            for (pool, name, ok, drained, is_free), n in self.kinds[host].items():
                if want.pool is not None and pool != want.pool:
                    continue
                if model is not None and model not in name.lower():
                    continue
                total += n
                usable += n if ok and not drained else 0
                healthy += n if ok else 0
                free += n if is_free else 0
            counts[host] = (total, usable, healthy, free)
        self._counts[want.shape] = counts
        return counts

    def _static_reason(self, want: Want) -> str | None:
        """``policy.static_reason``, from the counts by kind."""
        counts = self.counts(want).values()
        if not any(c[0] >= want.gpus for c in counts):
            return static_reason(want, self.hosts)  # LoginUser or Resources: rare
        if any(c[1] >= want.gpus for c in counts if c[0] >= want.gpus):
            return None
        return DRAINED if any(c[2] >= want.gpus for c in counts) else HOST_DOWN

    def _hopeless(self, want: Want) -> bool:
        """Whether, from now on in this pass, neither preemption nor a reservation
        can be had by a request like ``want`` (both only ever get harder)."""
        if want.kind != "job":
            return True
        preempt_done = (
            want.over_quota
            or not self.view.preemption
            or (want.shape, want.gpus, want.rank) in self._no_preempt
        )
        reserve_done = want.gpus >= self._no_reserve.get(want.shape, want.gpus + 1)
        return preempt_done and reserve_done

    def _waits(
        self, want: Want, reason: str, start: float | None = None, host: str | None = None
    ) -> None:
        self.wait.append(Wait(want.kind, want.id, reason, start, host))

    def _reason(self, want: Want) -> str:
        """Why it waits, judged once the pass is done: ``QuotaExceeded`` when it is
        over quota; ``Reservation`` when a host reserved for another has room for
        it still; ``Priority`` when GPUs free at the start would have held it; else
        ``Resources``."""
        if want.over_quota:
            return QUOTA  # whatever holds it back, the quota is why it is at the back
        key = want.sized
        if key not in self._fit_at_start:
            self._fit_at_start[key] = any(c[3] >= want.gpus for c in self.counts(want).values())
        if not self._fit_at_start[key]:
            return RESOURCES
        room = self._room_reserved.get(key)
        if room is None:
            candidates = set(self._candidate_hosts(want))
            room = [
                res.want
                for host, res in self.reserved.items()
                if host in candidates and len(self._fitting_free(want, host)) >= want.gpus
            ]
            self._room_reserved[key] = room
        others = len(room) > 1 or (len(room) == 1 and room[0] is not want)
        return RESERVATION if others else PRIORITY

    # -- placement ------------------------------------------------------------------

    def _candidate_hosts(self, want: Want) -> list[str]:
        key = (want.shape, want.gpus)
        hosts = self._candidates.get(key)
        if hosts is None:
            counts = self.counts(want)
            hosts = [h for h in sorted(self.hosts) if counts[h][0] >= want.gpus]
            self._candidates[key] = hosts
        return hosts

    def _fitting_free(self, want: Want, host: str) -> list[GpuSlot]:
        key = (want.shape, host)
        all_fit = self._all_fit.get(key)
        if all_fit is None:
            all_fit = all(want.fits(g) for g in self.hosts[host])
            self._all_fit[key] = all_fit
        free = self.free[host]
        return list(free) if all_fit else [g for g in free if want.fits(g)]

    def _try_place(self, want: Want, end: float) -> bool:
        best: tuple[int, str, list[GpuSlot]] | None = None
        for host in self._candidate_hosts(want):
            free = self._fitting_free(want, host)
            if len(free) < want.gpus:
                continue
            chosen = self._respecting_reservation(want, host, free, end)
            if chosen is None:
                continue
            key = (len(free), host)
            if best is None or key < (best[0], best[1]):
                best = (len(free), host, chosen)
        if best is None:
            return False
        _, host, chosen = best
        self._take(want, host, chosen, end)
        return True

    def _respecting_reservation(
        self, want: Want, host: str, free: list[GpuSlot], end: float
    ) -> list[GpuSlot] | None:
        """The GPUs ``want`` may take on ``host`` given its reservation, or None."""
        if want.named:
            named = [g for g in free if g.uuid in want.named]
            if len(named) != len(set(want.named)):
                return None
            free = named
        res = self.reserved.get(host)
        if res is None or res.want is want:
            return free[: want.gpus]
        if not self.view.backfill:
            return None
        if end < INF and end <= res.start:
            return free[: want.gpus]
        # Past its start: only GPUs the reserved one does not fit, then its spare.
        others = [g for g in free if not res.want.fits(g)]
        theirs = [g for g in free if res.want.fits(g)]
        chosen = others[: want.gpus]
        short = want.gpus - len(chosen)
        if short > res.spare:
            return None
        return chosen + theirs[:short]

    def _take(self, want: Want, host: str, chosen: list[GpuSlot], end: float) -> None:
        uuids = tuple(g.uuid for g in chosen)
        taken = set(uuids)
        self.free[host] = [g for g in self.free[host] if g.uuid not in taken]
        self.free_ids -= taken
        self.total_free -= len(uuids)
        self.holds.setdefault(host, []).append(Hold(end, uuids))
        self._version[host] = self._version.get(host, 0) + 1
        res = self.reserved.get(host)
        if res is not None and res.want is not want and not (end < INF and end <= res.start):
            res.spare -= sum(1 for g in chosen if res.want.fits(g))
        self.place.append(Place(want.kind, want.id, host, uuids))

    # -- preemption -----------------------------------------------------------------

    def _eligible(self, run: Running, want: Want) -> bool:
        if run.kind != "job" or run.stopping or run.id in self.victims:
            return False
        if self.now - run.started_at < self.view.min_runtime_s:
            return False
        lower = run.preemptible and run.rank > want.rank
        return lower or (run.over_quota and not want.over_quota)

    def _try_preempt(self, want: Want) -> bool:
        """Make room for ``want`` by stopping lower work on one host (or wait for the
        work already stopping there); True when it now waits for that."""
        if want.over_quota or not self.view.preemption:
            return False
        key = (want.shape, want.gpus, want.rank)
        if key in self._no_preempt:
            return False
        best = self._best_room_now(want, key)
        if best is None:
            self._no_preempt.add(key)
            return False
        _, host, chosen, free, soon = best
        free = [g for g in free if g.uuid in self.free_ids]
        # Hold what is free and what is coming free for it, so nothing later in this
        # pass takes it; the victims stop, and their GPUs are promised to it.
        keep = want.gpus
        held = [g.uuid for g in free[:keep]]
        keep -= len(held)
        promised = soon[:keep]
        keep -= len(promised)
        for victim_id in chosen:
            run = next(
                r for r in self.running_by_host[host] if r.id == victim_id and r.kind == "job"
            )
            self.victims.add(victim_id)
            self.preempt.append(Preempt(victim_id, host, want.kind, want.id))
            fitting = [u for u in run.gpus if self._fits_uuid(want, host, u)]
            promised.extend(fitting[:keep] if keep > 0 else [])
            keep -= min(keep, len(fitting))
            self.soon.setdefault(host, []).extend(run.gpus)
        self.promised.update(promised)
        self._version[host] = self._version.get(host, 0) + 1
        if held:
            taken = set(held)
            self.free[host] = [g for g in self.free[host] if g.uuid not in taken]
            self.free_ids -= taken
            self.total_free -= len(held)
        if chosen:
            # Its victims now end within the grace period: on this host others may fit
            # sooner, or need no victim of their own any more. Heap entries are only
            # ever worked out again for the worse, so mark the host in every heap that
            # could use it, to be worked out again.
            for heap_key, heap in self._res_heap.items():
                if host in self._heap_hosts[heap_key]:
                    heapq.heappush(heap, (-INF, host, -1, 0))
            for heap_key, rooms in self._room_heaps.items():
                if host in self._heap_hosts[heap_key[:2]]:
                    heapq.heappush(rooms, ((-1, 0, host), host, -1, None))
        self._waits(want, PREEMPTING, host=host)
        return True

    def _best_room_now(self, want: Want, key: tuple[object, ...]) -> _Room | None:
        """The host to preempt on: the first (by name) where enough is stopping
        already, else the fewest victims, then fewest GPUs freed, then by name.

        A heap per shape, size and class, like the reservations': an entry is worked
        out again when its host changed, and dropped when its host is reserved."""
        heap = self._room_heaps.get(key)
        if heap is None:
            self._heap_hosts[key[:2]] = set(self._candidate_hosts(want))
            # Each host goes in first with a bound of its rank, worked out exactly
            # only if it comes to the top: no victims when enough is free or on its
            # way out, else at least one victim freeing at least what is missing.
            heap = []
            for host in self._candidate_hosts(want):
                need = want.gpus - self._free_and_soon(want, host)
                bound = (0, 0, host) if need <= 0 else (1, need, host)
                heap.append((bound, host, -1, None))
            heapq.heapify(heap)
            self._room_heaps[key] = heap
        while heap:
            _, host, version, room = heap[0]
            res = self.reserved.get(host)
            if res is not None and res.want is not want:
                heapq.heappop(heap)
                continue
            current = self._version.get(host, 0)
            if version != current or room is None:
                heapq.heappop(heap)
                fresh = self._room_cached(want, key, host)
                if fresh is not None:
                    heapq.heappush(heap, (fresh[0], host, current, fresh))
                continue
            return room
        return None

    def _free_and_soon(self, want: Want, host: str) -> int:
        """How many GPUs of ``want``'s shape on ``host`` are free or coming free for
        no one: per shape and version of the host, whatever the size or class."""
        version = self._version.get(host, 0)
        memo = self._free_soon.get((want.shape, host))
        if memo is not None and memo[0] == version:
            return memo[1]
        promised = self.promised
        count = len(self._fitting_free(want, host)) + sum(
            1
            for u in self.soon.get(host, ())
            if u not in promised and self._fits_uuid(want, host, u)
        )
        self._free_soon[want.shape, host] = (version, count)
        return count

    def _room_cached(self, want: Want, key: tuple[object, ...], host: str) -> _Room | None:
        """``_room_on``, worked out once per version of the host (a host can have an
        entry and a mark in a heap at once)."""
        version = self._version.get(host, 0)
        memo = self._room_memo.get((key, host))
        if memo is not None and memo[0] == version:
            return memo[1]
        room = self._room_on(want, host)
        self._room_memo[key, host] = (version, room)
        return room

    def _room_on(self, want: Want, host: str) -> _Room | None:
        """How ``want`` could get room on ``host``: what is stopping there already,
        else the fewest, youngest eligible victims; None when it cannot."""
        free = self._fitting_free(want, host)
        all_fit = self._all_fit[want.shape, host]  # set by _fitting_free
        promised = self.promised
        if all_fit:
            soon = [u for u in self.soon.get(host, ()) if u not in promised]
        else:
            soon = [
                u
                for u in self.soon.get(host, ())
                if u not in promised and self._fits_uuid(want, host, u)
            ]
        need = want.gpus - len(free) - len(soon)
        if need <= 0:
            # Stopped for it in an earlier pass (or by someone): wait for that.
            return ((0, 0, host), host, (), free, soon)
        candidates = []
        victims, rank, within = self.victims, want.rank, not want.over_quota
        oldest = self.now - self.view.min_runtime_s
        for run in self.running_by_host.get(host, ()):
            if run.kind != "job" or run.stopping or run.id in victims or run.started_at > oldest:
                continue
            if not ((run.preemptible and run.rank > rank) or (run.over_quota and within)):
                continue
            if all_fit:
                count = len(run.gpus)
            else:
                count = sum(1 for u in run.gpus if self._fits_uuid(want, host, u))
            if count:
                candidates.append((count, run.started_at, run.id))
        if sum(c[0] for c in candidates) < need:
            return None
        chosen = victims_for(need, candidates)
        if chosen is None:
            return None
        freed = sum(c[0] for c in candidates if c[2] in chosen)
        return ((len(chosen), freed, host), host, chosen, free, soon)

    def _fits_uuid(self, want: Want, host: str, uuid: str) -> bool:
        key = (want.shape, host)
        if self._all_fit.get(key):
            return True
        for g in self.hosts[host]:
            if g.uuid == uuid:
                return want.fits(g)
        return False

    # -- reservations -----------------------------------------------------------------

    def _start_here(self, want: Want, host: str) -> tuple[float, int] | None:
        return start_on(
            want,
            slots=self.hosts[host],
            free={g.uuid for g in self.free[host]},
            holds=self.holds.get(host, []),
            now=self.now,
            grace_s=self.view.grace_s,
            held_for_others=self.promised,
        )

    def _try_reserve(self, want: Want) -> bool:
        """Reserve the unreserved host where ``want`` fits soonest, if any.

        Per shape and size a heap of (start, host) is kept: an entry is worked out
        again only when its host changed since (a placement, a preemption), and
        dropped when its host is reserved, so each request costs a heap peek."""
        if want.gpus >= self._no_reserve.get(want.shape, want.gpus + 1):
            return False
        key = (want.shape, want.gpus)
        heap = self._res_heap.get(key)
        if heap is None:
            self._heap_hosts[key] = set(self._candidate_hosts(want))
            heap = []
            for host in self._candidate_hosts(want):
                if host in self.reserved:
                    continue
                got = self._start_here(want, host)
                if got is not None:
                    heap.append((got[0], host, self._version.get(host, 0), got[1]))
            heapq.heapify(heap)
            self._res_heap[key] = heap
        while heap:
            start, host, version, spare = heap[0]
            if host in self.reserved:
                heapq.heappop(heap)
                continue
            if version != self._version.get(host, 0):
                heapq.heappop(heap)
                got = self._start_here(want, host)
                if got is not None:
                    heapq.heappush(heap, (got[0], host, self._version.get(host, 0), got[1]))
                continue
            heapq.heappop(heap)
            self.reserved[host] = Reservation(want, start, spare)
            self._undecided.append((want, None if start == INF else start, host))
            return True
        fewest = self._no_reserve.get(want.shape, want.gpus)
        self._no_reserve[want.shape] = min(fewest, want.gpus)
        return False
