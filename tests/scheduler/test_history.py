"""The head's recent readings per GPU (``gputui incident``): kept at most once a
``every_s`` per host, within a budget shared out per GPU, newest kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gputui.scheduler.head.watch.readings import History, incident_view
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import GpuSample, Sample


def snap(host: str, at: float, gpus: int = 2, status: HostStatus = HostStatus.LIVE) -> HostSnapshot:
    sample = Sample(
        seq=1,
        time=at,
        gpus=tuple(
            GpuSample(
                index=i, uuid=f"GPU-{host}-{i}", util_gpu=int(at) % 100, throttle=("hw_slowdown",)
            )
            for i in range(gpus)
        ),
    )
    return HostSnapshot(name=host, address=host, status=status, sample=sample, received_at=at)


def test_one_reading_a_minute_per_host_and_only_from_live_hosts() -> None:
    h = History(every_s=60)
    for t in range(0, 600, 10):  # a sample every 10 s for 10 minutes
        h.record(snap("a", 1000.0 + t))
    h.record(snap("b", 1000.0, status=HostStatus.STALE))
    kept = [r.time for _, r in h.readings("a", 0, 0.0)]
    assert kept == [1000.0 + 60 * m for m in range(10)]
    assert list(h.readings("b", None, 0.0)) == []
    view = incident_view(h, "a", 1, 1300.0)
    assert view["kept_since"] == 1000.0 and view["every_s"] == 60
    assert [r["time"] for r in view["readings"]] == [1000.0 + 60 * m for m in range(5, 10)]
    assert {r["gpu"] for r in view["readings"]} == {1}
    assert view["readings"][0]["throttle"] == "hw_slowdown"


@given(st.integers(1, 40), st.integers(1, 300))
def test_the_budget_holds_and_the_newest_are_kept(gpus: int, samples: int) -> None:
    h = History(every_s=0, budget=200)
    for t in range(samples):
        h.record(snap("a", float(t + 1), gpus=gpus))
    per_gpu = [len([1 for _ in h.readings("a", i, 0.0)]) for i in range(gpus)]
    share = max(10, 200 // gpus)
    assert per_gpu == [min(samples, share)] * gpus
    assert sum(per_gpu) <= max(200, 10 * gpus)
    newest = [r.time for _, r in h.readings("a", 0, 0.0)]
    assert newest[-1] == float(samples)


@given(st.lists(st.integers(1, 4), min_size=1, max_size=12), st.integers(1, 30))
def test_hosts_joining_shrink_every_gpus_share_at_once(joining: list[int], rounds: int) -> None:
    """Hosts join one after another (each shrinks the share): after every reading, no
    GPU holds more than the share, and a read gives none more (the GPUs are cut only
    when one may hold more than a new share, not at every new GPU)."""
    h = History(every_s=0, budget=200)
    t = 0.0
    hosts = {f"h{n}": gpus for n, gpus in enumerate(joining)}
    names = list(hosts)
    for n in range(len(names)):
        for _ in range(rounds):
            for known in names[: n + 1]:
                t += 1.0
                h.record(snap(known, t, gpus=hosts[known]))
                assert all(len(kept) <= h.share for kept in h._gpus.values())
            for known in names[: n + 1]:
                for gpu in range(hosts[known]):
                    assert len(list(h.readings(known, gpu, 0.0))) <= h.share
    gpus = sum(joining)
    assert h.share == max(10, min(1440, 200 // gpus))
