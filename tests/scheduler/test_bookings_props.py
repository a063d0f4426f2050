"""Bookings in the pass, as properties over random clusters, lines and bookings: no
work is placed so that it runs into a booking that is not its own (preemptible work
excepted, which the start then preempts), the fast pass and the plain reference
agree with bookings about, and bookings made one after another never share a card
in overlapping windows."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_strategies import NOW, views

from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.bookings import _choose
from gputui.scheduler.policy import bookings as rules
from gputui.scheduler.policy.model import Booked, ClusterView, GpuSlot, Running, Want
from gputui.scheduler.policy.passes import decide, end_of
from gputui.scheduler.policy.reference import decide_ref
from gputui.scheduler.server.wire import Refusal


@st.composite
def booked_views(draw: st.DrawFn) -> ClusterView:
    """A ``views`` cluster with bookings (never two on a card at once), some ahead,
    some on now, a few maintenance windows; some requests preemptible, some naming a
    booking."""
    view = draw(views(max_hosts=3, max_waiting=16))
    hosts: dict[str, list[GpuSlot]] = {}
    for g in view.gpus:
        hosts.setdefault(g.host, []).append(g)
    made: list[Booked] = []
    for ident in range(1, draw(st.integers(0, 6)) + 1):
        host = draw(st.sampled_from(sorted(hosts)))
        cards = draw(st.lists(st.sampled_from(hosts[host]), min_size=1, max_size=4, unique=True))
        start = NOW + draw(st.floats(-20_000, 60_000, allow_nan=False))
        end = start + draw(st.floats(600, 80_000, allow_nan=False))
        user = draw(st.sampled_from(("alice", "bob")))
        maint = draw(st.booleans()) and draw(st.booleans())
        new = Booked(ident, user, tuple(g.uuid for g in cards), start, end, maint)
        if end > NOW and rules.conflict(new, made) is None:
            made.append(new)
    waiting = []
    for want in view.waiting:
        booking = None
        if made and draw(st.booleans()) and draw(st.booleans()):
            booking = draw(st.sampled_from(made)).id
        waiting.append(replace(want, preemptible=draw(st.booleans()), booking=booking))
    return replace(view, waiting=tuple(waiting), bookings=tuple(made))


def allowed(want: Want, uuid: str, bookings: tuple[Booked, ...]) -> bool:
    """Whether ``want`` may hold card ``uuid`` from now to its time limit's end."""
    end = end_of(want, NOW)
    on_card = [b for b in bookings if uuid in b.uuids and b.end > NOW]
    if want.booking is not None and not any(
        b.id == want.booking and b.start <= NOW < b.end for b in on_card
    ):
        return False  # a request naming a booking goes on its cards alone, while it is on
    for b in on_card:
        if b.id == want.booking:
            continue
        if not (b.end > NOW and b.start < end):
            continue  # the windows do not meet
        if b.start > NOW and want.preemptible and not b.maint:
            continue  # it may run until the start, when it is preempted
        return False
    return True


@settings(max_examples=400)
@given(booked_views())
def test_nothing_is_placed_so_that_it_runs_into_a_booking(view: ClusterView) -> None:
    decisions = decide(view)
    wants = {(w.kind, w.id): w for w in view.waiting}
    for place in decisions.place:
        want = wants[place.kind, place.id]
        for uuid in place.gpu_uuids:
            assert allowed(want, uuid, view.bookings), (want, uuid, view.bookings)


@settings(max_examples=300)
@given(booked_views())
def test_the_pass_and_the_reference_decide_the_same_with_bookings(view: ClusterView) -> None:
    fast, plain = decide(view), decide_ref(view)
    assert sorted(fast.place, key=repr) == sorted(plain.place, key=repr)
    assert sorted(fast.wait, key=repr) == sorted(plain.wait, key=repr)


@settings(max_examples=300)
@given(booked_views())
def test_work_on_booked_cards_is_preempted_at_the_start(view: ClusterView) -> None:
    """Whatever the pass let onto a booking's cards (preemptible work) and still runs
    at its start is preempted then; work elsewhere, or a booking's own, is not."""
    decisions = decide(view)
    wants = {(w.kind, w.id): w for w in view.waiting}
    placed = [
        Running("job", p.id, p.host, p.gpu_uuids, booking=wants[p.kind, p.id].booking)
        for p in decisions.place
        if p.kind == "job"
    ]
    for b in view.bookings:
        if b.start <= NOW:
            continue
        still = [
            r
            for r in placed
            if end_of(wants["job", r.id], NOW) > b.start  # it would still run then
        ]
        preempted = set(rules.to_preempt(still, view.bookings, b.start))
        on = {u: x for x in view.bookings if x.start <= b.start < x.end for u in x.uuids}
        for r in still:
            theirs = [on[u] for u in r.gpus if u in on]
            should = any(x.id != r.booking for x in theirs)
            assert (r.id in preempted) == should, (r, theirs)
            if set(r.gpus) & set(b.uuids) and r.booking != b.id:
                assert wants["job", r.id].preemptible  # only preemptible work was let on
                assert r.id in preempted


def _ctx(view: ClusterView) -> Context:
    return Context(now=NOW, slots=view.gpus, pools=frozenset(g.pool for g in view.gpus))


@settings(max_examples=300)
@given(views(max_hosts=3, max_waiting=1), st.data())
def test_bookings_made_one_after_another_never_share_a_card_at_once(
    view: ClusterView, data: st.DataObject
) -> None:
    ctx = _ctx(view)
    made: list[Booked] = []
    refused = 0
    for ident in range(1, data.draw(st.integers(1, 12)) + 1):
        gpus = data.draw(st.integers(1, 4))
        pool = data.draw(st.sampled_from((None, "a100", "3090")))
        start = NOW + data.draw(st.floats(0, 50_000, allow_nan=False))
        end = start + data.draw(st.floats(60, 50_000, allow_nan=False))
        want = Want("claim", 0, gpus, pool=pool)
        try:
            host, cards = _choose(want, ctx, made, (start, end))
        except Refusal as refusal:
            refused += 1
            assert refusal.code in ("conflict", "impossible")
            if refusal.code == "conflict":
                assert "booking " in refusal.message and "\n" not in refusal.message
            continue
        assert len(cards) == gpus and {g.host for g in view.gpus if g.uuid in cards} == {host}
        made.append(Booked(ident, "alice", cards, start, end))
    for i, a in enumerate(made):
        for b in made[i + 1 :]:
            if set(a.uuids) & set(b.uuids):
                assert not rules.overlaps(a.start, a.end, b.start, b.end), (a, b)
