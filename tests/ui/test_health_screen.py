"""The health view (``h``): the ranked problems, the selected one in full, acknowledging.

The board is fed built snapshots (a fixed clock), so the screenshots are stable:
regenerate them after a deliberate change with ``pytest tests/ui --snapshot-update``.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from ui_fakes import NOW, FakeSource, fixed_clock

from gputui.config.models import Config, HealthThresholds
from gputui.health.board import HealthBoard
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.health import HealthScreen
from gputui.wire.messages import Event, GpuInfo, GpuSample, Hello, Sample


def _host(name: str, *gpus: GpuSample, events: tuple[Event, ...] = ()) -> HostSnapshot:
    infos = tuple(
        GpuInfo(index=g.index, uuid=g.uuid, pcie_max_gen=4, pcie_max_width=16, temp_slowdown_c=87)
        for g in gpus
    )
    return HostSnapshot(
        name=name,
        address=name,
        status=HostStatus.LIVE,
        hello=Hello(protocol=1, helper_version="t", hostname=name, gpus=infos),
        sample=Sample(seq=1, time=NOW, gpus=gpus),
        received_at=NOW,
        events=events,
    )


def board() -> HealthBoard:
    b = HealthBoard(HealthThresholds())
    gpu = TypeAdapter(GpuSample).validate_python
    read = {"health_read": True}  # a health reading each: every check made
    b.observe(
        _host(
            "gpu01",
            gpu({"index": 0, "uuid": "GPU-a0", "ecc_uncorrected": 2, "util_gpu": 0, **read}),
            gpu({"index": 1, "uuid": "GPU-a1", "mem_used_mib": 20480, "util_gpu": 0, **read}),
            events=(
                Event(
                    time=NOW - 3600,
                    kind="xid",
                    gpu_index=1,
                    xid=79,
                    text="Xid 79: GPU has fallen off the bus",
                ),
            ),
        ),
        NOW - 120,
    )
    b.observe(
        _host(
            "gpu02",
            gpu(
                {"index": 0, "uuid": "GPU-b0", "throttle": ["sw_power_cap"], "util_gpu": 99, **read}
            ),
            gpu({"index": 1, "uuid": "GPU-b1", "health_read": True, "remap_pending": True}),
        ),
        NOW,
    )
    b.observe(
        HostSnapshot(
            name="gpu03",
            address="gpu03",
            status=HostStatus.UNREACHABLE,
            message="connection refused",
        ),
        NOW,
    )
    return b


async def show(pilot: Pilot[Any]) -> None:
    await pilot.app.push_screen(HealthScreen(board(), clock=fixed_clock, user="root"))
    await pilot.pause()


def make_app() -> GpuTuiApp:
    return GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)


def test_health_view_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=show)


def test_health_view_200x50(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(200, 50), run_before=show)


async def test_worst_first_the_detail_follows_the_cursor_and_an_ack_sticks() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await show(pilot)
        screen = app.screen
        assert isinstance(screen, HealthScreen)
        severities = [p.finding.severity for p in screen.problems]
        assert severities == sorted(severities, key=["crit", "warn", "info"].index)
        assert severities[0] == "crit" and severities[-1] == "info"
        table = screen.query_one("#health-table", DataTable)
        assert table.row_count == len(screen.problems) == 6
        detail = screen.query_one("#health-detail", Static)
        first = screen.problems[0].finding
        assert first.title in str(detail.render())
        await pilot.press("down")
        assert screen.problems[1].finding.meaning in str(detail.render())
        await pilot.press("a")
        await pilot.pause()
        await pilot.press(*"RMA 1234", "enter")
        await pilot.pause()
        acked = [p for p in screen.problems if p.ack is not None]
        assert [(p.key, p.ack.by, p.ack.note) for p in acked if p.ack] == [
            (screen.problems[1].key, "root", "RMA 1234")
        ]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HealthScreen)


async def test_h_opens_it_from_the_main_screen_fed_by_the_hosts() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HealthScreen) and screen.board is app.health
        status = str(screen.query_one("#health-status", Static).render())
        # Which screen this is, as the queue and usage screens say, then the totals.
        assert status.startswith(" gputui health  ") and status.split("  ", 2)[2]


async def test_one_who_may_not_acknowledge_is_told_and_nothing_changes() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        b = board()
        screen = HealthScreen(
            b, clock=fixed_clock, user="bob", may_acknowledge=lambda: "only admins acknowledge"
        )
        await app.push_screen(screen)
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, HealthScreen)  # no note asked for
        assert all(p.ack is None for p in b.problems())
        assert any("only admins" in str(n.message) for n in app._notifications)
