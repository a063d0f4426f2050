"""Energy of a MIG slice: NVML gives no power for a MIG device, so the slice's holder
is charged its GPU's power in proportion to the slice's compute slices over the
GPU's (an A100's 7). The cluster's energy is the GPU's own reading, counted once.

Pure: ``Meter`` with hypothesis over profiles, watts and sample gaps. Through the
running head: a claim of a ``1g.10gb`` slice and a job on a ``3g.40gb`` slice of one
scripted A100 drawing 280 W, sampled on a clock the test moves (no sleeps).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headkit import ScriptedHosts
from headthread import LineClient, ThreadedHead, poll
from hypothesis import given
from hypothesis import strategies as st

from gputui.scheduler.head.actions import Rules
from gputui.scheduler.policy.accounting import hour_of
from gputui.scheduler.policy.meter import (
    Holder,
    Meter,
    Reading,
    compute_slices,
    slice_readings,
    slice_share,
)

T0 = float(hour_of(time.time()))
PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1c.3g.40gb"]


def test_compute_slices_read_from_the_profile() -> None:
    assert [compute_slices(p) for p in PROFILES] == [1, 1, 2, 3, 4, 7, 1]
    assert compute_slices("2c.4g.24gb+me") == 2 and compute_slices("nonsense") is None
    assert slice_share("1g.6gb", "NVIDIA A30") == 1 / 4
    assert slice_share("3g.40gb", "NVIDIA A100-SXM4-80GB") == 3 / 7
    assert slice_share(None, "NVIDIA A100") == 0.0


@given(
    st.lists(st.sampled_from(PROFILES), min_size=1, max_size=7),
    st.floats(0, 700),
    st.lists(st.floats(0.5, 30), min_size=1, max_size=6),
    st.sampled_from(["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA A30"]),
)
def test_each_slice_holder_is_charged_its_share_and_the_cluster_once(
    profiles: list[str], watts: float, gaps: list[float], model: str
) -> None:
    meter = Meter(max_gap_s=60)
    uuids = [f"MIG-{i}" for i in range(len(profiles))]
    holders = {u: Holder(f"user{i}", "g", "", "a100", T0 - 100) for i, u in enumerate(uuids)}
    at = T0
    for gap in [0.0, *gaps]:
        at += gap
        readings = [Reading("GPU-card", 50, watts)]
        pieces = [(u, p, None) for u, p in zip(uuids, profiles, strict=True)]
        readings += slice_readings(watts, model, pieces)
        meter.observe("h", object(), readings, at, holders)
    seconds = at - T0  # (the gaps as the clock added them up)
    got = {key[1]: energy for key, (_busy, energy) in meter.pending.usage.items()}
    total = 4 if "A30" in model else 7
    for i, profile in enumerate(profiles):
        own = compute_slices(profile)
        assert own is not None
        want = watts * min(1.0, own / total) * seconds
        assert got.get(f"user{i}", 0.0) == pytest.approx(want, rel=1e-6, abs=1e-6)
    cluster = sum(e for _p, _b, e in meter.pending.cluster.values())
    assert cluster == pytest.approx(watts * seconds, rel=1e-6, abs=1e-6)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def head(tmp_path: Path) -> Iterator[tuple[ThreadedHead, Clock]]:
    clock = Clock(T0)
    hosts = ScriptedHosts({"gpu01": 2}, mig={"gpu01": {0: ("1g.10gb", "3g.40gb", "1g.10gb")}})
    hosts.power["gpu01"] = {0: 280.0, 1: 100.0}
    with ThreadedHead(
        # (the head counts 5: the two cards and the three slices of the first)
        tmp_path,
        {"gpu01": 5},
        clock=clock,
        scripted=hosts,
        rules=Rules(claim_idle_s=86400.0),
    ) as th:
        yield th, clock


def test_through_the_head_a_slice_is_charged_its_share_of_its_cards_power(
    head: tuple[ThreadedHead, Clock],
) -> None:
    th, clock = head
    assert th.hosts is not None and th.head is not None
    hosts, daemon = th.hosts, th.head
    small = hosts.slice_uuid("gpu01", 0, 0)
    with LineClient(th.sock) as c:
        claim = c.ok("claim", {"gpus": 1, "mig": "1g.10gb"})["claim"]
        assert claim["state"] == "active" and claim["gpu_uuids"][0].startswith("MIG-")
        taken = claim["gpu_uuids"][0]
        poll(lambda: taken in daemon.meter.holders, what="the slice's holder")
        before = daemon.meter.pending()
        start = clock.t
        for _ in range(6):  # six samples, 10 s apart
            t = clock.t + 10

            def send(t: float = t) -> None:
                clock.t = t
                hosts.sample_again("gpu01")

            th.in_loop(send)
            poll(lambda t=t: daemon.meter.meter._last.get(taken) == t, what="the sample")
        after = daemon.meter.pending()
    seconds = clock.t - start
    user = claim["user"]

    def energy(m: object, who: str) -> float:
        return sum(e for key, (_b, e) in m.usage.items() if key[1] == who)  # type: ignore[attr-defined]

    charged = energy(after, user) - energy(before, user)
    assert charged == pytest.approx(280.0 / 7 * seconds, rel=1e-6)
    cluster = sum(e for _p, _b, e in after.cluster.values()) - sum(
        e for _p, _b, e in before.cluster.values()
    )
    assert cluster == pytest.approx((280.0 + 100.0) * seconds, rel=1e-6)  # each card once
    assert taken in (small, hosts.slice_uuid("gpu01", 0, 2))
