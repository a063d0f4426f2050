"""The scheduling pass of ``policy``, done fast enough for 10,000 waiting jobs.

The rules are ``policy``'s (its docstring); this module is how they are applied in
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

The pass's state and shared work are in ``pass_state``, preemption and
reservations (each a heap of hosts, worked out again lazily) in ``pass_rooms``;
this module walks the line and places. ``policy_ref`` applies the same rules the
plain way (re-sort and re-scan for every request); the benchmark times both and a
test checks they decide the same.
"""

from __future__ import annotations

from operator import attrgetter

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
    Decisions,
    GpuSlot,
    Place,
    Wait,
    Want,
    static_reason,
)
from gputui.scheduler.policy.rooms import Rooms
from gputui.scheduler.policy.state import Hold, Kin, Reservation, Shape, Sized

__all__ = ["Pass", "Reservation", "end_of"]

_LINE = attrgetter("line")


def end_of(want: Want, now: float) -> float:
    return INF if want.time_limit_s is None else now + want.time_limit_s


class Pass(Rooms):
    """One scheduling pass over a ``ClusterView``: ``Pass(view).run()``."""

    # -- the walk -----------------------------------------------------------------

    def run(self) -> Decisions:
        one, dead, undecided, holders = self._one, self._dead, self._undecided, self._holders
        now = self.now
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
        wait = self.wait
        new = tuple.__new__  # a Wait made straight from its fields: the fastest way
        for want, holder in zip(undecided, holders, strict=True):
            wait.append(new(Wait, (want.kind, want.id, holder.why, holder.start_at, holder.host)))
        return Decisions(tuple(self.place), tuple(wait), tuple(self.preempt))

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
        for res in self.reserved.values():
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
        end = end_of(want, self.now)
        failed = sized.fail
        if self.total_free < want.gpus:
            sized.fail = -INF  # never again this pass: free GPUs only get fewer
        elif failed is None or end < failed:
            if self._try_place(want, sized, end):
                return
            sized.fail = end if failed is None else min(failed, end)
        if want.kind == "job" and self._try_preempt(want, sized):
            return
        if want.kind == "job" and self._try_reserve(want, sized):
            return
        kin = self._kins.get(want.kin)
        if kin is None:
            kin = self._kins[want.kin] = Kin(sized, want)
        self._undecided.append(want)
        self._holders.append(kin)
        if sized.fail is not None and self._hopeless(want, sized.shape):
            self._dead[want.kin] = kin

    def _static_reason(self, want: Want, shape: Shape) -> str | None:
        """``policy.static_reason``, from the counts by kind."""
        counts = self.counts(want, shape).values()
        if not any(c[0] >= want.gpus for c in counts):
            return static_reason(want, self.hosts)  # LoginUser or Resources: rare
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
            want.over_quota or not self.view.preemption or self._cannot_preempt(want, shape)
        )
        return preempt_done and want.gpus >= shape.no_reserve

    def _waits(self, want: Want, reason: str) -> None:
        self.wait.append(Wait(want.kind, want.id, reason, None, None))

    def _reason(self, want: Want, sized: Sized) -> str:
        """Why it waits, judged once the pass is done: ``QuotaExceeded`` when it is
        over quota; ``Reservation`` when a host reserved for another has room for
        it still; ``Priority`` when GPUs free at the start would have held it; else
        ``Resources``."""
        if want.over_quota:
            return QUOTA  # whatever holds it back, the quota is why it is at the back
        if sized.fit_at_start is None:
            counts = self.counts(want, sized.shape).values()
            sized.fit_at_start = any(c[3] >= want.gpus for c in counts)
        if not sized.fit_at_start:
            return RESOURCES
        room = sized.room_reserved
        if room is None:
            candidates = set(self._candidate_hosts(want, sized))
            room = sized.room_reserved = [
                res.want
                for host, res in self.reserved.items()
                if host in candidates
                and len(self.free[host]) >= want.gpus
                and len(self._fitting_free(want, sized.shape, host)) >= want.gpus
            ]
        others = len(room) > 1 or (len(room) == 1 and room[0] is not want)
        return RESERVATION if others else PRIORITY

    # -- placement ------------------------------------------------------------------

    def _try_place(self, want: Want, sized: Sized, end: float) -> bool:
        best: tuple[int, str, list[GpuSlot]] | None = None
        free_on, size = self.free, want.gpus
        for host in self._candidate_hosts(want, sized):
            if len(free_on[host]) < size:  # too few free of any kind: no need to look
                continue
            free = self._fitting_free(want, sized.shape, host)
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
