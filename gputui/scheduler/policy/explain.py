"""Why a job waits and when it may start: ``gputui explain``'s pure part.

``estimate_start`` plays the line forward from the time limits: the work running
now ends at its limit, and every request ahead of the job (then the job itself)
starts at the soonest time some host has room for it for as long as its limit,
each GPU free from then on until the request's end. Work with no limit never
ends in that projection, so behind it there is no estimate: that is said, not
guessed. Preemption and jobs submitted later are not foreseen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from gputui.common.i18n import N_
from gputui.scheduler.policy.bookings import by_card, overlaps
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
from gputui.wire.words import Words, say

MAX_AHEAD = 300
"""Beyond this many requests ahead, no projection is made (it would be noise)."""

NO_ROOM_EVER = {
    DRAINED: N_("the GPUs that could take it are drained: no start until an admin undrains them"),
    FENCED: N_(
        "the GPUs that could take it are fenced (a hardware fault) or show a problem"
        " placement never uses, until it clears"
    ),
    HOST_DOWN: N_("the hosts that could take it are not answering"),
    LOGIN_USER: N_("only hosts the head reaches as another user could take it"),
    RESOURCES: N_("no host has enough GPUs of the kind it asks for"),
}
"""Why there is no estimate when no usable host could ever hold the job: what keeps
the GPUs out of use, not the work on them."""


@dataclass(frozen=True, slots=True)
class Projection:
    start: float | None
    """Estimated start (epoch s); None: no estimate."""
    host: str | None = None
    why_none: str = ""
    """Why there is none (English: what ``--json`` and old clients show)."""
    said: Words | None = None
    """``why_none``'s template and args, for a client to show in its language."""


def _none(words: Words) -> Projection:
    """No estimate, and why (in English and as words)."""
    return Projection(None, why_none=words.english(), said=words)


def line_of(view: ClusterView) -> list[Want]:
    return sorted(view.waiting, key=Want.line_key)


@dataclass(frozen=True, slots=True)
class Placed:
    """Where and when the projection starts a request."""

    want: Want
    start: float
    end: float | None
    """Its time limit's end; None: no limit (it never ends in the projection)."""
    host: str
    uuids: tuple[str, ...]
    place: int = 0
    """Its place in line, from 1 (``project``'s; 0: not counted)."""


class _Board:
    """The projection's cards: per GPU, the intervals it is taken, and the bookings
    on it (a booked window is taken for any request but the booking's own)."""

    def __init__(self, view: ClusterView) -> None:
        self.now = view.now
        self.busy: dict[str, list[tuple[float, float]]] = {}
        for run in view.running:
            end = INF if run.ends_at is None else max(run.ends_at, self.now)
            if run.stopping:
                end = self.now + view.grace_s
            for uuid in run.gpus:
                self.busy.setdefault(uuid, []).append((self.now, end))
        self.booked = by_card(view.bookings, self.now)
        self.bookings = {b.id: b for b in view.bookings if b.end > self.now}
        self.usable = [g for g in view.gpus if g.healthy and not g.drained]
        self._fitting: dict[tuple[object, ...], dict[str, list[str]]] = {}
        self._opens: dict[str, tuple[float, float]] = {}
        self._taken: dict[str, int] = {}
        """Per host: how many times a card of it was taken (what ``host_opens`` keeps by)."""
        self._host_opens: dict[tuple[object, ...], tuple[int, list[float]]] = {}
        """Per card: (from, when it is first open from then) to a request of no booking."""

    def fitting(self, want: Want) -> dict[str, list[str]]:
        """Per host (by name), the usable GPUs of the kind ``want`` asks for (worked
        out once per shape of request)."""
        known = self._fitting.get(want.shape)
        if known is None:
            known = {}
            for g in sorted(self.usable, key=lambda g: g.host):
                if want.fits(g):
                    known.setdefault(g.host, []).append(g.uuid)
            self._fitting[want.shape] = known
        return known

    def take(self, host: str, uuids: list[str], start: float, end: float) -> None:
        self._taken[host] = self._taken.get(host, 0) + 1
        for uuid in uuids:
            self.busy.setdefault(uuid, []).append((start, end))
            self._opens.pop(uuid, None)

    def free(self, want: Want, uuid: str, start: float, end: float) -> bool:
        if not _free_from(self.busy.get(uuid, []), start, end):
            return False
        if want.booking is not None:  # only its booking's cards, only while it is on
            own = self.bookings.get(want.booking)
            return own is not None and uuid in own.uuids and own.start <= start < own.end
        return not any(overlaps(start, end, b.start, b.end) for b in self.booked.get(uuid, ()))

    def opens(self, want: Want, uuid: str, earliest: float) -> float:
        """The first moment from ``earliest`` at which the card is open to ``want``
        (taken by nothing, in no booking but its own; INF: never): no start on it
        comes sooner. Kept per card for the common ask (no booking of its own) until
        the card is taken again."""
        if want.booking is not None:
            own = self.bookings.get(want.booking)
            if own is None or uuid not in own.uuids or own.end <= earliest:
                return INF
            return _open_from(self.busy.get(uuid, []), max(earliest, own.start))
        known = self._opens.get(uuid)
        if known is not None and known[0] == earliest:
            return known[1]
        spans = self.busy.get(uuid, []) + [(b.start, b.end) for b in self.booked.get(uuid, ())]
        t = _open_from(spans, earliest)
        self._opens[uuid] = (earliest, t)
        return t

    def host_opens(self, want: Want, host: str, uuids: list[str], earliest: float) -> list[float]:
        """When each of ``uuids`` (``host``'s cards of ``want``'s kind) is first open to
        it, soonest first; kept until a card of the host is taken again."""
        if want.booking is not None:
            return sorted(self.opens(want, u, earliest) for u in uuids)
        key = (want.shape, host, earliest)
        known = self._host_opens.get(key)
        if known is not None and known[0] == self._taken.get(host, 0):
            return known[1]
        opens = sorted(self.opens(want, u, earliest) for u in uuids)
        self._host_opens[key] = (self._taken.get(host, 0), opens)
        return opens

    def times(self, want: Want, uuids: list[str], earliest: float) -> list[float]:
        """When room may open for ``want`` on ``uuids`` (one host's): ``earliest``,
        then as work or a booking on them ends (its own booking: as that starts).
        Room opens at no other time, so the soonest start is one of these."""
        ends = {earliest}
        for uuid in uuids:
            ends.update(e for _, e in self.busy.get(uuid, ()) if earliest < e < INF)
            ends.update(b.end for b in self.booked.get(uuid, ()) if earliest < b.end)
        own = self.bookings.get(want.booking) if want.booking is not None else None
        if own is not None and own.start > earliest:
            ends.add(own.start)
        return sorted(ends)


