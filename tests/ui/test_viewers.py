"""Viewers in the console: what the screen shows is what the head sends in full.

A real head over simulated hosts (the simulator's helpers, run by the head's own
fleet) and a console on its stream (``HeadTelemetry``): the console says which hosts
are on screen, the head sends those in full and the rest as summaries, and when the
user goes to the last host (``end``) the console says so again and that host's
detail (its health readings here) comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ui_fakes import fixed_clock
from ui_helpers import grid, until

from gputui.config.models import Config
from gputui.fleet.fleet import Fleet
from gputui.scheduler.client.deltas import host_view
from gputui.scheduler.client.telemetry import HeadTelemetry
from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.fleet_hostops import FleetHosts
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.store.engine import jobs_namespace, open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp

SIZES = [(80, 24), (200, 50)]
HOSTS = [f"sim{i:02d}" for i in range(12)]


@pytest.fixture
async def head(tmp_path: Path) -> AsyncIterator[tuple[Head, Config]]:
    # The helpers' first sample only (with its health reading).
    async with _running_head(tmp_path, refresh_s=60) as running:
        yield running


@pytest.fixture
async def flowing_head(tmp_path: Path) -> AsyncIterator[tuple[Head, Config]]:
    # Every host sampled every second: the console's tick rides on its data.
    async with _running_head(tmp_path, refresh_s=1) as running:
        yield running


@contextlib.asynccontextmanager
async def _running_head(tmp_path: Path, refresh_s: float) -> AsyncIterator[tuple[Head, Config]]:
    sock = tmp_path / "head.sock"
    config = Config.model_validate(
        {
            "refresh_interval": refresh_s,
            "hosts": [
                {"name": n, "local": True, "sim": f"4xa100-80gb,name={n}", "python": sys.executable}
                for n in HOSTS
            ],
            "head": {"socket": str(sock)},
        }
    )
    engine = open_store(tmp_path / "db" / "gputui.db")
    namespace = jobs_namespace(engine)
    hosts = FleetHosts(config, namespace, fleet=Fleet(config, jobs_namespace=namespace))
    daemon = Head(
        SqlStore(engine), hosts, HeadSettings(socket=sock), host_pools=dict.fromkeys(HOSTS, "sim")
    )
    await daemon.start()
    try:
        yield daemon, config
    finally:
        await daemon.close()


def _sampled(snap: HostSnapshot | None) -> bool:
    return snap is not None and snap.status is HostStatus.LIVE and snap.sample is not None


def _in_full(daemon: Head, stream: HeadTelemetry, name: str) -> bool:
    made, got = daemon.telemetry.latest(name), stream.snapshots().get(name)
    return made is not None and got is not None and host_view(got) == host_view(made)


def _health_read(snap: HostSnapshot | None) -> bool:
    return snap is not None and snap.sample is not None and snap.sample.gpus[0].health_read


async def _wait(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("size", SIZES)
async def test_the_screen_decides_which_hosts_come_in_full(
    head: tuple[Head, Config], size: tuple[int, int]
) -> None:
    daemon, config = head
    for name in HOSTS:
        await _wait(lambda n=name: _sampled(daemon.telemetry.latest(n)), f"{name} sampled")
    assert all(_health_read(daemon.telemetry.latest(n)) for n in HOSTS)
    stream = HeadTelemetry(config)
    app = GpuTuiApp(stream, config, clock=fixed_clock)
    async with app.run_test(size=size) as pilot:

        def told_head() -> frozenset[str] | None:
            viewers = daemon.telemetry.viewers()
            return viewers[0][0] if len(viewers) == 1 else None

        await until(pilot, lambda: len(grid(app).rows) == len(HOSTS) * 5, "every row")
        on_screen = grid(app).visible_hosts()
        assert HOSTS[0] in on_screen and HOSTS[-1] not in on_screen
        await until(pilot, lambda: told_head() == frozenset(on_screen), "the view at the head")
        await until(
            pilot,
            lambda: all(_in_full(daemon, stream, n) for n in on_screen),
            "the hosts on screen in full",
        )
        # Off screen: the grid's rows, without the health readings (a host the head
        # sent in full before it heard this console's view turns into a summary at its
        # next summary, within the 5 s cadence).
        await until(
            pilot,
            lambda: not _health_read(stream.snapshots()[HOSTS[-1]]),
            "the last host as a summary",
            timeout=15,
        )
        last = stream.snapshots()[HOSTS[-1]]
        assert _sampled(last) and not _health_read(last)
        assert not _in_full(daemon, stream, HOSTS[-1])

        await pilot.press("end")
        await until(pilot, lambda: HOSTS[-1] in grid(app).visible_hosts(), "the last host shown")
        await until(pilot, lambda: _in_full(daemon, stream, HOSTS[-1]), "the last host in full")
        assert _health_read(stream.snapshots()[HOSTS[-1]])
        now_shown = grid(app).visible_hosts()
        await until(pilot, lambda: told_head() == frozenset(now_shown), "the new view at the head")
        if HOSTS[0] not in now_shown:
            await until(
                pilot,
                lambda: not _health_read(stream.snapshots()[HOSTS[0]]),
                "the first host back to its summary",
            )


async def test_a_resize_or_the_mouse_wheel_tells_the_head_what_is_on_screen(
    flowing_head: tuple[Head, Config],
) -> None:
    """What is on screen moves without the cursor: the terminal grows, the wheel
    scrolls. With samples coming every second (the console's tick rides on them),
    the head still hears the new view, and sends those hosts in full."""
    daemon, config = flowing_head
    for name in HOSTS:
        await _wait(lambda n=name: _sampled(daemon.telemetry.latest(n)), f"{name} sampled")
    stream = HeadTelemetry(config)
    app = GpuTuiApp(stream, config, clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:

        def told_head() -> frozenset[str] | None:
            viewers = daemon.telemetry.viewers()
            return viewers[0][0] if len(viewers) == 1 else None

        await until(pilot, lambda: len(grid(app).rows) == len(HOSTS) * 5, "every row")
        small = grid(app).visible_hosts()
        await until(pilot, lambda: told_head() == frozenset(small), "the view at the head")
        cursor = grid(app).cursor
        await pilot.resize_terminal(200, 50)
        await until(pilot, lambda: len(grid(app).visible_hosts()) > len(small), "more hosts")
        grown = grid(app).visible_hosts()
        await until(pilot, lambda: told_head() == frozenset(grown), "the grown view at the head")
        # Each in full at some look (all at one instant is rare: a new sample at the
        # head differs from the console's copy until its push).
        seen: set[str] = set()

        def each_seen_in_full() -> bool:
            seen.update(n for n in grown if _in_full(daemon, stream, n))
            return seen >= set(grown)

        await until(pilot, each_seen_in_full, "those hosts in full")
        grid(app).scroll_end(animate=False, immediate=True)  # as the wheel: no cursor move
        await until(pilot, lambda: HOSTS[-1] in grid(app).visible_hosts(), "the last host shown")
        assert grid(app).cursor == cursor
        row = grid(app).cursor_row
        assert row is not None
        scrolled = frozenset(grid(app).visible_hosts()) | {row.host}  # (the cursor's too)
        await until(pilot, lambda: told_head() == scrolled, "the scrolled view")
        await until(pilot, lambda: _in_full(daemon, stream, HOSTS[-1]), "the last host in full")
