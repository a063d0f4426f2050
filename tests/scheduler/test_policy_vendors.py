"""AMD cards are pools of their own: no placement mixes vendors, and a request that
names no pool takes NVIDIA cards only (properties over whole cluster views)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_strategies import views

from gputui.scheduler.policy import passes
from gputui.scheduler.policy.model import ClusterView, GpuSlot, Want
from gputui.scheduler.policy.reference import decide_ref
from gputui.scheduler.policy.vendors import MAX_POOL, card_pool

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(views(amd=True))
def test_the_fast_pass_decides_as_the_reference_with_amd_cards(view: ClusterView) -> None:
    assert passes.decide(view) == decide_ref(view)


@SETTINGS
@given(views(amd=True))
def test_no_placement_mixes_vendors_and_poolless_requests_get_nvidia(view: ClusterView) -> None:
    slots = {g.uuid: g for g in view.gpus}
    wants = {(w.kind, w.id): w for w in view.waiting}
    for place in passes.decide(view).place:
        vendors = {slots[u].vendor for u in place.gpu_uuids}
        assert len(vendors) == 1, place
        want = wants[place.kind, place.id]
        if want.pool is None and not want.named:
            assert vendors == {"nvidia"}
        if "amd" in vendors and not want.named:
            assert want.pool == slots[place.gpu_uuids[0]].pool


def _slot(uuid: str, vendor: str, model: str, index: int) -> GpuSlot:
    return GpuSlot(uuid, "mixed", index, card_pool("lab", vendor, model), model, vendor=vendor)


def test_a_mixed_host_places_each_vendor_by_its_pool() -> None:
    gpus = (
        _slot("GPU-n0", "nvidia", "NVIDIA H100 80GB HBM3", 0),
        _slot("GPU-a0", "amd", "AMD Instinct MI300X", 1),
        _slot("GPU-a1", "amd", "AMD Instinct MI300X", 2),
    )
    waiting = (
        Want("job", 1, 2),  # no pool: NVIDIA only, and there is one NVIDIA card
        Want("job", 2, 2, pool="amd-mi300x"),
        Want("job", 3, 1),
    )
    d = passes.decide(ClusterView(gpus=gpus, waiting=waiting, now=1.0))
    placed = {p.id: p.gpu_uuids for p in d.place}
    assert placed == {2: ("GPU-a0", "GPU-a1"), 3: ("GPU-n0",)}
    assert [w.id for w in d.wait] == [1]
    assert d == decide_ref(ClusterView(gpus=gpus, waiting=waiting, now=1.0))


@given(st.text(max_size=300), st.sampled_from(("nvidia", "amd")), st.text(max_size=40))
def test_card_pool_is_a_pool_name_for_any_model(model: str, vendor: str, host_pool: str) -> None:
    pool = card_pool(host_pool, vendor, model)
    if vendor == "nvidia":
        assert pool == host_pool
    else:
        assert re.fullmatch(r"amd(-[a-z0-9-]*[a-z0-9])?", pool), pool
        assert len(pool) <= MAX_POOL


def test_card_pool_names_amd_models() -> None:
    assert card_pool("lab", "amd", "AMD Instinct MI300X") == "amd-mi300x"
    assert card_pool("lab", "amd", "AMD Instinct MI210") == "amd-mi210"
    assert card_pool("lab", "amd", "AMD Radeon PRO W7900") == "amd-radeon-pro-w7900"
    assert card_pool("lab", "nvidia", "NVIDIA H100 80GB HBM3") == "lab"


def test_a_claim_naming_cards_of_two_vendors_is_refused_in_one_line() -> None:
    from gputui.scheduler.head.claims import resolve_refs
    from gputui.scheduler.server.wire import Refusal

    slots = (
        _slot("GPU-n0", "nvidia", "NVIDIA H100 80GB HBM3", 0),
        _slot("GPU-a0", "amd", "AMD Instinct MI300X", 1),
        _slot("GPU-a1", "amd", "AMD Instinct MI300X", 2),
    )
    assert resolve_refs(["mixed:1", "GPU-a1"], slots) == ("GPU-a0", "GPU-a1")
    try:
        resolve_refs(["mixed:0", "mixed:1"], slots)
    except Refusal as exc:
        assert "more than one vendor" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("a claim on two vendors' cards was taken")
