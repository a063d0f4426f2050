"""A slow refresh interval is not a fault: hosts stay LIVE, connections stay up."""

from __future__ import annotations

from gputui.config.models import HealthThresholds
from gputui.fleet.backoff import LinkTiming, thresholds
from gputui.health import host_severity, snapshot_is_stale
from gputui.telemetry import HostSnapshot, HostStatus


def test_thresholds_follow_the_interval() -> None:
    assert thresholds(5.0, 1.0) == (5.0, 30.0)  # the defaults, unchanged
    assert thresholds(5.0, 10.0) == (25.0, 150.0)  # was (5, 30): STALE at every sample
    assert thresholds(5.0, 40.0) == (100.0, 600.0)  # was (5, 30): cut every 30 s
    assert thresholds(0.5, 1.5, hung_after=1.0) == (3.75, 6.0)  # a set limit too


async def test_a_refresh_slower_than_stale_after_stays_live(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config(
        [{"name": "h1", "port": server.port, "sim": "1xa10,name=h1"}],
        refresh_interval=1.5,
        health={"stale_after_s": 0.5},
    )
    # hung_after below the interval too: before, the link cut the connection at 1 s.
    timing = LinkTiming(backoff_base=0.2, backoff_cap=0.5, hung_after=1.0)
    fleet = await kit.start_fleet(config, timing=timing)
    await kit.wait_for(lambda: fleet.samples_received()["h1"] >= 1, what="first sample")
    seen: list[HostSnapshot] = []
    fleet.subscribe(seen.append)
    await kit.wait_for(lambda: fleet.samples_received()["h1"] >= 4, what="three more samples")
    assert [s.status for s in seen if s.status is not HostStatus.LIVE] == []
    assert kit.snap(fleet, "h1").status is HostStatus.LIVE
    assert fleet.links["h1"].stale_after == 3.75


async def test_a_slower_interval_set_at_run_time_moves_the_thresholds(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    config = kit.config(
        [{"name": "h1", "port": server.port, "sim": "1xa10,name=h1"}],
        refresh_interval=0.2,
        health={"stale_after_s": 0.5},
    )
    fleet = await kit.start_fleet(config)
    await kit.wait_for(lambda: kit.snap(fleet, "h1").sample is not None, what="a sample")
    outcome = (await fleet.set_refresh_interval(1.5))["h1"]
    assert outcome.ok, outcome.message
    assert fleet.links["h1"].stale_after == 3.75
    # The snapshot carries the limit, so a view's age check agrees with the link: data
    # 3 s old at a 1.5 s interval is not stale, though the configured limit was 0.5 s.
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).stale_after_s == 3.75 and s, what="new limit"
    )
    assert snap.received_at is not None
    later = snap.received_at + 3.0
    assert not snapshot_is_stale(snap, later, 0.5)
    assert host_severity(snap, later, HealthThresholds(stale_after_s=0.5)) == "ok"
    assert snapshot_is_stale(snap, snap.received_at + 3.75, 0.5)
    seen: list[HostSnapshot] = []
    fleet.subscribe(seen.append)
    start = fleet.samples_received()["h1"]
    await kit.wait_for(lambda: fleet.samples_received()["h1"] >= start + 2, what="slow samples")
    assert [s.status for s in seen if s.status is not HostStatus.LIVE] == []
