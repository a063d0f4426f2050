"""What booking requests do to the store, and what the head does as bookings start
and end: cards held ahead for a window (``gputui book``), honoured by the pass as a
reservation (``policy.bookings``).

Like ``claims``, each function runs inside one open transaction in the head's
writer and returns the result body or raises ``Refusal``. ``tick`` runs before the
pass of a batch that has a booking's edge due (``Ticked.due``: the next start or
end) or follows a change to bookings (``Context.bookings_moved``: one made or ended
or its claim ended); the batches between reuse its answer. There a booking whose
start has come becomes its booker's claim (unless the booker queued jobs for it
with ``--booking ID``), work that is not its own is preempted off its cards, and one
whose claim was released (idle, or by hand) or whose end has come is over.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.head.actions import Context, audited, notice, stop_job
from gputui.scheduler.head.claims import end_claim, resolve_refs
from gputui.scheduler.policy import bookings as rules
from gputui.scheduler.policy import line
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy.line import HOLDING
from gputui.scheduler.policy.shares import week_start
from gputui.scheduler.server.op_args import BookArgs, UnbookArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.read_args import BookingsArgs
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Booking, Claim
from gputui.wire.words import At, Words, say

LIVE = ("booked", "active")
"""A booking in these states holds its cards (until its end)."""
PAST_SLACK_S = 300.0
"""A start this far in the past is taken as now (a clock a little behind)."""
WEEK_S = 7 * 86400.0


def as_policy(item: Booking) -> policy.Booked:
    assert item.id is not None
    return policy.Booked(
        item.id,
        item.user,
        tuple(json.loads(item.gpu_uuids)),
        item.start_at,
        item.end_at,
        item.maint,
    )


def booking_view(item: Booking) -> dict[str, Any]:
    return {
        "id": item.id,
        "user": item.user,
        "group": item.group,
        "host": item.host,
        "gpu_uuids": json.loads(item.gpu_uuids),
        "pool": item.pool,
        "start": item.start_at,
        "end": item.end_at,
        "note": item.note,
        "maint": item.maint,
        "state": item.state,
        "claim_id": item.claim_id,
        "created_at": item.created_at,
        "ended_at": item.ended_at,
        "end_reason": item.end_reason,
    }


def in_the_way(other: policy.Booked) -> Words:
    """The one line that names a booking in the way."""
    return say(
        N_("refused: the cards are taken by maintenance booking {id} of {user} ({start} - {end})")
        if other.maint
        else N_("refused: the cards are taken by booking {id} of {user} ({start} - {end})"),
        id=other.id,
        user=other.user,
        start=At(other.start),
        end=At(other.end),
    )


def _check_window(ctx: Context, start: float, end: float) -> None:
    """How far ahead and how long (``scheduler.bookings``), for anyone but admins."""
    limits = ctx.rules.sched.bookings
    if end - start > limits.max_hours * 3600:
        raise Refusal(
            "limit",
            say(
                N_("book: longer than {max_hours} h (bookings.max_hours)"),
                max_hours=f"{limits.max_hours:g}",
            ),
        )
    if start > ctx.now + limits.max_days_ahead * 86400:
        raise Refusal(
            "limit",
            say(
                N_("book: starts more than {max_days_ahead} days ahead (bookings.max_days_ahead)"),
                max_days_ahead=f"{limits.max_days_ahead:g}",
            ),
        )


def _check_limits(
    tx: Tx, ctx: Context, group: str, window: tuple[float, float], cards: int
) -> None:
    """GPU-hours a week per group (``scheduler.bookings``), for anyone but admins:
    each week the window touches, Monday to Monday."""
    start, end = window
    limits = ctx.rules.sched.bookings
    mine = [as_policy(b) for b in tx.bookings(LIVE, ending_after=ctx.now) if b.group == group]
    new = policy.Booked(0, "", tuple(f"new-{i}" for i in range(cards)), start, end)
    week = week_start(start)
    while week < end:
        used = rules.hours_in_week([*mine, new], week)
        if used > limits.gpu_hours_per_week + 1e-9:
            raise Refusal(
                "limit",
                say(
                    N_(
                        "book: group {group} would book {used} GPU-hours in the week of"
                        " {when}, over its {gpu_hours_per_week} GPU-hours a week"
                        " (bookings.gpu_hours_per_week)"
                    ),
                    group=group,
                    used=f"{used:.1f}",
                    when=At(week),
                    gpu_hours_per_week=f"{limits.gpu_hours_per_week:g}",
                ),
            )
        week += WEEK_S


def held_into(tx: Tx, ctx: Context, start: float) -> frozenset[str]:
    """Cards held now by work that would still hold them at ``start`` and may not be
    preempted for a booking: a claim, or a job that is not preemptible, with no end
    or an end after ``start``."""
    out: set[str] = set()
    for job in tx.jobs(HOLDING):
        ends = None if job.time_limit_s is None else (job.started_at or ctx.now) + job.time_limit_s
        if not line.preemptible(job, ctx.rules.sched) and (ends is None or ends > start):
            out.update(json.loads(job.gpu_uuids))
    for claim in tx.claims(("active",)):
        if claim.expires_at is None or claim.expires_at > start:
            out.update(json.loads(claim.gpu_uuids))
    return frozenset(out)


def _choose(
    want: policy.Want,
    ctx: Context,
    live: Sequence[policy.Booked],
    window: tuple[float, float],
    held: frozenset[str] = frozenset(),
) -> tuple[str, tuple[str, ...]]:
    """The host and cards for a booking of ``want.gpus`` free of other bookings in
    the window and of ``held`` cards: the host with the fewest such cards that hold
    it; else the refusal that names the booking in the way."""
    start, end = window
    hosts = policy.by_host(g for g in ctx.slots if want.fits(g))
    clashes: list[policy.Booked] = []
    best: tuple[int, str, list[str]] | None = None
    for host, slots in sorted(hosts.items()):
        open_cards: list[str] = []
        for g in slots:
            probe = policy.Booked(0, "", (g.uuid,), start, end)
            other = rules.conflict(probe, live)
            if other is None:
                if g.uuid not in held:
                    open_cards.append(g.uuid)
            elif len(slots) >= want.gpus:
                clashes.append(other)
        if len(open_cards) >= want.gpus and (best is None or len(open_cards) < best[0]):
            best = (len(open_cards), host, open_cards)
    if best is not None:
        return best[1], tuple(best[2][: want.gpus])
    if clashes:
        raise Refusal("conflict", in_the_way(min(clashes, key=lambda b: (b.start, b.id))))
    if held:
        raise Refusal(
            "busy",
            say(
                N_(
                    "book: {gpus} card(s) of the kind asked for are held into that window"
                    " by work that is not preemptible (book later, or name cards: admins"
                    " may)"
                ),
                gpus=want.gpus,
            ),
        )
    raise Refusal(
        "impossible",
        say(N_("book: no host has {gpus} cards of the kind asked for"), gpus=want.gpus),
    )


def book(tx: Tx, caller: Caller, args: BookArgs, ctx: Context) -> dict[str, Any]:
    if args.maint and not caller.admin:
        raise Refusal("denied", say(N_("book: a maintenance booking (--maint) is for admins")))
    start = max(args.start, ctx.now) if args.start >= ctx.now - PAST_SLACK_S else args.start
    if start < ctx.now:
        raise Refusal(
            "bad-args", say(N_("book: the start ({when}) is in the past"), when=At(args.start))
        )
    end = start + args.duration_s
    group = ctx.rules.sched.group_of(caller.user, caller.groups, caller.group)
    if not caller.admin:
        _check_window(ctx, start, end)
    live = [as_policy(b) for b in tx.bookings(LIVE, ending_after=ctx.now)]
    if args.gpu_refs:
        named = resolve_refs(args.gpu_refs, ctx.slots)
        hosts = {s.host for s in ctx.slots if s.uuid in named}
        if len(hosts) != 1:
            raise Refusal("bad-args", say(N_("book: the cards named are on different hosts")))
        other = rules.conflict(policy.Booked(0, caller.user, named, start, end), live)
        if other is not None:
            raise Refusal("conflict", in_the_way(other))
        if not caller.admin and set(named) & held_into(tx, ctx, start):
            raise Refusal(
                "busy",
                say(
                    N_(
                        "book: a card named is held into that window by work that is not"
                        " preemptible"
                    )
                ),
            )
        host, cards = hosts.pop(), named
    else:
        want = policy.Want(
            "claim", 0, args.gpus or 1, pool=args.pool, host=args.host, model=args.model
        )
        why = policy.impossible_words(want, ctx.slots)
        if why is not None:
            raise Refusal("impossible", say(N_("book: {why}"), why=why))
        held = frozenset() if caller.admin else held_into(tx, ctx, start)
        host, cards = _choose(want, ctx, live, (start, end), held)
    if not caller.admin:
        _check_limits(tx, ctx, group, (start, end), len(cards))
    pools = {s.pool for s in ctx.slots if s.uuid in cards}
    item = Booking(
        uid=caller.uid,
        user=caller.user,
        group=group,
        host=host,
        gpu_uuids=json.dumps(list(cards)),
        pool=pools.pop() if len(pools) == 1 else None,
        start_at=start,
        end_at=end,
        note=args.note or (args.reason or "" if args.maint else ""),
        maint=args.maint,
        created_at=ctx.now,
    )
    tx.add_booking(item)
    ctx.bookings_moved = True
    if args.maint or caller.admin:
        audited(
            tx,
            ctx,
            caller,
            "book-maint" if args.maint else "book",
            target=f"booking {item.id}",
            owner=caller.user,
            reason=" ".join((args.reason or args.note).split()),
        )
    ctx.changed = True
    return {"booking": booking_view(item)}


def unbook(tx: Tx, caller: Caller, args: UnbookArgs, ctx: Context) -> dict[str, Any]:
    item = tx.booking(args.booking_id)
    if item is None or item.state not in LIVE:
        raise Refusal(
            "unknown-booking",
            say(N_("no booking {booking_id} booked or on"), booking_id=args.booking_id),
        )
    if not caller.owns(item.uid):
        if not caller.admin:
            raise Refusal(
                "denied",
                say(
                    N_("booking {id} belongs to {user}; only they or an admin may unbook it"),
                    id=item.id or 0,
                    user=item.user,
                ),
            )
        if not args.reason or not args.reason.strip():
            raise Refusal(
                "reason-required",
                say(
                    N_("booking {id} belongs to {user}: an admin must give --reason"),
                    id=item.id or 0,
                    user=item.user,
                ),
            )
        audited(
            tx,
            ctx,
            caller,
            "unbook",
            target=f"booking {item.id}",
            owner=item.user,
            reason=args.reason.strip(),
        )
        notice(
            tx,
            ctx,
            item.uid,
            "admin",
            say(
                N_("booking {id}: unbooked by {admin} (admin): {reason}"),
                id=item.id or 0,
                admin=caller.user,
                reason=args.reason.strip(),
            ),
        )
    _end(tx, item, ctx, "cancelled", f"unbooked by {caller.user}")
    return {"booking": booking_view(item)}


def _end(tx: Tx, item: Booking, ctx: Context, state: str, why: str) -> None:
    if item.claim_id is not None:
        claim = tx.claim(item.claim_id)
        if claim is not None and claim.state in ("waiting", "active"):
            end_claim(tx, claim, ctx, "released", why)
    item.state, item.ended_at, item.end_reason = state, ctx.now, why[:512]
    ctx.changed = ctx.bookings_moved = True


def listing(tx: Tx, args: BookingsArgs, now: float) -> dict[str, Any]:
    """Bookings by start: those not yet over (``all``: every one), within ``since`` ..
    ``until`` when given."""
    states = None if args.all else LIVE
    after = args.since if args.since is not None else (None if args.all else now)
    found = tx.bookings(states, ending_after=after)
    if args.until is not None:
        found = [b for b in found if b.start_at < args.until]
    return {"bookings": [booking_view(b) for b in found]}


@dataclass(frozen=True, slots=True)
class Ticked:
    """What ``tick`` found: the bookings the pass honours, and when the next of them
    starts or ends (``math.inf``: none does), before which another tick finds the
    same unless bookings change."""

    booked: tuple[policy.Booked, ...]
    due: float


def tick(tx: Tx, ctx: Context) -> Ticked:
    """Bookings whose start or end has come, and work on cards whose booking has
    begun; the bookings the pass honours now, and when the next edge is due."""
    live = tx.bookings(LIVE, ending_after=None)
    out: list[policy.Booked] = []
    started = False
    due = math.inf
    for item in live:
        if item.end_at <= ctx.now:
            _end(tx, item, ctx, "done", "its window ended")
            continue
        if item.start_at <= ctx.now and item.state == "booked":
            _start(tx, item, ctx)
            started = True
        elif item.state == "active" and item.claim_id is not None:
            claim = tx.claim(item.claim_id)
            if claim is not None and claim.state not in ("waiting", "active"):
                why = f"its claim {claim.id} ended: {claim.release_reason or claim.state}"
                _end(tx, item, ctx, "released", why)
                continue
        if item.state == "booked":
            due = min(due, item.start_at)
        due = min(due, item.end_at)
        out.append(as_policy(item))
    if started:  # only then: nothing else is let onto a booking's cards once it is on
        _preempt_off(tx, ctx, out)
    return Ticked(tuple(out), due)


def _start(tx: Tx, item: Booking, ctx: Context) -> None:
    item.state = "active"
    ctx.changed = ctx.bookings_moved = True
    cards = json.loads(item.gpu_uuids)
    if item.maint:
        return
    if any(j.booking_id == item.id for j in tx.jobs(("queued",), user=item.user)):
        notice(
            tx,
            ctx,
            item.uid,
            "booking",
            say(
                N_("booking {id} started: its cards run your jobs queued --booking {id}"),
                id=item.id or 0,
            ),
        )
        return
    claim = tx.add_claim(
        Claim(
            uid=item.uid,
            user=item.user,
            group=item.group,
            gpus=len(cards),
            wanted=json.dumps(cards),
            host_constraint=item.host,
            note=(item.note or f"booking {item.id}")[:512],
            state="waiting",
            reason="Resources",
            created_at=ctx.now,
            max_duration_s=max(item.end_at - ctx.now, 1.0),
            idle_release_s=ctx.rules.claim_idle_s,
            booking_id=item.id,
        )
    )
    item.claim_id = claim.id
    notice(
        tx,
        ctx,
        item.uid,
        "booking",
        say(
            N_(
                "booking {id} started: its {n} card(s) on {host} are your claim {claim} until {end}"
            ),
            id=item.id or 0,
            n=len(cards),
            host=str(item.host),
            claim=claim.id or 0,
            end=At(item.end_at),
        ),
        claim_id=claim.id,
    )


def _preempt_off(tx: Tx, ctx: Context, live: Sequence[policy.Booked]) -> None:
    """Preempt what runs on the cards of a booking that has begun and is not its own."""
    jobs = tx.jobs(("starting", "running"))
    running = [
        policy.Running("job", j.id, j.host, tuple(json.loads(j.gpu_uuids)), booking=j.booking_id)
        for j in jobs
        if j.id is not None and j.host is not None
    ]
    victims = set(rules.to_preempt(running, live, ctx.now))
    for job in jobs:
        if job.id not in victims:
            continue
        held = set(json.loads(job.gpu_uuids))
        owner = next(b for b in live if b.active(ctx.now) and held & set(b.uuids))
        said = say(
            N_("preempted: booking {booking} of {user} starts on its cards"),
            booking=owner.id or 0, user=owner.user,
        )  # fmt: skip
        why = said.english()
        stop_job(job, ctx, "preempt", "preempting")
        job.reason = why[:512]
        job.preempted_by, job.preempted_at = why[:512], ctx.now
        notice(
            tx,
            ctx,
            job.uid,
            "preempted",
            say(
                N_(
                    "job {id} ({name}) is being preempted: {why}; it gets SIGTERM, {grace} s,"
                    " then SIGKILL, and is requeued"
                ),
                id=job.id or 0,
                name=job.name,
                why=said,
                grace=f"{ctx.rules.kill_grace_s:g}",
            ),
            job_id=job.id,
        )
        ctx.changed = True
