"""One console, one connection to the head.

The console as ``gputui`` builds it (``console_app``: the head's telemetry stream as
its source, the scheduler side beside it) against a real head on a real socket: its
control session and its telemetry subscription ride one connection, counted by the
head. When the head goes (restarted on the same socket and database), one
reconnect brings both back on one new connection: the state subscription, the
control requests, and the telemetry subscription with the view the console had.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ui_fakes import FakeSource, fixed_clock
from ui_helpers import until

from gputui.cli.console_app import console_app
from gputui.config.models import Config
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.telemetry import HeadTelemetry
from gputui.scheduler.head.daemon import Head
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.link import HeadLink
from gputui.ui.head.slurm import HeadRelay

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head

LAYOUT = {"gpu01": 2, "gpu02": 2}


def _parts(app: GpuTuiApp) -> tuple[HeadLink, HeadTelemetry]:
    link, stream = app.head.link, app.source
    assert link is not None and isinstance(stream, HeadTelemetry)
    return link, stream


def _settled(app: GpuTuiApp, head: Head, pushes: int) -> bool:
    """The link subscribed, the stream pushed since ``pushes``, and the head holds
    the console's view (its grid's hosts in full)."""
    link, stream = _parts(app)
    viewers = head.telemetry.viewers()
    return (
        link.connected
        and stream.pushes > pushes
        and len(viewers) == 1
        and viewers[0][0] is not None
        and bool(viewers[0][0])
    )


async def test_a_console_is_one_connection_and_one_reconnect(tmp_path: Path) -> None:
    config = Config.model_validate(
        {"hosts": [{"name": n} for n in LAYOUT], "head": {"socket": str(tmp_path / "head.sock")}}
    )
    app = console_app(config, config.theme)
    async with app.run_test(size=(80, 24)) as pilot:
        link, stream = _parts(app)
        async with running_head(tmp_path, LAYOUT) as (head, _hosts, _sock):
            link.retry_now()
            await until(pilot, lambda: _settled(app, head, 0), "the console on the head")
            assert head.connections_served == 1
            claim = await link.ask("claim", lambda b: b.claim(gpus=1, wait=False))
            assert claim["claim"]["state"] == "active"
            view = head.telemetry.viewers()
            pushes = stream.pushes
            assert head.connections_served == 1
        # The head is gone: both parts say so, from the one connection's end.
        await until(
            pilot, lambda: link.reason is not None and stream.problem is not None, "both away"
        )
        async with running_head(tmp_path, LAYOUT) as (head, _hosts, _sock):
            link.retry_now()
            await until(pilot, lambda: _settled(app, head, pushes), "the console back")
            assert head.telemetry.viewers() == view  # subscribed again with its view
            ident = claim["claim"]["id"]
            mine: Any = await link.ask("claims", lambda b: b.claims())
            assert [c["id"] for c in mine["claims"]] == [ident]
            await link.ask("release", lambda b: b.release(claim_ids=[ident]))
            mine = await link.ask("claims", lambda b: b.claims())
            assert mine["claims"] == []
            assert head.connections_served == 1
            assert app.head.channel is not None and app.head.channel.opened == 2


async def test_leaving_the_stream_for_direct_ssh_keeps_the_scheduler_connection(
    tmp_path: Path,
) -> None:
    """``S`` with the head reachable: the telemetry subscription ends at the head
    (``telemetry_stop``), the scheduler side stays on the same connection."""
    async with running_head(tmp_path, LAYOUT) as (head, _hosts, sock):
        config = Config.model_validate(
            {"hosts": [{"name": n} for n in LAYOUT], "head": {"socket": str(sock)}}
        )
        stream = HeadTelemetry(config)
        direct = FakeSource()
        app = GpuTuiApp(stream, config, clock=fixed_clock, direct=lambda: direct)
        app.head.channel = stream.channel
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: _settled(app, head, 0), "the console on the head")
            await pilot.press("S")
            await until(pilot, lambda: direct.started, "the direct source started")
            await until(pilot, lambda: not head.telemetry.viewers(), "the stream to end")
            link = app.head.link
            assert link is not None and link.connected
            claim = await link.ask("claim", lambda b: b.claim(gpus=1, wait=False))
            assert claim["claim"]["state"] == "active"
            assert head.connections_served == 1


async def test_the_slurm_relay_asks_over_the_consoles_connection(tmp_path: Path) -> None:
    """With Slurm as the scheduler and a head as its relay, the console's ``slurm``
    requests ride its telemetry's connection; with none, one of the relay's own."""
    async with running_head(tmp_path, LAYOUT) as (head, _hosts, sock):
        config = Config.model_validate(
            {"hosts": [{"name": n} for n in LAYOUT], "head": {"socket": str(sock)}}
        )
        stream = HeadTelemetry(config)
        relay = HeadRelay(config, stream.channel)
        await stream.start()
        try:
            await _wait(lambda: stream.pushes > 0, "the stream")
            with pytest.raises(HeadError, match="no slurm: section"):
                await relay.ask()  # this head relays nothing: its answer, over that connection
            assert head.connections_served == 1
        finally:
            await stream.close()
        try:
            with pytest.raises(HeadError, match="no slurm: section"):
                await relay.ask()
            assert head.connections_served == 2
        finally:
            await relay.close()


async def _wait(condition: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
