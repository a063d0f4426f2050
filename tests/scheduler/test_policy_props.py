"""Property tests of the scheduling policy over generated clusters and lines.

Each property is one promise of the policy (see ``gputui.scheduler.policy.model``),
checked on views hypothesis builds: hosts of mixed pools and models, drained and
lost GPUs, running jobs and claims of every class, stopping ones, and a line of
jobs and claims with classes, fair-share factors, quotas, time limits.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_strategies import NOW, views

from gputui.scheduler.policy import model, passes
from gputui.scheduler.policy.model import INF, ClusterView, Decisions, Want
from gputui.scheduler.policy.reference import decide_ref
from gputui.scheduler.policy.rooms import start_on
from gputui.scheduler.policy.state import Hold

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BLOCKING = {model.DEPENDENCY, model.OFF_HOURS, model.CLASS_NOT_ALLOWED, model.HELD}


def _wants(view: ClusterView) -> dict[tuple[str, int], Want]:
    return {(w.kind, w.id): w for w in view.waiting}


def _given_on(decisions: Decisions) -> dict[str, list[tuple[tuple[str, int], tuple[str, ...]]]]:
    out: dict[str, list[tuple[tuple[str, int], tuple[str, ...]]]] = {}
    for p in decisions.place:
        out.setdefault(p.host, []).append(((p.kind, p.id), p.gpu_uuids))
    return out


@SETTINGS
@given(views())
def test_the_fast_pass_decides_exactly_as_the_reference(view: ClusterView) -> None:
    assert passes.decide(view) == decide_ref(view)


@SETTINGS
@given(views())
def test_every_request_is_decided_once_and_no_gpu_is_given_twice(view: ClusterView) -> None:
    d = passes.decide(view)
    decided = [(p.kind, p.id) for p in d.place] + [(w.kind, w.id) for w in d.wait]
    assert sorted(decided) == sorted(_wants(view))
    given_gpus = [u for p in d.place for u in p.gpu_uuids]
    assert len(given_gpus) == len(set(given_gpus))
    slots = {g.uuid: g for g in view.gpus}
    wants = _wants(view)
    for p in d.place:
        want = wants[p.kind, p.id]
        assert len(p.gpu_uuids) == want.gpus
        for uuid in p.gpu_uuids:
            gpu = slots[uuid]
            assert gpu.free and gpu.host == p.host and want.fits(gpu)


@SETTINGS
@given(views())
def test_night_jobs_never_start_outside_the_window(view: ClusterView) -> None:
    d = passes.decide(view)
    wants = _wants(view)
    for p in d.place:
        if not view.off_hours:
            assert not wants[p.kind, p.id].off_hours_only


@SETTINGS
@given(views())
def test_no_request_waits_for_gpus_given_to_one_behind_it(view: ClusterView) -> None:
    """A higher class never waits behind a lower one for cards it could use, and an
    over-quota job never takes GPUs a within-quota job could start on now: both are
    this, since the line puts within-quota first, then classes in order."""
    d = passes.decide(view)
    wants = _wants(view)
    line = sorted(view.waiting, key=Want.line_key)
    place = {(p.kind, p.id): p for p in d.place}
    held_hosts = {w.host for w in d.wait if w.host is not None}
    slots = {g.uuid: g for g in view.gpus}
    for w in d.wait:
        if w.reason in BLOCKING or w.reason == model.PREEMPTING:
            continue
        waiting = wants[w.kind, w.id]
        ahead = {(x.kind, x.id) for x in line[: line.index(waiting)]}
        for key, p in place.items():
            if key in ahead:
                continue
            # GPUs on that host free at the start that it fits, less what those ahead got.
            given_ahead = {
                u for k, q in place.items() if k in ahead and q.host == p.host for u in q.gpu_uuids
            }
            could = [
                g
                for g in view.gpus
                if g.host == p.host and g.free and waiting.fits(g) and g.uuid not in given_ahead
            ]
            if waiting.named and len([g for g in could if g.uuid in waiting.named]) < len(
                waiting.named
            ):
                continue
            if len(could) < waiting.gpus:
                continue
            # Only a reservation or a hold for one ahead of it may stand in the way.
            assert p.host in held_hosts, (w, p, [slots[u] for u in p.gpu_uuids])


@SETTINGS
@given(views())
def test_backfill_never_delays_a_reserved_start(view: ClusterView) -> None:
    d = passes.decide(view)
    wants = _wants(view)
    preempting_hosts = {w.host for w in d.wait if w.reason == model.PREEMPTING}
    for w in d.wait:
        if w.host is None or w.reason == model.PREEMPTING or w.host in preempting_hosts:
            continue
        want = wants[w.kind, w.id]
        slots = [g for g in view.gpus if g.host == w.host]
        placed_here = [p for p in d.place if p.host == w.host]
        taken = {u for p in placed_here for u in p.gpu_uuids}
        holds = [
            Hold(INF if r.ends_at is None else r.ends_at, r.gpus, r)
            for r in view.running
            if r.host == w.host
        ]
        for p in placed_here:
            limit = wants[p.kind, p.id].time_limit_s
            holds.append(Hold(INF if limit is None else NOW + limit, p.gpu_uuids))
        got = start_on(
            want.gpus,
            fitting=frozenset(g.uuid for g in slots if want.fits(g)),
            free={g.uuid for g in slots if g.free and g.uuid not in taken},
            holds=holds,
            now=NOW,
            grace_s=view.grace_s,
            held_for_others=set(),
        )
        assert got is not None
        expected = INF if w.start_at is None else w.start_at
        assert got[0] <= expected


@SETTINGS
@given(views())
def test_preemption_takes_only_eligible_victims(view: ClusterView) -> None:
    d = passes.decide(view)
    wants = _wants(view)
    running = {r.id: r for r in view.running if r.kind == "job"}
    seen: set[int] = set()
    for p in d.preempt:
        victim = running[p.id]
        assert p.id not in seen
        seen.add(p.id)
        for_want = wants[p.for_kind, p.for_id]
        assert view.preemption and for_want.kind == "job" and not for_want.over_quota
        assert not victim.stopping and victim.host == p.host
        assert NOW - victim.started_at >= view.min_runtime_s
        assert (victim.preemptible and victim.rank > for_want.rank) or (
            victim.over_quota and not for_want.over_quota
        )
        waits = {(w.kind, w.id): w for w in d.wait}
        assert waits[p.for_kind, p.for_id].reason == model.PREEMPTING


@settings(max_examples=200, deadline=None)
@given(views(max_waiting=1), st.integers(1, 8))
def test_preemption_picks_the_fewest_victims(view: ClusterView, gpus: int) -> None:
    """One job in line that fits nowhere free: the victims it picks are the fewest
    that make room on any one host (brute force over every set)."""
    want = Want("job", 5000, gpus, since=1.0, rank=0)
    view = ClusterView(
        gpus=view.gpus,
        waiting=(want,),
        running=tuple(r for r in view.running if not r.stopping),
        now=NOW,
        preemption=True,
        min_runtime_s=view.min_runtime_s,
    )
    d = passes.decide(view)
    if d.place:
        return
    best: int | None = None
    for host in {g.host for g in view.gpus}:
        slots = [g for g in view.gpus if g.host == host and want.fits(g)]
        free = sum(1 for g in slots if g.free)
        fit = {g.uuid for g in slots}
        cands = [
            r
            for r in view.running
            if r.host == host
            and r.kind == "job"
            and NOW - r.started_at >= view.min_runtime_s
            and ((r.preemptible and r.rank > 0) or r.over_quota)
        ]
        for size in range(len(cands) + 1):
            if best is not None and size >= best:
                break
            for combo in itertools.combinations(cands, size):
                freed = sum(1 for r in combo for u in r.gpus if u in fit)
                if free + freed >= gpus and len(fit) >= gpus:
                    best = size
                    break
    static = (model.DRAINED, model.FENCED, model.HOST_DOWN)
    if best is None or any(w.reason in static for w in d.wait):
        assert not d.preempt
        return
    assert len(d.preempt) == best
