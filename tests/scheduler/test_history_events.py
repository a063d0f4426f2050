"""The head holds the Xids and SXids each host sent it, for ``gputui incident``: each
once however many snapshots repeat it, the newest ``EVENTS_PER_HOST`` per host."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.scheduler.head.watch.readings import EVENTS_PER_HOST, History, incident_view
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Event


def xid(at: float, code: int = 79, gpu: int = 0) -> Event:
    return Event(time=at, kind="xid", xid=code, gpu_index=gpu, gpu_uuid=f"GPU-{gpu}")


def snap(events: tuple[Event, ...]) -> HostSnapshot:
    return HostSnapshot(name="a", address="a", status=HostStatus.LIVE, events=events)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2000), max_size=300), min_size=1, max_size=6))
def test_each_event_once_and_only_the_newest_are_held(batches: list[list[int]]) -> None:
    history = History()
    for batch in batches:  # a link resends what it holds with every snapshot
        history.record(snap(tuple(xid(float(t)) for t in batch)))
        history.record(snap(tuple(xid(float(t)) for t in batch)))
    times = sorted({t for batch in batches for t in batch})[-EVENTS_PER_HOST:]
    answer = incident_view(history, "a", None, 0.0)
    assert [e["time"] for e in answer["events"]] == times


def test_one_gpus_events_and_the_since_cut() -> None:
    history = History()
    history.record(snap((xid(10.0, 79, 0), xid(20.0, 48, 1), xid(30.0, 94, 1))))
    answer = incident_view(history, "a", 1, 15.0)
    assert [(e["xid"], e["gpu"], e["source"]) for e in answer["events"]] == [
        (48, 1, "nvml"),
        (94, 1, "nvml"),
    ]
