"""The scheduling pass (``decide``), done fast enough for 10,000 waiting jobs.

The rules are in ``model``'s docstring; this module is how they are applied in
one sort (of one integer per request: ``Want.line_key``) and one walk down the
line, with work shared between requests of one *shape* (the same pool, host,
model, named GPUs and barred hosts):

* which hosts could ever hold a shape, and why not (drained, down), is worked
  out once per shape and size;
* free GPUs only ever become fewer during a pass, so once a request of some shape
  and size fails to find room with some end time, every later one of that shape
  and size ending no sooner fails too without looking; when no GPU is free
  anywhere, placement is not tried at all;
* preemption candidates and unreserved hosts are only ever used up, so a (size,
  class) of a shape that found no victims rules out every bigger size and lower
  class of it, and one that found no host to reserve rules out bigger sizes;
* a request whose shape, size, class, quota state and kind found none of the
  three waits without a look, and all of those wait for one reason, given once
  at the end.

The pass (``Pass``) walks the line and places. It owns a ``state.PassState``
(the cluster as the pass changes it, and what it has decided) and gives it to
a ``rooms.Preemptor`` and a ``rooms.Reserver`` (each a heap of hosts, worked
out again lazily) for what cannot be placed. ``reference`` applies the same
rules the plain way (re-sort and re-scan for every request); the benchmark times
both and a test checks they decide the same.
"""

from __future__ import annotations

from operator import attrgetter

from gputui.scheduler.policy.bookings import barred
from gputui.scheduler.policy.model import (
    DRAINED,
    FENCED,
    HOST_DOWN,
    INF,
    OFF_HOURS,
    PRIORITY,
    QUOTA,
    RESERVATION,
    RESOURCES,
    ClusterView,
    Decisions,
    GpuSlot,
    Place,
    Wait,
    Want,
    last_among,
    static_reason,
)
from gputui.scheduler.policy.rooms import Preemptor, Reserver
from gputui.scheduler.policy.state import Hold, Kin, PassState, Reservation, Shape, Sized

__all__ = ["Pass", "decide", "end_of"]

_LINE = attrgetter("line")


def decide(view: ClusterView) -> Decisions:
    """The whole pass (the rules: ``model``'s docstring); a ``model.Policy``."""
    return Pass(view).run()


def end_of(want: Want, now: float) -> float:
    return INF if want.time_limit_s is None else now + want.time_limit_s


