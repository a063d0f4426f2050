"""A hung NVML call on a host (the simulator's ``hang`` fault, armed at run time on a
real helper) stops its samples: the link calls the host stale, and the health board
keeps the critical problem its last samples showed, marked as last known, instead
of collapsing the host to "host stale"."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from test_e2e_fences import SimFault

from gputui.config.loader import parse_config
from gputui.health.board import STALE_MARK, HealthBoard
from gputui.telemetry import HostSnapshot, HostStatus


async def test_a_hung_nvml_call_keeps_the_last_known_criticals_visible(
    fleets: Any, wait: Any, monkeypatch: Any, tmp_path: Any
) -> None:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    spec = f"2xa100-80gb,name=hang-{uuid.uuid4().hex[:10]},fault=remap-failed@0"
    data = {
        "refresh_interval": 0.2,
        "health": {"stale_after_s": 1},
        "hosts": [{"name": "h1", "local": True, "sim": spec}],
    }
    config = parse_config(json.dumps(data), "hung-nvml")
    fleet = await fleets(config)
    board = HealthBoard(config.health)
    fleet.subscribe(lambda snap: board.observe(snap, time.time()))

    def codes() -> dict[str, str]:
        return {p.finding.code: p.finding.severity for p in board.problems()}

    await wait(lambda: codes().get("remap-failed") == "crit", what="the RMA card on the board")
    outcome = await fleet.request("h1", SimFault(fault="hang@1"))
    assert outcome.ok, outcome.message

    def stale() -> HostSnapshot | None:
        snap: HostSnapshot = fleet.snapshots()["h1"]
        return snap if snap.status is HostStatus.STALE else None

    await wait(stale, what="the host stale")
    assert codes() == {"remap-failed": "crit", "stale": "warn"}
    rma = next(p for p in board.problems() if p.finding.code == "remap-failed")
    assert rma.finding.title.endswith(STALE_MARK)
