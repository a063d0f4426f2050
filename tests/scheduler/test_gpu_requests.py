"""The head's requests about one GPU (what holds it, a reset, its clocks) to a real
helper (a local simulated host): each is made from its values and checked before it
is sent (a value that does not pass is named, and nothing reaches the host), then its
answer is handed on as JSON values."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

import pytest

from gputui.config.models import Config
from gputui.scheduler.head.fleet_hostops import FleetHosts
from gputui.telemetry import HostSnapshot, HostStatus

HOST = "simgpu"


@pytest.fixture
async def hosts() -> AsyncIterator[FleetHosts]:
    config = Config.model_validate(
        {
            "refresh_interval": 60,
            "hosts": [
                {"name": HOST, "local": True, "sim": f"2xa40,name={HOST}", "python": sys.executable}
            ],
        }
    )
    fleet_hosts = FleetHosts(config, "tidyreqs01")
    live = asyncio.Event()

    def heard(snapshot: HostSnapshot) -> None:
        if snapshot.status is HostStatus.LIVE and snapshot.sample is not None:
            live.set()

    fleet_hosts.fleet.subscribe(heard)
    await fleet_hosts.start()
    try:
        await asyncio.wait_for(live.wait(), 60)
        yield fleet_hosts
    finally:
        await fleet_hosts.close()


def _uuid(hosts: FleetHosts, index: int) -> str:
    sample = hosts.fleet.snapshots()[HOST].sample
    assert sample is not None
    return str(sample.gpus[index].uuid)


async def test_a_bad_value_is_named_and_not_sent(hosts: FleetHosts) -> None:
    sent = hosts.fleet.links[HOST].session
    answers = [
        await hosts.reset_gpu(HOST, 0, "nope"),
        await hosts.clocks(HOST, 0, "GPU-x;rm", "lock"),
        await hosts.clocks(HOST, 0, _uuid(hosts, 0), "melt"),
        await hosts.holders(HOST, -1),
    ]
    assert [(a.ok, a.code, a.message) for a in answers] == [
        (False, "bad-request", "not sent: bad uuid 'nope'"),
        (False, "bad-request", "not sent: bad uuid 'GPU-x;rm'"),
        (False, "bad-request", "not sent: bad action 'melt'"),
        (False, "bad-request", "not sent: bad index -1"),
    ]
    assert hosts.fleet.links[HOST].session is sent  # nothing broke the helper's line


async def test_each_answer_is_handed_on_as_json_values(hosts: FleetHosts) -> None:
    held = await hosts.holders(HOST, 1)
    assert held.ok and isinstance(held.value, dict), held
    json.dumps(held.value)  # JSON values only
    for answer in (
        await hosts.clocks(HOST, 1, _uuid(hosts, 1), "lock"),
        await hosts.reset_gpu(HOST, 1, _uuid(hosts, 1)),
    ):
        if answer.ok:
            json.dumps(answer.value)
        else:  # the simulator may refuse (not root, a process on it): one line, sent
            assert answer.code != "bad-request" and "\n" not in (answer.message or ""), answer
