"""Room for a request that cannot be placed now, in one scheduling pass
(``passes.Pass``): a ``Preemptor`` stops lower work for it, a ``Reserver``
reserves the host where it fits soonest; both work on the pass's ``PassState``.

Both keep a heap of hosts per shape and size (and class, for preemption): an
entry is worked out again only when its host changed since it was (a placement, a
preemption), and dropped when its host is reserved for another, so a request
costs a peek at the top. That is sound because entries only ever get worse in a
pass (a start later, a preemption dearer), except on a host where a preemption
just took victims: GPUs may come free there for no one, or a smaller victim may
now be the youngest. Such a host is marked in every preemption heap that could
use it, to be worked out again.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Mapping
from itertools import accumulate

from gputui.scheduler.policy.bookings import barred
from gputui.scheduler.policy.model import (
    INF,
    PREEMPTING,
    GpuSlot,
    Preempt,
    Running,
    Wait,
    Want,
    victims_for,
)
from gputui.scheduler.policy.state import Hold, PassState, Reservation, Room, Shape, Sized


def start_on(
    need: int,
    *,
    fitting: frozenset[str],
    free: set[str],
    holds: list[Hold],
    now: float,
    grace_s: float,
    held_for_others: set[str],
) -> tuple[float, int] | None:
    """When ``need`` GPUs of ``fitting`` (those of a host a request fits) would be
    free, from the time limits of what holds them, and how many of them are spare
    then; None if never."""
    if len(fitting) < need:
        return None
    have, events = timeline(
        fitting, free=free, holds=holds, now=now, grace_s=grace_s, held_for_others=held_for_others
    )
    return start_from(need, have, events, now)


def timeline(
    fitting: frozenset[str],
    *,
    free: set[str],
    holds: list[Hold],
    now: float,
    grace_s: float,
    held_for_others: set[str],
    booked: Mapping[str, float] | None = None,
) -> tuple[int, list[tuple[float, int]]]:
    """How many of ``fitting`` are free now, and (when, how many more) come free
    after, soonest first: the same for every size of request. ``booked``: cards under
    a booking, and when the last one on each ends (a card comes free no sooner)."""
    events: list[tuple[float, int]] = []
    for hold in holds:
        held = fitting.intersection(hold.uuids)
        count = len(held) - len(held & held_for_others) if held_for_others else len(held)
        if not count:
            continue
        end = max(hold.end, now)  # past its limit: it is being stopped now
        if hold.running is not None and hold.running.stopping:
            end = now + grace_s
        if booked:
            later = [booked[u] for u in held - held_for_others if u in booked]
            events.extend((max(end, b), 1) for b in later)
            count -= len(later)
            if not count:
                continue
        events.append((end, count))
    have = fitting & free
    if booked:
        later = [booked[u] for u in have if u in booked]
        events.extend((b, 1) for b in later)
        events.sort()
        return len(have) - len(later), events
    events.sort()
    return len(have), events


def start_from(
    need: int, have: int, events: list[tuple[float, int]], now: float
) -> tuple[float, int] | None:
    """``start_on`` from a ``timeline``: when ``need`` are free, and how many spare."""
    start: float | None = now if have >= need else None
    for end, count in events:
        if start is not None and end > start:
            break
        have += count
        if start is None and have >= need:
            start = end
    if start is None:
        return None
    return start, have - need


class Preemptor:
    """Makes room for a request by stopping lower work, in the ``PassState`` it is
    given (a heap of hosts per shape, size and class)."""

    def __init__(self, state: PassState) -> None:
        self.state = state
        self._stoppable_on: dict[str, list[tuple[int, float, int, bool, int, bool]]] = {}
        self._eligible_memo: dict[
            tuple[str, int], tuple[int, list[tuple[int, float, int]], list[int]]
        ] = {}

    def preempt(self, want: Want, sized: Sized) -> bool:
        """Make room for ``want`` by stopping lower work on one host (or wait for the
        work already stopping there); True when it now waits for that."""
        state = self.state
        if want.over_quota or not state.view.preemption:
            return False
        shape = sized.shape
        if self.cannot_preempt(want, shape):
            return False
        best = self._best_room_now(want, sized)
        if best is None:
            shape.no_preempt.append((want.gpus, want.rank))
            return False
        _, host, chosen, free, soon = best
        free = [g for g in free if g.uuid in state.free_ids]
        if state.booked and self._into_booking(want, shape, (host, chosen, free, soon)):
            return False
        # Hold what is free and what is coming free for it, so nothing later in this
        # pass takes it; the victims stop, and their GPUs are promised to it.
        keep = want.gpus
        held = [g.uuid for g in free[:keep]]
        keep -= len(held)
        promised = soon[:keep]
        keep -= len(promised)
        fits = state.fit_on(want, shape, host)[0]
        for victim_id in chosen:
            run = self._job_on(host, victim_id)
            state.victims.add(victim_id)
            state.preempt.append(Preempt(victim_id, host, want.kind, want.id))
            fitting = [u for u in run.gpus if u in fits]
            promised.extend(fitting[:keep] if keep > 0 else [])
            keep -= min(keep, len(fitting))
            state.soon.setdefault(host, []).extend(run.gpus)
        state.promised.update(promised)
        state.changed(host)
        if held:
            state.take(host, set(held))
        if chosen:
            # Its victims are no one else's now: on this host others may need no
            # victim of their own any more (GPUs come free for no one), or other
            # victims than before.
            spare = any(u not in state.promised for v in chosen for u in self._job_on(host, v).gpus)
            self._mark(host, everywhere=spare)
        state.wait.append(Wait(want.kind, want.id, PREEMPTING, None, host))
        return True

    def _into_booking(
        self,
        want: Want,
        shape: Shape,
        room: tuple[str, tuple[int, ...], list[GpuSlot], list[str]],
    ) -> bool:
        """Whether the cards this room (host, victims, free GPUs, GPUs coming free)
        would give ``want`` include one a booking keeps from it (then it does not
        preempt for them: it waits, or reserves)."""
        host, chosen, free, soon = room
        state = self.state
        keep = want.gpus
        take = [g.uuid for g in free[:keep]]
        keep -= len(take)
        take.extend(soon[:keep])
        keep -= len(soon[:keep])
        fits = state.fit_on(want, shape, host)[0]
        for victim_id in chosen:
            fitting = [u for u in self._job_on(host, victim_id).gpus if u in fits]
            take.extend(fitting[:keep] if keep > 0 else [])
            keep -= min(keep, len(fitting))
        end = INF if want.time_limit_s is None else state.now + want.time_limit_s
        return bool(barred(want, end, state.now, state.booked, take))

    def cannot_preempt(self, want: Want, shape: Shape) -> bool:
        """Whether a smaller or equal size of a higher or equal class of ``want``'s
        shape already found no room to preempt for (``Shape.no_preempt``)."""
        size, rank = want.gpus, want.rank
        return any(s <= size and r <= rank for s, r in shape.no_preempt)

    def _job_on(self, host: str, job_id: int) -> Running:
        return next(
            r for r in self.state.running_by_host[host] if r.id == job_id and r.kind == "job"
        )

    def _mark(self, host: str, *, everywhere: bool) -> None:
        """Have every preemption heap that could use ``host`` work it out again: its
        entries there may be better now (taking the youngest victim may leave a
        smaller one). Not the reservation heaps: a start only gets later in a pass,
        as GPUs are taken or promised."""
        for sized in self.state.heaped:
            hosts = sized.hosts
            if hosts is None or host not in hosts:
                continue
            memo = sized.room_memo
            for rank, rooms in sized.room_heaps.items():
                exact = memo.get((rank, host))
                if everywhere or (exact is not None and exact[1] is not None):
                    heapq.heappush(rooms, ((-1, 0, host), host, -1, 1, None))

    def _best_room_now(self, want: Want, sized: Sized) -> Room | None:
        """The host to preempt on: the first (by name) where enough is stopping
        already, else the fewest victims, then fewest GPUs freed, then by name."""
        shape, rank = sized.shape, want.rank
        state = self.state
        versions = state.version
        heap = sized.room_heaps.get(rank)
        if heap is None:
            # Each host goes in first with a bound of its rank (``_room_bound``),
            # worked out exactly only if it comes to the top.
            heap = []
            bound_of, version = self._room_bound, versions.get
            for host in state.heap_for(want, sized):
                bound = bound_of(want, shape, host)
                if bound is not None:
                    heap.append((bound, host, version(host, 0), 1, None))
            heapq.heapify(heap)
            sized.room_heaps[rank] = heap
        reserved = state.reserved
        while heap:
            _, host, version_then, _, room = heap[0]
            res = reserved.get(host)
            if res is not None and res.want is not want:
                heapq.heappop(heap)
                continue
            current = versions.get(host, 0)
            if version_then != current:  # changed since (or a mark): bound it again
                heapq.heappop(heap)
                bound = self._room_bound(want, shape, host)
                if bound is not None:
                    heapq.heappush(heap, (bound, host, current, 1, None))
                continue
            if room is None:
                heapq.heappop(heap)
                fresh = self._room_cached(want, sized, host)
                if fresh is not None:
                    heapq.heappush(heap, (fresh[0], host, current, 0, fresh))
                continue
            return room
        return None

    def _room_bound(self, want: Want, shape: Shape, host: str) -> tuple[int, int, str] | None:
        """A bound from below of ``_room_on``'s rank for ``host``, or None when no
        room can be had there: no victims when enough is free or on its way out,
        else as many victims as the largest eligible jobs would take, freeing at
        least what is missing (their GPUs counted whether ``want`` fits them or
        not, so the bound holds for every shape)."""
        # The memos looked up here rather than through their methods: this runs for
        # every host of every new heap.
        version = self.state.version.get(host, 0)
        memo = shape.free_soon.get(host)
        if memo is not None and memo[0] == version:
            need = want.gpus - memo[1]
        else:
            need = want.gpus - self._free_and_soon(want, shape, host)
        if need <= 0:
            return (0, 0, host)
        eligible = self._eligible_memo.get((host, want.rank))
        if eligible is not None and eligible[0] == version:
            reach = eligible[2]
        else:
            reach = self._eligible(host, want.rank)[1]
        fewest = bisect_left(reach, need)
        return None if fewest == len(reach) else (fewest + 1, need, host)

    def _eligible(self, host: str, rank: int) -> tuple[list[tuple[int, float, int]], list[int]]:
        """The jobs on ``host`` that a job of class ``rank`` within quota may preempt
        now, as (GPUs, started_at, id), and the running totals of their sizes from
        the largest down: per host version, whatever the shape or size."""
        version = self.state.version.get(host, 0)
        memo = self._eligible_memo.get((host, rank))
        if memo is not None and memo[0] == version:
            return memo[1], memo[2]
        victims = self.state.victims
        runs = [
            (size, started, ident)
            for size, started, ident, preemptible, its_rank, over_quota in self._stoppable(host)
            if ident not in victims and ((preemptible and its_rank > rank) or over_quota)
        ]
        reach = list(accumulate(sorted((r[0] for r in runs), reverse=True)))
        self._eligible_memo[host, rank] = (version, runs, reach)
        return runs, reach

    def _stoppable(self, host: str) -> list[tuple[int, float, int, bool, int, bool]]:
        """The jobs on ``host`` that some job could preempt in this pass: (GPUs,
        started_at, id, preemptible, class, over quota)."""
        runs = self._stoppable_on.get(host)
        if runs is None:
            state = self.state
            oldest = state.now - state.view.min_runtime_s
            runs = self._stoppable_on[host] = [
                (len(r.gpus), r.started_at, r.id, r.preemptible, r.rank, r.over_quota)
                for r in state.running_by_host.get(host, ())
                if r.kind == "job" and not r.stopping and r.started_at <= oldest
            ]
        return runs

    def _free_and_soon(self, want: Want, shape: Shape, host: str) -> int:
        """How many GPUs of ``want``'s shape on ``host`` are free or coming free for
        no one: per shape and version of the host, whatever the size or class."""
        state = self.state
        version = state.version.get(host, 0)
        memo = shape.free_soon.get(host)
        if memo is not None and memo[0] == version:
            return memo[1]
        fitting = state.fit_on(want, shape, host)[0]
        count = len(fitting & state.free_ids)
        soon = state.soon.get(host)
        if soon:
            count += len(fitting.intersection(soon).difference(state.promised))
        shape.free_soon[host] = (version, count)
        return count

    def _room_cached(self, want: Want, sized: Sized, host: str) -> Room | None:
        """``_room_on``, worked out once per version of the host (a host can have an
        entry and a mark in a heap at once)."""
        version = self.state.version.get(host, 0)
        key = (want.rank, host)
        memo = sized.room_memo.get(key)
        if memo is not None and memo[0] == version:
            return memo[1]
        room = self._room_on(want, sized.shape, host)
        sized.room_memo[key] = (version, room)
        return room

    def _room_on(self, want: Want, shape: Shape, host: str) -> Room | None:
        """How ``want`` could get room on ``host``: what is stopping there already,
        else the fewest, youngest eligible victims; None when it cannot."""
        state = self.state
        free = state.fitting_free(want, shape, host)
        fitting, all_fit = state.fit_on(want, shape, host)
        promised = state.promised
        soon = [u for u in state.soon.get(host, ()) if u not in promised and u in fitting]
        need = want.gpus - len(free) - len(soon)
        if need <= 0:
            # Stopped for it in an earlier pass (or by someone): wait for that.
            return ((0, 0, host), host, (), free, soon)
        # Over-quota work never preempts (``preempt``): this one is within.
        eligible = self._eligible(host, want.rank)[0]
        if all_fit:
            candidates = eligible
        else:
            gpus_of = {run.id: run.gpus for run in state.running_by_host[host]}
            candidates = []
            for _, started, ident in eligible:
                count = len(fitting.intersection(gpus_of[ident]))
                if count:
                    candidates.append((count, started, ident))
        if sum(c[0] for c in candidates) < need:
            return None
        chosen = victims_for(need, candidates)
        if chosen is None:
            return None
        freed = sum(c[0] for c in candidates if c[2] in chosen)
        return ((len(chosen), freed, host), host, chosen, free, soon)


class Reserver:
    """Reserves, for a request that can neither be placed nor preempt, the host where
    it fits soonest, in the ``PassState`` it is given (a heap of hosts per shape and
    size)."""

    def __init__(self, state: PassState) -> None:
        self.state = state

    def reserve(self, want: Want, sized: Sized) -> Reservation | None:
        """Reserve the unreserved host where ``want`` fits soonest, if any."""
        shape = sized.shape
        if want.gpus >= shape.no_reserve or want.booking is not None:
            return None  # a request naming a booking runs in it or not at all
        state = self.state
        reserved, versions = state.reserved, state.version
        heap = sized.res_heap
        if heap is None:
            heap = []
            version = versions.get
            for host in state.heap_for(want, sized):
                if host in reserved:
                    continue
                got = self._start_here(want, shape, host)
                if got is not None:
                    heap.append((got[0], host, version(host, 0), got[1]))
            heapq.heapify(heap)
            sized.res_heap = heap
        while heap:
            start, host, version_then, spare = heap[0]
            if host in reserved:
                heapq.heappop(heap)
                continue
            current = versions.get(host, 0)
            if version_then != current:
                heapq.heappop(heap)
                got = self._start_here(want, shape, host)
                if got is not None:
                    heapq.heappush(heap, (got[0], host, current, got[1]))
                continue
            heapq.heappop(heap)
            res = reserved[host] = Reservation(want, start, spare, host, sized)
            return res
        shape.no_reserve = min(shape.no_reserve, want.gpus)
        return None

    def _start_here(self, want: Want, shape: Shape, host: str) -> tuple[float, int] | None:
        """``start_on`` for ``want`` on ``host``, from the host's timeline for the
        shape (worked out once per host version, whatever the size)."""
        state = self.state
        fitting = state.fit_on(want, shape, host)[0]
        if len(fitting) < want.gpus:
            return None
        version = state.version.get(host, 0)
        memo = shape.timeline.get(host)
        if memo is None or memo[0] != version:
            have, events = timeline(
                fitting,
                free=state.free_ids,
                holds=state.holds.get(host, []),
                now=state.now,
                grace_s=state.view.grace_s,
                held_for_others=state.promised,
                booked=state.booked_until,
            )
            memo = shape.timeline[host] = (version, have, events)
        return start_from(want.gpus, memo[1], memo[2], state.now)
