"""Notices: one line on the bottom row for a few seconds, never over a form, and a
history one key away (``N``), at 80x24 and 200x50."""

from __future__ import annotations

import pytest
from ui_helpers import help_text, screen_text, shows, steady, until

from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.ui.notices import SHOW_S, NoticeLog, show_for
from gputui.ui.screens.forms import ClaimScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.notices import NoticesScreen

SIZES = [(80, 24), (200, 50)]
ENV = "export CUDA_VISIBLE_DEVICES=GPU-12345678-1234-1234-1234-123456789abc"
LONG = "claim 7 granted: 2 GPU(s) on gpu01; sent to the terminal clipboard (OSC 52)"


def rows(app: GpuTuiApp) -> list[str]:
    return screen_text(app).splitlines()


@pytest.mark.parametrize("size", SIZES)
async def test_a_notice_is_one_line_on_the_bottom_row_and_short_lived(
    app: GpuTuiApp, size: tuple[int, int]
) -> None:
    async with app.run_test(size=size, notifications=True) as pilot:
        await until(pilot, lambda: "gpu01" in screen_text(app), "the grid")
        # The cursor on the grid's lowest GPU line, the one a notice would hide.
        assert app.main.grid.select(GpuRow("gpu02", 3))
        before = await steady(pilot, app)
        app.notify(f"{LONG}\n{ENV}", title="claimed on gpu01", timeout=20)
        app.notify("a failure", title="cannot claim", severity="error", timeout=30)
        await until(pilot, lambda: "cannot claim: a failure" in screen_text(app), "the notice")
        after = rows(app)
        assert len(after) == size[1]
        # Only the bottom row (the footer's) changed, and it holds the newest notice.
        assert after[:-1] == before[:-1]
        assert "cannot claim: a failure" in after[-1]
        assert "claimed on gpu01" not in screen_text(app)  # one line: the newest
        # One toast at a time: two on the one row were seen drawn over each other.
        (shown,) = app._notifications
        assert shown.timeout == SHOW_S["error"]
        app.notify(LONG, title="claimed on gpu01", timeout=20)
        await until(pilot, lambda: "claimed on gpu01" in rows(app)[-1], "the newer notice")
        (shown,) = app._notifications
        assert shown.timeout == SHOW_S["information"]
        assert "cannot claim" not in screen_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_a_notice_never_lands_on_an_open_form(app: GpuTuiApp, size: tuple[int, int]) -> None:
    async with app.run_test(size=size, notifications=True) as pilot:
        await pilot.pause()
        form = ClaimScreen()
        await app.push_screen(form)
        await pilot.pause()
        shown = screen_text(app)
        app.notify("job 3 started on gpu01", title="job started")
        await until(pilot, lambda: len(app.notices) == 1, "the notice")
        await pilot.pause(0.1)
        assert "job 3 started" not in screen_text(app)
        assert screen_text(app) == shown
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "the form to close")
        await until(pilot, lambda: "job 3 started" in rows(app)[-1], "the notice, after")


@pytest.mark.parametrize("size", SIZES)
async def test_the_notices_screen_lists_every_notice_in_full(
    app: GpuTuiApp, size: tuple[int, int]
) -> None:
    async with app.run_test(size=size, notifications=True) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen is not app.main, "the help")
        assert "N  Every notice so far, in full" in help_text(app)
        await pilot.press("escape")  # leave the help
        app.notify(f"{LONG}\n{ENV}", title="claimed on gpu01")
        app.notify("[b]sort[/b]: util")  # markup: the history keeps the words
        await until(pilot, lambda: len(app.notices) == 2, "the notices")
        await pilot.press("N")
        await until(pilot, lambda: isinstance(app.screen, NoticesScreen), "the notices screen")
        lines = (await shows(pilot, app, "sort: util", "claimed on gpu01: claim 7")).splitlines()
        newest = next(i for i, line in enumerate(lines) if "sort: util" in line)
        claim = next(i for i, line in enumerate(lines) if "claimed on gpu01: claim 7" in line)
        assert newest < claim
        assert lines[claim].startswith("22:13:20  info ")
        # The env line: whole, alone on its row, where a mouse can select it.
        assert lines[claim + 1].rstrip() == ENV
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "back")


async def test_the_notices_screen_says_when_there_are_none(app: GpuTuiApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("N")
        await until(pilot, lambda: "No notices yet" in screen_text(app), "the empty line")


def test_the_log_keeps_whole_lines_cleaned_and_a_bounded_history() -> None:
    log = NoticeLog(keep=3)
    for i in range(5):
        log.add(float(i), "information", "t", f"line {i}\n\x1b[31mred\x1b[0m\n\n")
    assert len(log) == 3
    newest = log.newest_first()[0]
    assert newest.lines == ("line 4", "red")
    assert newest.line == "t: line 4 · red"
    assert show_for("information", 40) == SHOW_S["information"]
    assert show_for("error", None) == SHOW_S["error"]
    assert show_for("information", 1.5) == 1.5