class Pass:
    """One scheduling pass over a ``ClusterView``: ``Pass(view).run()``.

    It walks the line and places; the cluster as it changes is its ``state``, and
    what cannot be placed goes to its ``preemptor``, then its ``reserver``."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.state = state = PassState(view)
        self.preemptor = Preemptor(state)
        self.reserver = Reserver(state)
        self._shapes: dict[tuple[object, ...], Shape] = {}
        self._sized: dict[tuple[object, ...], Sized] = {}
        self._kins: dict[tuple[object, ...], Kin] = {}
        self._dead: dict[tuple[object, ...], Kin] = {}
        """Per (shape, size, class, over quota, kind) for which nothing can be had any
        more this pass (by a request ending no sooner than their ``Sized.fail``)."""
        self._undecided: list[Want] = []
        """Waiting for a reason that depends on the whole pass (given at its end)..."""
        self._holders: list[Kin | Reservation] = []
        """... and, one for one, what will hold that reason (two lists rather than one
        of pairs: 10,000 pairs would wake the garbage collector)."""

    # -- the walk -----------------------------------------------------------------

    def run(self) -> Decisions:
        one, dead, undecided, holders = self._one, self._dead, self._undecided, self._holders
        now = self.state.now
        for want in sorted(self.view.waiting, key=_LINE):
            # The common case in a long line: a request whose shape, size and class
            # already found no room, no victims and no host to reserve, ending no
            # sooner than the one that found that. It waits; nothing is tried again.
            if want.blocked is None and not want.off_hours_only:
                kin = dead.get(want.kin)
                if kin is not None:
                    limit, failed = want.time_limit_s, kin.sized.fail
                    if failed is not None and (INF if limit is None else now + limit) >= failed:
                        undecided.append(want)
                        holders.append(kin)
                        continue
            one(want)
        self._give_reasons()
        state = self.state
        wait = state.wait
        new = tuple.__new__  # a Wait made straight from its fields: the fastest way
        for want, holder in zip(undecided, holders, strict=True):
            wait.append(new(Wait, (want.kind, want.id, holder.why, holder.start_at, holder.host)))
        return Decisions(tuple(state.place), tuple(wait), tuple(state.preempt))

    def _give_reasons(self) -> None:
        """The reasons that depend on the whole pass: one per kin, one per reservation."""
        for kin in self._kins.values():
            if kin.first.over_quota:
                kin.why = QUOTA
            else:
                sized = kin.sized
                if sized.why is None:
                    sized.why = self._reason(kin.first, sized)
                kin.why = sized.why
        for res in self.state.reserved.values():
            assert res.sized is not None  # every reservation here is this pass's
            res.why = self._reason(res.want, res.sized)

    def _one(self, want: Want) -> None:
        if want.blocked is not None:
            self._waits(want, want.blocked)
            return
        if want.off_hours_only and not self.view.off_hours:
            self._waits(want, OFF_HOURS)
            return
        sized = self._sized.get(want.sized)
        if sized is None:
            shape = self._shapes.get(want.shape)
            if shape is None:
                shape = self._shapes[want.shape] = Shape()
            sized = Sized(shape, self._static_reason(want, shape))
            self._sized[want.sized] = sized
        if sized.fixed is not None:
            self._waits(want, sized.fixed)
            return
        state = self.state
        end = end_of(want, state.now)
        failed = sized.fail
        if state.total_free < want.gpus:
            sized.fail = -INF  # never again this pass: free GPUs only get fewer
        elif failed is None or end < failed:
            if self._try_place(want, sized, end):
                return
            sized.fail = end if failed is None else min(failed, end)
        if want.kind == "job":
            if self.preemptor.preempt(want, sized):
                return
            res = self.reserver.reserve(want, sized)
            if res is not None:
                self._undecided.append(want)
                self._holders.append(res)
                return
        kin = self._kins.get(want.kin)
        if kin is None:
            kin = self._kins[want.kin] = Kin(sized, want)
        self._undecided.append(want)
        self._holders.append(kin)
        if sized.fail is not None and self._hopeless(want, sized.shape):
            self._dead[want.kin] = kin

    def _static_reason(self, want: Want, shape: Shape) -> str | None:
        """``model.static_reason``, from the counts by kind."""
        counts = self.state.counts(want, shape).values()
        if not any(c[0] >= want.gpus for c in counts):
            return static_reason(want, self.state.hosts)  # LoginUser or Resources: rare
        if any(c[1] >= want.gpus for c in counts if c[0] >= want.gpus):
            return None
        if any(c[2] >= want.gpus for c in counts):
            return DRAINED
        return FENCED if any(c[4] >= want.gpus for c in counts) else HOST_DOWN

    def _hopeless(self, want: Want, shape: Shape) -> bool:
        """Whether, from now on in this pass, neither preemption nor a reservation
        can be had by a request like ``want`` (both only ever get harder)."""
        if want.kind != "job":
            return True
        preempt_done = (
            want.over_quota
            or not self.view.preemption
            or self.preemptor.cannot_preempt(want, shape)
        )
        return preempt_done and want.gpus >= shape.no_reserve

    def _waits(self, want: Want, reason: str) -> None:
        self.state.wait.append(Wait(want.kind, want.id, reason, None, None))

    def _reason(self, want: Want, sized: Sized) -> str:
        """Why it waits, judged once the pass is done: ``QuotaExceeded`` when it is
        over quota; ``Reservation`` when a host reserved for another has room for
        it still; ``Priority`` when GPUs free at the start would have held it; else
        ``Resources``."""
        if want.over_quota:
            return QUOTA  # whatever holds it back, the quota is why it is at the back
        state = self.state
        if sized.fit_at_start is None:
            counts = state.counts(want, sized.shape).values()
            sized.fit_at_start = any(c[3] >= want.gpus for c in counts)
        if not sized.fit_at_start:
            return RESOURCES
        room = sized.room_reserved
        if room is None:
            candidates = set(state.candidate_hosts(want, sized))
            room = sized.room_reserved = [
                res.want
                for host, res in state.reserved.items()
                if host in candidates
                and len(state.free[host]) >= want.gpus
                and len(state.fitting_free(want, sized.shape, host)) >= want.gpus
            ]
        others = len(room) > 1 or (len(room) == 1 and room[0] is not want)
        return RESERVATION if others else PRIORITY

    # -- placement ------------------------------------------------------------------

    def _try_place(self, want: Want, sized: Sized, end: float) -> bool:
        """Best fit: the host with the fewest free GPUs that fit, among those that
        need the fewest cards placement avoids (counted only when there are any)."""
        best: tuple[int, int, str, list[GpuSlot]] | None = None
        state = self.state
        free_on, size, count_last = state.free, want.gpus, state.any_last
        fitting_free, shape = state.fitting_free, sized.shape
        for host in state.candidate_hosts(want, sized):
            if len(free_on[host]) < size:  # too few free of any kind: no need to look
                continue
            free = fitting_free(want, shape, host)
            if len(free) < size:
                continue
            chosen = self._respecting_reservation(want, host, free, end)
            if chosen is None:
                continue
            dirty = last_among(chosen) if count_last else 0
            if best is None or (dirty, len(free), host) < (best[0], best[1], best[2]):
                best = (dirty, len(free), host, chosen)
        if best is None:
            return False
        _, _, host, chosen = best
        self._take(want, host, chosen, end)
        return True

    def _respecting_reservation(
        self, want: Want, host: str, free: list[GpuSlot], end: float
    ) -> list[GpuSlot] | None:
        """The GPUs ``want`` may take on ``host`` given its reservation, or None."""
        if want.named:
            named = [g for g in free if g.uuid in want.named]
            if len(named) != len(set(want.named)) or len({g.vendor for g in named}) > 1:
                return None  # (never one placement on two vendors' cards)
            free = named
        booked = self.state.booked
        if booked or want.booking is not None:
            kept = barred(want, end, self.state.now, booked, (g.uuid for g in free))
            if kept:
                free = [g for g in free if g.uuid not in kept]
            if len(free) < want.gpus:
                return None
        res = self.state.reserved.get(host)
        if res is None or res.want is want or want.booking is not None:
            return free[: want.gpus]  # (a booking's own cards are no one else's till its end)
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
        state = self.state
        uuids = tuple(g.uuid for g in chosen)
        state.take(host, set(uuids))
        state.holds.setdefault(host, []).append(Hold(end, uuids))
        state.changed(host)
        res = state.reserved.get(host)
        if (
            res is not None
            and res.want is not want
            and want.booking is None
            and not (end < INF and end <= res.start)
        ):
            res.spare -= sum(1 for g in chosen if res.want.fits(g))
        state.place.append(Place(want.kind, want.id, host, uuids))
