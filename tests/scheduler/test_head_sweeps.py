"""The head's timer sweeps every host (ownership, the health board) every tick on a
fleet of up to ``SWEEP_HOSTS_PER_S`` hosts, and less often on a bigger one, so that
what a sweep costs a second does not grow with the fleet; the tick's own work
(claims, time limits) comes every tick whatever the size."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gputui.cli.head import _settings
from gputui.config.models import Config
from gputui.scheduler.head.daemon import ANALYSE_HOSTS_PER_S, SWEEP_HOSTS_PER_S, Head
from gputui.scheduler.head.fleet_hostops import FleetHosts
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import GpuSample, ProcessSample, Sample
from gputui.wire.ops import JobState


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _items(tmp: Path, count: int, seconds: int) -> Counter[str]:
    hosts = [
        {"name": f"n{i:04d}", "address": "127.0.0.1", "sim": "1xa100-80gb"} for i in range(count)
    ]
    config = Config.model_validate(
        {"head": {"socket": str(tmp / "s"), "database": str(tmp / "db")}, "hosts": hosts}
    )
    args = argparse.Namespace(socket=None, database=None, metrics=None, commit_per_request=False)
    _, database, settings = _settings(config, args)
    store = SqlStore.open(Path(str(database)))
    try:
        clock = Clock()
        pools = {h.name: h.pool for h in config.resolved()}
        fleet = FleetHosts(config, store.jobs_namespace())
        head = Head(store, fleet, settings, host_pools=pools, clock=clock)  # type: ignore[arg-type]
        kinds: Counter[str] = Counter()
        for _ in range(seconds):
            head.tick(clock.now)
            kinds.update(item.kind for item in head._inbox.drain())
            clock.now += head.settings.tick_s
        return kinds
    finally:
        store.close()


@pytest.mark.parametrize(
    ("hosts", "sweeps"),
    [(10, 12), (int(SWEEP_HOSTS_PER_S), 12), (int(2 * SWEEP_HOSTS_PER_S), 6)],
)
def test_sweeps_come_every_tick_on_a_small_fleet_and_less_often_on_a_big_one(
    tmp_path: Path, hosts: int, sweeps: int
) -> None:
    kinds = _items(tmp_path, hosts, 12)
    assert kinds["tick"] == 12
    assert kinds["ownership"] == kinds["health"] == sweeps


def _head(tmp: Path, count: int) -> tuple[Head, Clock, SqlStore]:
    hosts = [
        {"name": f"n{i:04d}", "address": "127.0.0.1", "sim": "1xa100-80gb"} for i in range(count)
    ]
    config = Config.model_validate(
        {"head": {"socket": str(tmp / "s"), "database": str(tmp / "db")}, "hosts": hosts}
    )
    args = argparse.Namespace(socket=None, database=None, metrics=None, commit_per_request=False)
    _, database, settings = _settings(config, args)
    store = SqlStore.open(Path(str(database)))
    clock = Clock()
    pools = {h.name: h.pool for h in config.resolved()}
    fleet = FleetHosts(config, store.jobs_namespace())
    head = Head(store, fleet, settings, host_pools=pools, clock=clock)  # type: ignore[arg-type]
    return head, clock, store


def _snap(util: int = 50, **changes: object) -> HostSnapshot:
    procs = tuple(
        ProcessSample(pid=100 + i, uid=1000, user="alice", command="python")
        for i in range(int(changes.pop("procs", 1)))  # type: ignore[call-overload]
    )
    gpu = GpuSample(
        index=0,
        uuid="GPU-aaaa",
        state=changes.pop("state", "ok"),
        util_gpu=util,
        processes=procs,
        health_read=bool(changes.pop("health_read", False)),
    )
    sample = Sample(seq=util, time=1.0, gpus=(gpu,))
    fields: dict[str, object] = {"status": HostStatus.LIVE, **changes}
    return HostSnapshot(name="n0000", address="127.0.0.1", sample=sample, **fields)  # type: ignore[arg-type]


NEWS: dict[str, dict[str, Any]] = {
    "status": {"status": HostStatus.STALE},
    "a GPU's state": {"state": "lost"},
    "processes": {"procs": 2},
    "a health reading": {"health_read": True},
    "jobs": {"jobs": (JobState(job_id=1, state="running"),)},
}


@pytest.mark.parametrize("count", [10, 1000])
def test_a_big_fleets_samples_are_analysed_when_due_or_when_they_bring_news(
    tmp_path: Path, count: int
) -> None:
    """Every sample reaches the consoles; on a fleet of more than
    ``ANALYSE_HOSTS_PER_S`` hosts one with nothing new is analysed only once its
    host's last analysis is ``hosts / ANALYSE_HOSTS_PER_S`` old, and one with news
    (a status, a GPU's state, its processes, a health reading, jobs) at once."""
    head, clock, store = _head(tmp_path, count)
    try:
        analysed: list[HostSnapshot] = []
        observe = head.health.observe

        def spied(snap: HostSnapshot, now: float) -> None:
            analysed.append(snap)
            observe(snap, now)

        head.health.observe = spied  # type: ignore[method-assign]
        every = count / ANALYSE_HOSTS_PER_S
        first = _snap(10)
        head._on_snapshot(first)
        clock.now += 1.0
        plain = _snap(11)
        head._on_snapshot(plain)
        assert head.telemetry.latest("n0000") is plain  # the consoles get every sample
        assert analysed[-1] is (plain if every <= 1.0 else first)
        for what, change in NEWS.items():
            news = _snap(12, **change)
            head._on_snapshot(news)
            assert analysed[-1] is news, what
            head._on_snapshot(first)  # back as it was: news again
        if every > 1.0:
            quiet = _snap(13)
            head._on_snapshot(quiet)
            clock.now += 1.0
            later = _snap(14)
            head._on_snapshot(later)
            assert analysed[-1] is not later
            clock.now += every
            head.tick(clock.now)  # its samples stopped: the timer analyses the held one
            assert analysed[-1] is later
    finally:
        store.close()
