"""The sorted column's title carries htop's marker (``UTIL▼``), at 80x24 and 200x50.

The ``s`` key, the palette's "sort KEY" and the ``:sort KEY`` line all move it; the
header is drawn once per sort (or width, grouping, style), not once per frame.
"""

from __future__ import annotations

import pytest
from textual.command import CommandPalette
from ui_fakes import FakeSource, fixed_clock
from ui_helpers import grid, lines, until

from gputui.config.models import Config
from gputui.ui.app import GpuTuiApp
from gputui.ui.model import SORT_KEYS
from gputui.ui.widgets.sort_marker import marked, sorted_column

SIZES = [(80, 24), (200, 50)]
MARKERS = "▲▼"


def header(app: GpuTuiApp) -> str:
    return lines(grid(app))[0]


def marks(text: str) -> list[str]:
    """Each marked title in ``text``: ``["UTIL▼"]``."""
    return [word for word in text.split() if word[-1] in MARKERS]


@pytest.mark.parametrize("size", SIZES)
async def test_the_sorted_column_is_marked_and_the_marker_follows_the_sort(
    size: tuple[int, int],
) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        plain = header(app)
        assert marks(plain) == []  # host order, grouped by host: no column to mark
        expected = {"util": "UTIL▼", "mem": "MEMORY▼", "temp": "TEMP▼", "power": "POWER▼"}
        for key in ("util", "mem", "temp", "power", "free"):
            await pilot.press("s")
            await until(pilot, lambda k=key: SORT_KEYS[app.main.sort_index].name == k, key)
            text = header(app)
            # "free" orders by no one column; a column a narrow pane leaves out
            # (POWER at 80) has no title to mark.
            want = expected.get(key, "")
            assert marks(text) == ([want] if want and want[:-1] in plain else []), text
            # The marker takes a cell of padding: every other title stays where it was.
            assert len(text) == len(plain) == grid(app).size.width
            for title in ("MODEL", "UTIL", "MEMORY", "TEMP", "POWER", "STATE"):
                if title + "▼" not in text and title + "▲" not in text:
                    assert text.index(title) == plain.index(title), (title, text)
        # The command line and the palette go through the same place.
        await pilot.press("colon", *"sort temp", "enter")
        await until(pilot, lambda: marks(header(app)) == ["TEMP▼"], "TEMP marked from :sort")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"sort util")
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: marks(header(app)) == ["UTIL▼"], "UTIL marked from palette")
        # One list across hosts, in host order: the HOST column is marked, A to Z.
        await pilot.press("g", "colon", *"sort host", "enter")
        await until(pilot, lambda: header(app).startswith("HOST▲"), "HOST marked")
        assert marks(header(app)) == ["HOST▲"]


async def test_the_header_is_drawn_once_per_sort_not_per_frame() -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        g = grid(app)
        first = g.render_line(0)
        assert g.render_line(0) is first  # the same strip: nothing rebuilt per frame
        await pilot.press("s")
        await until(pilot, lambda: g.render_line(0) is not first, "the header redrawn")
        assert "UTIL▼" in g.render_line(0).text


def test_the_marker_never_widens_a_column() -> None:
    assert marked("UTIL", "util") == "UTIL▼" and marked("UTIL", "mem") == "UTIL"
    assert marked("HOST", "host", 4) == "HOS▲" and marked("HOST", None, 4) == "HOST"
    assert marked("TEMP", "temp", 5) == "TEMP▼"
    assert sorted_column("nosuchkey") is None and sorted_column(None) is None
