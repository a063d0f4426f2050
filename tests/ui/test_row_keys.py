"""j/k, Home and End move the row cursor in every table of the console.

The queue's table is covered with a real head in ``test_queue_follow``; here the
health and audit screens (fed as their own tests feed them) and the main screen's
process table, each at 80x24 and 200x50.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from test_audit_screen import ROWS
from test_health_screen import board
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import DataTable
from ui_fakes import FakeSource, fixed_clock
from ui_helpers import select, until

from gputui.config.models import Config
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import HostRow
from gputui.ui.screens.audit import AuditScreen
from gputui.ui.screens.health import HealthScreen
from gputui.ui.widgets.process_table import ProcessTable
from gputui.ui.widgets.rows import RowTable

SIZES = [(80, 24), (200, 50)]


async def health(pilot: Pilot[Any], app: GpuTuiApp) -> DataTable[Any]:
    await app.push_screen(HealthScreen(board(), clock=fixed_clock, user="root"))
    await pilot.pause()
    return app.screen.query_one("#health-table", DataTable)


async def audit(pilot: Pilot[Any], app: GpuTuiApp) -> DataTable[Any]:
    screen = AuditScreen(clock=fixed_clock)
    await app.push_screen(screen)
    await pilot.pause()
    screen.show_rows(screen.token, sorted(ROWS, key=lambda r: -r.time))
    await pilot.pause()
    return screen.query_one("#audit-table", DataTable)


async def processes(pilot: Pilot[Any], app: GpuTuiApp) -> DataTable[Any]:
    table = app.main.query_one(ProcessTable)
    await select(pilot, app, HostRow("gpu01"))  # its 4 processes
    await until(pilot, lambda: table.row_count == 4, "gpu01's processes")
    table.focus()
    await pilot.pause()
    return table


Opener = Callable[[Pilot[Any], GpuTuiApp], Awaitable[DataTable[Any]]]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("open_table", [health, audit, processes], ids=lambda f: f.__name__)
async def test_j_k_home_and_end_move_the_row_cursor(
    size: tuple[int, int], open_table: Opener
) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        table = await open_table(pilot, app)
        last = table.row_count - 1
        assert last >= 2
        assert table.has_focus and table.cursor_row == 0
        await pilot.press("j")
        assert table.cursor_row == 1
        await pilot.press("j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        await pilot.press("end")
        assert table.cursor_row == last
        await pilot.press("home")
        assert table.cursor_row == 0


async def test_a_line_drawn_before_the_widths_were_measured_is_drawn_again() -> None:
    """A cell grows in place; a line is drawn (as a repaint may) before the table is
    idle and measures the column again. Once measured, the line shows the whole
    cell: Textual kept the line it drew at the old width (its caches are keyed by a
    count of changes that measuring does not move)."""

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield RowTable(id="t")

    app = One()
    async with app.run_test(size=(80, 10)) as pilot:
        table = app.query_one("#t", RowTable)
        table.add_column("TIME", key="time")
        table.add_row("0:03", key="job")
        await pilot.pause()
        table.update_cell("job", "time", "12-03:00:00", update_width=True)
        table.render_line(1)  # the job's line, drawn at the width the column had
        await pilot.pause()
        assert "12-03:00:00" in table.render_line(1).text
