"""The console's own health checks (no head) run in slices, never in one block on the
UI thread: at 4,096 GPUs one block took ~300 ms every 2 s, and a key pressed then
waited for it (render's key p99 went from 24 to 300+ ms)."""

from __future__ import annotations

import time

import pytest
from ui_fakes import FakeSource, cluster, fixed_clock
from ui_helpers import until

from gputui.config.models import Config
from gputui.health.board import HealthBoard
from gputui.telemetry import HostSnapshot
from gputui.ui import app as app_module
from gputui.ui.app import GpuTuiApp

HOSTS = 200


async def test_a_round_of_checks_is_sliced_and_keys_are_handled_in_between(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = cluster()[1]  # an Xid 79 on GPU 1
    snaps = [base.with_changes(name=f"n{i:03d}", address=f"n{i:03d}") for i in range(HOSTS)]
    observed: list[str] = []
    real = HealthBoard.observe

    def costly(self: HealthBoard, snap: HostSnapshot, now: float) -> None:
        observed.append(snap.name)
        end = time.perf_counter() + 0.0005  # what a host of 8 GPUs costs on a slow core
        while time.perf_counter() < end:
            pass
        real(self, snap, now)

    monkeypatch.setattr(HealthBoard, "observe", costly)
    monkeypatch.setattr(app_module, "HEALTH_EVERY_S", 3600.0)  # rounds only when asked
    app = GpuTuiApp(FakeSource(snaps), Config(), clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: len(app.model.hosts) == HOSTS, "the hosts")
        observed.clear()
        app.judge_health()
        assert 0 < len(observed) < HOSTS  # one slice now, the rest after input
        await pilot.press("down")  # handled while the round goes on
        await until(pilot, lambda: len(observed) == HOSTS, "the whole round")
        assert sorted(observed) == sorted(s.name for s in snaps)  # each host once
        assert {p.finding.host for p in app.health.problems()} >= {"n000", f"n{HOSTS - 1:03d}"}
