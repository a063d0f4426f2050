"""The console in Chinese (``LANG=zh_CN.UTF-8``): the main screen at 80x24 and 200x50
and the help, with the grid's columns in line under their Chinese titles (fixed
clock, fake data).

Regenerate after a deliberate change to the look with ``pytest tests/ui --snapshot-update``.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_snapshots import make_app, select_alice

from gputui.common.text import cells
from gputui.ui.app import GpuTuiApp


def test_main_screen_in_chinese_80x24(snap_compare: Any, chinese: None) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=select_alice)


def test_main_screen_in_chinese_200x50(snap_compare: Any, chinese: None) -> None:
    assert snap_compare(make_app(), terminal_size=(200, 50), run_before=select_alice)


def test_help_screen_in_chinese(snap_compare: Any, chinese: None) -> None:
    assert snap_compare(make_app(), terminal_size=(120, 40), press=["question_mark"])


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_grid_lines_are_as_wide_as_the_chinese_header(
    chinese: None, size: tuple[int, int]
) -> None:
    """Every line of the grid, the Chinese header first, is exactly the grid's width
    in cells, and the header's titles start where the English ones do."""
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert isinstance(app, GpuTuiApp)
        grid = app.main.grid
        width = grid.size.width
        lines = [grid.render_line(y).text for y in range(min(6, grid.size.height))]
        assert "型号" in lines[0] and "利用率" in lines[0] and "MODEL" not in lines[0]
        assert all(cells(line) == width for line in lines), lines
        footer = app.main.query_one("TranslatedFooter")
        labels = " ".join(str(key.description) for key in footer.children)  # type: ignore[attr-defined]
        assert "筛选" in labels and "Filter" not in labels
