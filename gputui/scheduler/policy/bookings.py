"""Bookings (advance reservations of named cards for a window): the pure rules.

A booking holds a set of cards from ``start`` to ``end``. Two bookings never share a
card in overlapping windows (``conflict``). Before its start the pass keeps off the
booked cards any work whose time limit would still run at the start, unless that
work is preemptible (it is then preempted at the start: ``to_preempt``); from its
start to its end only the booking's own work (its claim, or the booker's jobs
submitted with ``--booking ID``) goes there (``barred``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gputui.scheduler.policy.model import Booked, Running, Want

__all__ = ["Booked", "barred", "conflict", "hours_in_week", "overlaps", "to_preempt"]


def overlaps(a_start: float, a_end: float, b_start: float, b_end: float) -> bool:
    """Whether the half-open windows [a_start, a_end) and [b_start, b_end) meet."""
    return a_start < b_end and b_start < a_end


def conflict(new: Booked, existing: Iterable[Booked]) -> Booked | None:
    """The first of ``existing`` (by start, then id) that shares a card with ``new``
    in an overlapping window, or None."""
    cards = set(new.uuids)
    for other in sorted(existing, key=lambda b: (b.start, b.id)):
        if other.id == new.id:
            continue
        if overlaps(new.start, new.end, other.start, other.end) and cards.intersection(other.uuids):
            return other
    return None


def by_card(bookings: Iterable[Booked], now: float) -> dict[str, list[Booked]]:
    """Per card: the bookings not yet over at ``now``."""
    out: dict[str, list[Booked]] = {}
    for b in bookings:
        if b.end > now:
            for uuid in b.uuids:
                out.setdefault(uuid, []).append(b)
    return out


def until_free(cards: dict[str, list[Booked]]) -> dict[str, float]:
    """Per booked card (``by_card``): when the last booking on it ends."""
    return {uuid: max(b.end for b in on_card) for uuid, on_card in cards.items()}


def card_barred(want: Want, end: float, now: float, on_card: Sequence[Booked]) -> bool:
    """Whether ``want``, running from ``now`` to ``end``, may not take a card with
    these bookings (``by_card``'s list for it)."""
    for b in on_card:
        if want.booking == b.id:
            continue
        if not overlaps(now, end, b.start, b.end):
            continue
        if b.start > now and want.preemptible and not b.maint:
            continue  # it may run until the start, then it is preempted
        return True
    return False


def allowed_only(want: Want, on_card: Sequence[Booked], now: float) -> bool:
    """A request naming a booking (``--booking ID``) goes only on that booking's
    cards, and only while it is on."""
    return any(b.id == want.booking and b.active(now) for b in on_card)


def barred(
    want: Want, end: float, now: float, cards: dict[str, list[Booked]], uuids: Iterable[str]
) -> set[str]:
    """Those of ``uuids`` that ``want`` (running from ``now`` to ``end``) may not take."""
    out: set[str] = set()
    for uuid in uuids:
        on_card = cards.get(uuid, ())
        if (want.booking is not None and not allowed_only(want, on_card, now)) or (
            on_card and card_barred(want, end, now, on_card)
        ):
            out.add(uuid)
    return out


def to_preempt(running: Iterable[Running], bookings: Iterable[Booked], now: float) -> list[int]:
    """Jobs to preempt now: those holding a card of a booking that has started and
    is not theirs (only preemptible work was let onto booked cards; anything else
    there is preempted too rather than let the booking down)."""
    live = [b for b in bookings if b.active(now)]
    if not live:
        return []
    cards = {u: b for b in live for u in b.uuids}
    out: list[int] = []
    for run in running:
        if run.kind != "job" or run.stopping:
            continue
        if any(u in cards and cards[u].id != run.booking for u in run.gpus):
            out.append(run.id)
    return out


def hours_in_week(bookings: Iterable[Booked], week_start: float) -> float:
    """GPU-hours of ``bookings`` that fall in the week from ``week_start``."""
    week_end = week_start + 7 * 86400.0
    total = 0.0
    for b in bookings:
        lo, hi = max(b.start, week_start), min(b.end, week_end)
        if hi > lo:
            total += (hi - lo) * len(b.uuids) / 3600.0
    return total
