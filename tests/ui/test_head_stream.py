"""The console through the head's telemetry stream.

A real head over simulated hosts (the simulator's helpers, run as local helpers by
the head's own fleet) streams to a console (``HeadTelemetry`` over the head's real
socket); its grid must be, cell by cell, the grid of a console fed the very
snapshots the head's fleet made (what a direct session to the same helpers shows),
at 80 and 200 columns. And when the head cannot be reached, the console says so and
offers direct SSH, which ``S`` switches to.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ui_fakes import FakeSource, fixed_clock
from ui_helpers import grid_line, screen_text, shown, told, until

from gputui.config.models import Config
from gputui.fleet.fleet import Fleet
from gputui.scheduler.client.deltas import host_view
from gputui.scheduler.client.telemetry import FALLBACK_HINT, HeadTelemetry
from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.fleet_hostops import FleetHosts
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.store.engine import jobs_namespace, open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp

SIZES = [(80, 24), (200, 50)]
HOSTS = {"sim01": "2xrtx3090,name=sim01", "sim02": "3xa100-80gb,name=sim02"}


def _config(sock: Path) -> Config:
    return Config.model_validate(
        {
            # One sample a minute: the helpers' first sample is all a test sees.
            "refresh_interval": 60,
            "hosts": [
                {"name": n, "local": True, "sim": spec, "python": sys.executable}
                for n, spec in HOSTS.items()
            ],
            "head": {"socket": str(sock)},
        }
    )


@pytest.fixture
async def head(tmp_path: Path) -> AsyncIterator[tuple[Head, Config]]:
    sock = tmp_path / "head.sock"
    config = _config(sock)
    engine = open_store(tmp_path / "db" / "gputui.db")
    namespace = jobs_namespace(engine)
    fleet = Fleet(config, jobs_namespace=namespace)
    hosts = FleetHosts(config, namespace, fleet=fleet)
    daemon = Head(
        SqlStore(engine),
        hosts,
        HeadSettings(socket=sock),
        host_pools=dict.fromkeys(HOSTS, "sim"),
    )
    await daemon.start()
    try:
        yield daemon, config
    finally:
        await daemon.close()


def _sampled(snap: HostSnapshot | None) -> bool:
    return snap is not None and snap.status is HostStatus.LIVE and snap.sample is not None


def _grid(app: GpuTuiApp) -> dict[str, str]:
    return {key: grid_line(app, key) for key in shown(app)}


@pytest.mark.parametrize("size", SIZES)
async def test_the_heads_stream_draws_the_grid_a_direct_console_draws(
    head: tuple[Head, Config], size: tuple[int, int]
) -> None:
    daemon, config = head
    for name in HOSTS:
        await _wait(lambda n=name: _sampled(daemon.telemetry.latest(n)), f"{name} sampled")
    stream = HeadTelemetry(config)
    through_head = GpuTuiApp(stream, config, clock=fixed_clock)
    async with through_head.run_test(size=size) as pilot:
        snaps = stream.snapshots
        await until(pilot, lambda: all(_sampled(snaps().get(n)) for n in HOSTS), "the stream")
        made = {n: daemon.telemetry.latest(n) for n in HOSTS}
        await until(
            pilot,
            lambda: all(host_view(snaps()[n]) == host_view(made[n]) for n in HOSTS),  # type: ignore[arg-type]
            "the stream to bring the head's last samples",
        )
        await until(pilot, lambda: len(shown(through_head)) == 2 + 5, "every row")
        await pilot.pause()
        streamed = _grid(through_head)
    direct_source = FakeSource([s for s in made.values() if s is not None])
    direct = GpuTuiApp(direct_source, config, clock=fixed_clock)
    async with direct.run_test(size=size) as pilot:
        await until(pilot, lambda: len(shown(direct)) == 2 + 5, "every row")
        await pilot.pause()
        drawn = _grid(direct)
    assert list(streamed) == list(drawn)
    for key in drawn:
        assert streamed[key] == drawn[key], key
    assert any("3090" in line for line in drawn.values()), drawn  # the sim's GPUs drawn


async def _wait(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("size", SIZES)
async def test_an_unreachable_head_is_said_and_s_falls_back_to_direct(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    config = Config.model_validate(
        {
            "hosts": [{"name": "gpu01"}, {"name": "gpu02"}, {"name": "gpu03"}],
            "head": {"socket": str(tmp_path / "nobody-here.sock")},
        }
    )
    stream = HeadTelemetry(config, backoff_first=600, backoff_cap=600)
    direct = FakeSource()
    app = GpuTuiApp(stream, config, clock=fixed_clock, direct=lambda: direct)
    stream.on_problem = app.fallback.heard
    async with app.run_test(size=size, notifications=True) as pilot:
        await until(pilot, lambda: stream.problem is not None, "the head found away")
        await until(pilot, lambda: "unreachable" in grid_line(app, "gpu01"), "the host row")
        # The notice line says which key, however narrow the terminal.
        await until(
            pilot,
            lambda: "press S" in screen_text(app).splitlines()[-1],
            "the offer on the bottom row",
        )
        offers = [text for _, text in told(app) if "press S" in text]
        assert offers == [
            "head unreachable: press S for direct SSH (or start with gputui --direct)"
            f" — {stream.problem}"
        ]
        assert stream.snapshots()["gpu01"].message.endswith(FALLBACK_HINT)
        await pilot.press("S")
        await until(pilot, lambda: direct.started, "the direct source started")
        assert app.source is direct
        assert app.control is not stream
        await until(pilot, lambda: "gpu01:0" in shown(app), "the direct source's GPUs")
        assert "unreachable" not in grid_line(app, "gpu01")
