"""The grid shows a card the head locked low (``power.mode: lock``): ``CLK-LOW`` in its
STATE, at 80 and 200 columns, gone again once it works.

A real head on a real socket and SQLite file (``headkit.running_head``), its host
scripted, on a clock the test moves; its hosts answer the ``clocks`` request as a
helper that locked the card does (the helper's own side is tests/remote's). The
console reads the head's pushed state, as it always does.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from test_scheduler import LAYOUT, StaticSource, snapshot, uuid
from textual.pilot import Pilot
from ui_helpers import grid_line, until

from gputui.config.models import Config, HeadConfig
from gputui.config.scheduler import Power, SchedulerConfig
from gputui.scheduler.client import HeadClient
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.head.hostops import HostAnswer
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.view import HeadView
from gputui.ui.model import CLOCKS_LOW

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import ScriptedHosts, SettableClock, running_head


@dataclass
class LockingHosts(ScriptedHosts):
    """Scripted hosts whose helpers lock and reset clocks as asked."""

    asked: list[tuple[int, str]] = field(default_factory=list)

    async def clocks(self, host: str, index: int, uuid: str, action: str) -> HostAnswer:
        self.asked.append((index, action))
        locked = action == "lock"
        value = {"index": index, "uuid": uuid, "locked": locked, "supported": True,
                 "error": None, "message": "", "mhz": 210 if locked else None}  # fmt: skip
        return HostAnswer(True, value=value)


async def _tick(pilot: Pilot[Any], hosts: ScriptedHosts, clock: SettableClock) -> None:
    """Twenty seconds on, a sample of the head's host."""
    clock.advance(20)
    hosts.sample_again("gpu01")
    await pilot.pause(0.02)


async def test_a_locked_card_shows_clk_low_at_80_and_200_columns(tmp_path: Path) -> None:
    clock = SettableClock()
    hosts = LockingHosts(LAYOUT)
    hosts.util["gpu01"] = dict.fromkeys(range(LAYOUT["gpu01"]), 0)
    sched = SchedulerConfig(power=Power(mode="lock", idle_minutes=1))
    rules = Rules(claim_idle_s=86400.0, sched=sched)
    async with running_head(tmp_path, LAYOUT, clock=clock, scripted=hosts, rules=rules) as (
        head,
        _hosts,
        sock,
    ):
        with HeadClient(sock) as client:
            await asyncio.to_thread(client.call, "claim", {"gpu_refs": ["gpu01:2"]})
        source = StaticSource([snapshot(h, n, clock()) for h, n in LAYOUT.items()])
        app = GpuTuiApp(source, Config(head=HeadConfig(socket=str(sock))))
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(12):  # a minute and more of 0 % on a claimed card
                if uuid("gpu01", 2) in app.model.clock_locks:
                    break
                await _tick(pilot, hosts, clock)
            await until(pilot, lambda: CLOCKS_LOW in grid_line(app, "gpu01:2"), "the marker")
            line80 = grid_line(app, "gpu01:2")
            assert len(line80) <= 80 and CLOCKS_LOW not in grid_line(app, "gpu01:1")
            await pilot.resize_terminal(200, 50)
            await until(pilot, lambda: len(grid_line(app, "gpu01:2")) > 80, "the wide grid")
            line200 = grid_line(app, "gpu01:2")
            assert CLOCKS_LOW in line200 and len(line200) <= 200
            assert hosts.asked == [(2, "lock")]  # only the held card; the others are free
            hosts.util["gpu01"][2] = 70  # it works: reset, and the marker goes
            await _tick(pilot, hosts, clock)
            await until(pilot, lambda: CLOCKS_LOW not in grid_line(app, "gpu01:2"), "no marker")
            assert hosts.asked == [(2, "lock"), (2, "reset")]
            assert head.clock_locks.locked == {}
    print(f"80:  {line80}\n200: {line200}")


def test_the_states_clock_locks_are_untrusted() -> None:
    state = {
        "me": {"uid": 0, "user": "root"},
        "clock_locks": [
            {"uuid": "GPU-1234"},
            {"uuid": "GPU-\x1b[31m"},
            {"uuid": 7},
            "GPU-5678",
            {"host": "x"},
        ],
    }
    assert HeadView.parse(state).clock_locks == frozenset({"GPU-1234"})
    assert HeadView.parse({"clock_locks": {"uuid": "GPU-1"}}).clock_locks == frozenset()
