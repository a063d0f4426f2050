"""The fencing rules: each condition judged from the latest reading of it.

A sample that carries no health reading says nothing of a remap, the fabric or the
NVLinks: those are judged from the last sample that did (``LatestReadings``), and
are *unjudged* where no reading can say (none yet, NVML failed to read it, the card
lost), never "cleared".
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_health_board import NOW, UUID, gpu, snap

from gputui.config.models import HealthThresholds
from gputui.health.fencing import CONDITIONS, LatestReadings, fence_reasons, gpu_verdict, rank
from gputui.wire.messages import NvLinkSample, Sample

TH = HealthThresholds()


def _links(*down: int) -> tuple[NvLinkSample, ...]:
    return tuple(NvLinkSample(link=i, active=i not in down) for i in range(4))


def test_a_condition_is_judged_from_the_latest_reading_of_it() -> None:
    reading = gpu(health_read=True, remap_failed=True, remap_pending=False)
    plain = gpu()  # a sample between two readings: no remap fields at all
    readings = LatestReadings()
    readings.take(Sample(seq=1, time=NOW, gpus=(reading,)))
    readings.take(Sample(seq=2, time=NOW + 1, gpus=(plain,)))  # keeps the reading
    verdict = fence_reasons(snap(plain), NOW, TH, readings.as_map())[UUID]
    assert verdict.worst is not None and verdict.worst.code == "remap-failed"
    # With no reading at all, the remap is not known: unjudged, not cleared.
    blind = fence_reasons(snap(plain), NOW, TH)[UUID]
    assert blind.worst is None and blind.may_hold("remap-failed")
    # A fresh reading that shows it cleared clears it.
    fixed = gpu(health_read=True, remap_failed=False, remap_pending=False)
    readings.take(Sample(seq=3, time=NOW + 2, gpus=(fixed,)))
    cleared = fence_reasons(snap(plain), NOW, TH, readings.as_map())[UUID]
    assert not cleared.may_hold("remap-failed")
    # A reading NVML could not take leaves it unjudged.
    failed = gpu(health_read=True, remap_failed=None, errors={"remap_failed": "Unknown"})
    assert gpu_verdict(plain, failed, TH).may_hold("remap-failed")


def test_every_condition_of_a_card_is_listed_worst_first() -> None:
    health = gpu(health_read=True, remap_failed=True, remap_pending=False)
    verdict = gpu_verdict(gpu(ecc_uncorrected=7), health, TH, xids=(48,))
    assert [f.code for f in verdict.fences] == ["xid-48", "ecc-uncorrected", "remap-failed"]
    lost = gpu_verdict(gpu(state="lost"), health, TH, xids=(79,))
    assert [f.code for f in lost.fences] == ["lost", "xid-79"]
    assert lost.unjudged == frozenset(c for c in CONDITIONS if c != "lost")


def test_fabric_not_ready_and_nvlink_down_on_nvswitch_systems_fence_as_configured() -> None:
    fabric = gpu(health_read=True, fabric_state="in-progress", nvlinks=_links())
    assert gpu_verdict(gpu(), fabric, TH).worst.code == "fabric"  # type: ignore[union-attr]
    off = HealthThresholds(fence_fabric=False)
    assert gpu_verdict(gpu(), fabric, off).worst is None
    down = gpu(health_read=True, fabric_state="completed", nvlinks=_links(2))
    fence = gpu_verdict(gpu(), down, TH).worst
    assert fence is not None and fence.code == "nvlink-down" and "NVLink 2" in fence.reason
    assert gpu_verdict(gpu(), down, HealthThresholds(fence_nvlink_down=False)).worst is None
    # A card with no NVSwitch fabric (NVLink bridges, or none) is not fenced for a link.
    bridged = gpu(health_read=True, fabric_state="not-supported", nvlinks=_links(0))
    assert gpu_verdict(gpu(), bridged, TH).worst is None
    failed = gpu(health_read=True, fabric_state="completed", fabric_status="NotReady")
    assert "failed (NotReady)" in gpu_verdict(gpu(), failed, TH).worst.reason  # type: ignore[union-attr]


_BOOLS = st.none() | st.booleans()


@settings(max_examples=200)
@given(
    st.fixed_dictionaries(
        {
            "state": st.sampled_from(["ok", "lost", "error"]),
            "util_gpu": st.none() | st.integers(0, 100),
            "ecc_uncorrected": st.none() | st.integers(0, 50),
        }
    ),
    st.none()
    | st.fixed_dictionaries(
        {
            "remap_pending": _BOOLS,
            "remap_failed": _BOOLS,
            "fabric_state": st.none()
            | st.sampled_from(["not-supported", "not-started", "in-progress", "completed"]),
            "nvlinks": st.none() | st.sets(st.integers(0, 3), max_size=4).map(lambda d: _links(*d)),
        }
    ),
    st.lists(st.sampled_from([13, 48, 79, 95]), max_size=3),
)
def test_any_readings_give_a_well_formed_verdict(
    sample: dict[str, Any], health: dict[str, Any] | None, xids: list[int]
) -> None:
    reading = None if health is None else gpu(health_read=True, **health)
    verdict = gpu_verdict(gpu(**sample), reading, TH, xids=xids)
    codes = [f.code for f in verdict.fences]
    assert len(codes) == len(set(codes))
    assert [rank(c) for c in codes] == sorted(rank(c) for c in codes)
    assert not set(codes) & verdict.unjudged  # shown or unjudged, never both
    assert all(c in CONDITIONS or c.startswith("xid-") for c in codes)
    if reading is None:
        assert {"remap-failed", "remap-pending"} <= verdict.unjudged | set(codes)
    assert fence_reasons(snap(gpu(**sample)), NOW, TH)[UUID].unjudged  # no reading: unknown
