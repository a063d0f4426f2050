"""Screenshots of the main screen, help, the kill confirmation and the usage screen (fixed
clock, fake data).

Regenerate after a deliberate change to the look with ``pytest tests/ui --snapshot-update``.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from ui_fakes import NOW, FakeSource, fixed_clock
from ui_helpers import steady
from usage_fakes import WEEK, usage_answer

from gputui.config.models import Config
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.ui.head.usage_view import UsageReport
from gputui.ui.screens.usage import UsageScreen


def make_app() -> GpuTuiApp:
    return GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)


async def select_alice(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, GpuTuiApp)
    await pilot.pause()
    app.main.grid.select(GpuRow("gpu01", 0))
    await steady(pilot, app)  # the picture is of the screen as it stays


def test_main_screen_120x40(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(120, 40), run_before=select_alice)


def test_main_screen_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=select_alice)


def test_main_screen_wide_200x50(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(200, 50), run_before=select_alice)


def test_help_screen(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(120, 40), press=["question_mark"])


def test_kill_confirmation(snap_compare: Any) -> None:
    async def ask(pilot: Pilot[Any]) -> None:
        await select_alice(pilot)
        await pilot.press("K")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(120, 40), run_before=ask)


def test_usage_screen_80x24(snap_compare: Any) -> None:
    async def show(pilot: Pilot[Any]) -> None:
        screen = UsageScreen(clock=fixed_clock)
        await pilot.app.push_screen(screen)
        await pilot.pause()
        span = {"since": NOW - WEEK, "until": NOW}
        users, groups = (
            UsageReport.parse(usage_answer({**span, **args}), since=NOW - WEEK, until=NOW)
            for args in ({"by": "user", "hourly": True}, {"by": "group"})
        )
        screen.show_usage(screen.token, users, groups)
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=show)
