"""What the console says where there is nothing to list: a GPU with no process,
a filter that matches nothing (80x24 and 200x50)."""

from __future__ import annotations

import pytest
from ui_helpers import screen_text, select, until

from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow

SIZES = [(80, 24), (200, 50)]


@pytest.mark.parametrize("size", SIZES)
async def test_a_gpu_without_processes_says_so(app: GpuTuiApp, size: tuple[int, int]) -> None:
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: "gpu01" in screen_text(app), "the grid")
        await select(pilot, app, GpuRow("gpu01", 3))  # 0 % and no process
        await until(
            pilot, lambda: "no processes on gpu01 GPU 3" in screen_text(app), "the empty line"
        )
        await select(pilot, app, GpuRow("gpu01", 0))
        await until(pilot, lambda: "processes on gpu01 GPU 0" in screen_text(app), "the list")
        assert "no processes on" not in screen_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_a_filter_that_matches_nothing_says_so(app: GpuTuiApp, size: tuple[int, int]) -> None:
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: "gpu01" in screen_text(app), "the grid")
        await pilot.press("slash", *"zzz")
        said = "no GPU matches 'zzz' (Esc clears the filter)"
        await until(pilot, lambda: said in screen_text(app), "the empty line")
        await pilot.press("escape")
        await until(pilot, lambda: said not in screen_text(app), "the rows back")
        assert "gpu01" in screen_text(app)
