"""``Fleet.updates()``: a daemon's view of the fleet that a slow consumer cannot clog.

Twenty hosts over real SSH stream samples while the consumer is stuck (awaiting a
slow write, here a gate the test holds): the other listeners keep getting every
sample, the stream holds at most one snapshot per host, and when the consumer comes
back it gets each host's latest state, once.
"""

from __future__ import annotations

import asyncio
import time

from gputui.fleet.stream import SnapshotStream
from gputui.telemetry import HostSnapshot, HostStatus

HOSTS = 20


def seq(snapshot: HostSnapshot) -> int:
    return snapshot.sample.seq if snapshot.sample is not None else -1


async def test_a_stuck_consumer_holds_up_nobody_and_gets_the_latest_after(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    names = [f"n{i:02d}" for i in range(HOSTS)]
    config = kit.config(
        [{"name": name, "port": server.port, "sim": f"1xa10,name={name}"} for name in names],
        refresh_interval=0.2,
    )
    fleet = await kit.start_fleet(config)
    counts = dict.fromkeys(names, 0)
    most_pending = 0
    updates = fleet.updates()

    def count(snapshot: HostSnapshot) -> None:
        nonlocal most_pending
        counts[snapshot.name] += 1
        most_pending = max(most_pending, len(updates))

    fleet.subscribe(count)
    gate = asyncio.Event()
    taken: list[HostSnapshot] = []

    async def consume() -> None:
        async with updates:
            async for snapshot in updates:
                taken.append(snapshot)
                if not gate.is_set() and all(s.sample for s in fleet.snapshots().values()):
                    stuck_at.append(time.monotonic())
                    await gate.wait()  # a write that takes seconds

    stuck_at: list[float] = []
    consumer = asyncio.get_running_loop().create_task(consume())
    await kit.wait_for(lambda: stuck_at, what="the consumer stuck with every host live")
    before = dict(counts)
    taken_before = len(taken)
    # Everyone else goes on: every host's snapshots keep reaching the other listener.
    await kit.wait_for(
        lambda: all(counts[n] >= before[n] + 8 for n in names), what="8 more samples a host"
    )
    assert time.monotonic() - stuck_at[0] >= 1.0  # stuck for more than a second
    assert len(taken) == taken_before  # the consumer really was stuck
    assert 0 < most_pending <= HOSTS  # bounded: one per host at most
    assert all(s.status is HostStatus.LIVE for s in fleet.snapshots().values())

    latest = {name: seq(snap) for name, snap in fleet.snapshots().items()}
    gate.set()
    # Back for more: it takes each host's newest snapshot, once, with no backlog.
    await kit.wait_for(lambda: len(taken) >= taken_before + HOSTS, what="the drain")
    drained = taken[taken_before : taken_before + HOSTS]
    assert sorted(s.name for s in drained) == sorted(names)
    for snapshot in drained:
        assert seq(snapshot) >= latest[snapshot.name], snapshot.name
    await fleet.close()
    await asyncio.wait_for(consumer, 10)  # the stream ends with the fleet
    assert {s.name for s in taken[-HOSTS:]} == set(names)
    assert all(s.status is HostStatus.STOPPED for s in taken[-HOSTS:])


async def test_the_stream_keeps_one_snapshot_per_host_and_ends_when_closed() -> None:
    stream = SnapshotStream([HostSnapshot(name="a", address="a")])
    for n in range(1000):
        stream.put(HostSnapshot(name="b", address="b", message=str(n)))
        stream.put(HostSnapshot(name="a", address="a", message=str(n)))
    assert len(stream) == 2
    first = await anext(stream)
    assert (first.name, first.message) == ("a", "999")  # its turn kept, its state the newest
    stream.close()
    stream.put(HostSnapshot(name="c", address="c"))  # after close: not kept
    assert [s.name async for s in stream] == ["b"]
    closed: list[bool] = []
    other = SnapshotStream()
    other.on_close(lambda: closed.append(True))
    async with other:
        assert other.take_all() == []
    assert closed == [True]
    assert [s async for s in other] == []