def play(view: ClusterView, wants: list[Want], opens_at: float | None) -> Iterator[Placed | None]:
    """The line played forward from the time limits: for each of ``wants`` (in line
    order, each after those before it), where and when it starts, or None (blocked,
    or no room before work with no limit ends). ``opens_at``: when the off-hours
    window next opens (for a night job)."""
    board = _Board(view)
    for want in wants:
        if want.blocked is not None:
            yield None
            continue
        earliest = view.now
        if want.off_hours_only and opens_at is not None:
            earliest = max(earliest, opens_at)
        got = _soonest(want, board, earliest)
        if got is None:
            yield None
            continue
        start, host, uuids = got
        end = INF if want.time_limit_s is None else start + want.time_limit_s
        board.take(host, uuids, start, end)
        yield Placed(want, start, None if end == INF else end, host, tuple(uuids))


def project(view: ClusterView, opens_at: float | None, limit: int) -> list[Placed]:
    """The estimated start of the first ``limit`` requests in line (those with one),
    from one play of the line: what the week board draws. Costs what one
    ``estimate_start`` of the ``limit``-th request costs."""
    line = line_of(view)[: max(0, min(limit, MAX_AHEAD))]
    played = enumerate(play(view, line, opens_at), start=1)
    return [dataclasses.replace(p, place=i) for i, p in played if p is not None]


def estimate_start(view: ClusterView, target: Want, opens_at: float | None = None) -> Projection:
    """When ``target`` would start if everything ran to its time limit.

    ``opens_at``: when the off-hours window next opens (for a night job)."""
    line = line_of(view)
    ahead = line[: line.index(target)] if target in line else line
    if len(ahead) > MAX_AHEAD:
        return _none(say(N_("more than {count} requests ahead"), count=MAX_AHEAD))
    hosts: dict[str, list[GpuSlot]] = {}
    for g in view.gpus:
        hosts.setdefault(g.host, []).append(g)
    blocked = static_reason(target, hosts)
    if blocked is not None:
        if blocked in NO_ROOM_EVER:
            return _none(say(NO_ROOM_EVER[blocked]))
        return Projection(None, why_none=blocked)
    if target not in line:
        return _none(say(N_("not in line")))
    wants = [w for w in ahead if w.blocked is None] + [replace_blocked(target)]
    *_, got = play(view, wants, opens_at)
    if got is None:
        return _none(say(N_("no room for it before work with no time limit ends")))
    return Projection(got.start, got.host)


def replace_blocked(want: Want) -> Want:
    """``want`` as the projection places it even when it waits with a reason decided
    before placement (the question is when it could start once that is gone)."""
    return want if want.blocked is None else dataclasses.replace(want, blocked=None)


def _open_from(spans: list[tuple[float, float]], t: float) -> float:
    """The first moment from ``t`` that none of ``spans`` ([start, end)) holds."""
    for s, e in sorted(spans):
        if s > t:
            break
        t = max(t, e)
    return t


def _free_from(intervals: list[tuple[float, float]], start: float, end: float) -> bool:
    return all(e <= start or s >= end for s, e in intervals)


def _soonest(want: Want, board: _Board, earliest: float) -> tuple[float, str, list[str]] | None:
    """The soonest (start, host, GPUs) with room for ``want`` for its whole limit:
    best fit (fewest free fitting GPUs, then the first host by name) among the hosts
    with room at that time. A host cannot start it before the moment enough of its
    cards are open at once (``opens``), so hosts are asked in that order, each only
    at the times its own cards free up from then, and none past the best start found."""
    bounds = []
    for host, uuids in board.fitting(want).items():
        if len(uuids) >= want.gpus:
            bound = board.host_opens(want, host, uuids, earliest)[want.gpus - 1]
            if bound < INF:
                bounds.append((bound, host, uuids))
    bounds.sort(key=lambda b: (b[0], b[1]))
    best: tuple[float, int, str, list[str]] | None = None
    for bound, host, uuids in bounds:
        if best is not None and bound > best[0]:
            break
        for t in board.times(want, uuids, bound):
            if best is not None and t > best[0]:
                break
            end = INF if want.time_limit_s is None else t + want.time_limit_s
            free = [u for u in uuids if board.free(want, u, t, end)]
            if len(free) >= want.gpus:
                if best is None or (t, len(free), host) < (best[0], best[1], best[2]):
                    best = (t, len(free), host, free[: want.gpus])
                break
    return None if best is None else (best[0], best[2], best[3])
