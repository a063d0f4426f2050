"""Placement of MIG slices, over generated clusters of whole cards, MIG-enabled cards
and their slices of mixed profiles, busy or free, and a line asking for profiles.

The promises: a slice is a schedulable unit, given to one job at a time and only to
a request for its profile; a MIG-enabled card is never placed as a whole card; a
request without ``--mig`` never gets a slice; the fast pass decides as the reference.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.scheduler.policy import model, passes
from gputui.scheduler.policy.model import ClusterView, GpuSlot, Running, Want
from gputui.scheduler.policy.reference import decide_ref
from gputui.scheduler.policy.vendors import card_pool

NOW = 100_000.0
PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb")
LAYOUTS = (("1g.10gb",) * 7, ("3g.40gb", "2g.20gb", "2g.20gb"), ("1g.10gb", "3g.40gb"))
# Strategies made once, not per draw (hypothesis validates and labels each new one).
_LAYOUT = st.sampled_from(LAYOUTS)
_LIMIT = st.one_of(st.none(), st.floats(60, 40_000, allow_nan=False))
_KIND = st.sampled_from(("job", "job", "claim"))
_MIG = st.one_of(st.none(), st.sampled_from(PROFILES))
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mig_views(draw: st.DrawFn) -> ClusterView:
    gpus: list[GpuSlot] = []
    for h in range(draw(st.integers(1, 3))):
        host = f"h{h}"
        for i in range(draw(st.integers(1, 4))):
            uuid = f"GPU-{h}-{i}"
            if not draw(st.booleans()):
                gpus.append(GpuSlot(uuid, host, i, "a100", "NVIDIA A100-SXM4-80GB"))
                continue
            gpus.append(GpuSlot(uuid, host, i, "a100", "NVIDIA A100-SXM4-80GB", mig_enabled=True))
            for k, profile in enumerate(draw(_LAYOUT)):
                gpus.append(
                    GpuSlot(
                        f"MIG-{h}-{i}-{k}",
                        host,
                        i,
                        "a100",
                        f"NVIDIA A100-SXM4-80GB MIG {profile}",
                        healthy=draw(st.integers(0, 9)) > 0,
                        mig_profile=profile,
                    )
                )
    running: list[Running] = []
    busy: set[str] = set()
    for n, gpu in enumerate(gpus):
        if gpu.mig_enabled or not draw(st.booleans()):
            continue
        busy.add(gpu.uuid)
        limit = draw(_LIMIT)
        running.append(
            Running(
                "job",
                n + 1,
                gpu.host,
                (gpu.uuid,),
                rank=draw(st.integers(0, 2)),
                preemptible=draw(st.booleans()),
                started_at=NOW - 30_000,
                ends_at=None if limit is None else NOW + limit,
            )
        )
    gpus = [g.held(g.uuid in busy) for g in gpus]
    waiting = [
        Want(
            kind=draw(_KIND),
            id=1000 + n,
            gpus=draw(st.integers(1, 3)),
            user=f"u{draw(st.integers(0, 2))}",
            mig=draw(_MIG),
            since=float(n),
            rank=draw(st.integers(0, 2)),
            time_limit_s=draw(_LIMIT),
        )
        for n in range(draw(st.integers(0, 12)))
    ]
    return ClusterView(
        gpus=tuple(gpus),
        waiting=tuple(waiting),
        running=tuple(running),
        now=NOW,
        preemption=draw(st.booleans()),
        backfill=draw(st.booleans()),
    )


@SETTINGS
@given(mig_views())
def test_slices_go_one_job_each_and_only_to_their_profile(view: ClusterView) -> None:
    d = passes.decide(view)
    slots = {g.uuid: g for g in view.gpus}
    wants = {(w.kind, w.id): w for w in view.waiting}
    given_to = [u for p in d.place for u in p.gpu_uuids]
    assert len(given_to) == len(set(given_to))  # never two on one slice (or card)
    for p in d.place:
        want = wants[p.kind, p.id]
        for uuid in p.gpu_uuids:
            gpu = slots[uuid]
            assert not gpu.busy and gpu.healthy  # nothing already on it
            assert not gpu.mig_enabled  # a MIG-enabled card is never placed whole
            assert gpu.mig_profile == want.mig  # a slice of its profile; no --mig: no slice


@SETTINGS
@given(mig_views())
def test_preemption_for_a_slice_stops_only_work_on_slices_of_that_profile(
    view: ClusterView,
) -> None:
    d = passes.decide(view)
    slots = {g.uuid: g for g in view.gpus}
    runs = {r.id: r for r in view.running}
    wants = {(w.kind, w.id): w for w in view.waiting}
    for stop in d.preempt:
        want = wants[stop.for_kind, stop.for_id]
        assert any(slots[u].mig_profile == want.mig for u in runs[stop.id].gpus)


@SETTINGS
@given(mig_views())
def test_the_fast_pass_decides_mig_lines_as_the_reference(view: ClusterView) -> None:
    assert passes.decide(view) == decide_ref(view)


def test_a_request_for_a_profile_no_host_has_is_impossible() -> None:
    gpus = (
        GpuSlot("GPU-0", "h0", 0, mig_enabled=True),
        GpuSlot("MIG-0", "h0", 0, mig_profile="1g.10gb"),
        GpuSlot("MIG-1", "h0", 0, mig_profile="1g.10gb"),
        GpuSlot("GPU-1", "h0", 1),
    )
    assert model.impossible(Want("job", 1, 1, mig="1g.10gb"), gpus) is None
    why = model.impossible(Want("job", 1, 1, mig="3g.40gb"), gpus)
    assert why is not None and "MIG 3g.40gb slices" in why and "more than 0" in why
    # Whole cards: only the card with MIG off counts.
    assert "more than 1" in (model.impossible(Want("job", 2, 2), gpus) or "")


@st.composite
def mixed_views(draw: st.DrawFn) -> ClusterView:
    """``mig_views`` with AMD cards (pool ``amd-mi300x``) on some hosts, and a line
    asking for pools, profiles, both or neither."""
    view = draw(mig_views())
    hosts = sorted({g.host for g in view.gpus})
    amd: list[GpuSlot] = []
    for host in hosts:
        for k in range(draw(st.integers(0, 3))):
            busy = draw(st.integers(0, 3)) == 0
            amd.append(
                GpuSlot(
                    f"GPU-amd-{host}-{k}",
                    host,
                    100 + k,
                    card_pool("a100", "amd", "AMD Instinct MI300X"),
                    "AMD Instinct MI300X",
                    busy=busy,
                    vendor="amd",
                )
            )
    pools = st.sampled_from((None, None, "a100", "amd-mi300x"))
    waiting = tuple(replace(w, pool=draw(pools)) for w in view.waiting)
    return replace(view, gpus=view.gpus + tuple(amd), waiting=waiting)


@SETTINGS
@given(mixed_views())
def test_with_amd_cards_too_both_rules_hold_and_the_fast_pass_is_the_reference(
    view: ClusterView,
) -> None:
    d = passes.decide(view)
    assert d == decide_ref(view)
    slots = {g.uuid: g for g in view.gpus}
    wants = {(w.kind, w.id): w for w in view.waiting}
    for p in d.place:
        want = wants[p.kind, p.id]
        vendors = {slots[u].vendor for u in p.gpu_uuids}
        assert len(vendors) == 1  # never both vendors in one placement
        for uuid in p.gpu_uuids:
            gpu = slots[uuid]
            assert not gpu.mig_enabled
            assert gpu.mig_profile == want.mig  # MIG: only its profile; else no slice
            if want.pool is None:
                assert gpu.vendor == "nvidia"  # no pool: NVIDIA cards only
            else:
                assert gpu.pool == want.pool
            if gpu.vendor == "amd":
                assert want.mig is None  # an AMD card has no slices to give
