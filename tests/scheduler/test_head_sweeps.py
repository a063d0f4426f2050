"""The head's timer sweeps every host (ownership, the health board) every tick on a
fleet of up to ``SWEEP_HOSTS_PER_S`` hosts, and less often on a bigger one, so that
what a sweep costs a second does not grow with the fleet; the tick's own work
(claims, time limits) comes every tick whatever the size."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import pytest

from gputui.cli.head import _settings
from gputui.config.models import Config
from gputui.scheduler.head.daemon import SWEEP_HOSTS_PER_S, Head
from gputui.scheduler.head.fleet_hostops import FleetHosts
from gputui.scheduler.store.sqlstore import SqlStore


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
