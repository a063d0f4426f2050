"""The week view (``W``) and the enqueue and claim forms in Chinese: nothing English
is left on them (``english_words``), their refusal lines included, and the board's
lines keep their columns under Chinese day names at 80x24 and 200x50 (cells, not
characters)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.app import App
from textual.widgets import Input
from ui_helpers import screen_text, until

from gputui.common import i18n
from gputui.common.text import cells
from gputui.scheduler.client.errors import HeadError
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.week import week_problem
from gputui.ui.screens.forms import ClaimScreen, FormScreen, SubmitScreen
from gputui.ui.screens.week import SCROLLBAR, WeekScreen
from gputui.ui.widgets.week_board import (
    DAY_S,
    DAYS,
    Bar,
    BoardRow,
    board_lines,
    day_cells,
    label_width,
    pool_rows,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words

SIZES = [(80, 24), (200, 50)]
SINCE = 1_764_547_200.0  # Monday 1 December 2025, 00:00 UTC
NOW = SINCE + 3 * 3600
ROWS = [
    BoardRow(f"GPU-{h}-{i}", f"{h}:{i}", pool)
    for h, pool in (("gpu01", "a100"), ("gpu02", "h100"))
    for i in range(4)
]
BARS = [
    Bar(
        "booking",
        12,
        ("GPU-gpu01-0", "GPU-gpu01-1"),
        SINCE + DAY_S,
        SINCE + 3 * DAY_S,
        "alice",
        "paper deadline",
    ),
    Bar("maint", 13, ("GPU-gpu02-0",), SINCE + 4 * DAY_S, SINCE + 5 * DAY_S, "root", "firmware"),
    Bar("claim", 7, ("GPU-gpu01-2",), NOW - 3600, NOW + 7200, "bob", "notebook"),
    Bar("job", 40, ("GPU-gpu02-1", "GPU-gpu02-2"), NOW - 600, None, "carol", "train"),
]
DATA = {
    "gpu",
    "gpu01",
    "gpu02",
    "alice",
    "bob",
    "carol",
    "root",
    "paper",
    "deadline",
    "firmware",
    "a100",
    "h100",
}


KEYS = {"esc"}
"""Key names as the footer shows them."""


def marks(text: str) -> set[str]:
    """The board's runs of one booking letter (``AAAA``): marks, not words."""
    return {w for w in re.findall(r"[A-Za-z]+", text) if len(set(w)) == 1}


class WeekHost(App[None]):
    """Only the week screen: nobody answers its ``Wanted`` (the test does)."""

    ENABLE_COMMAND_PALETTE = False

    def on_mount(self) -> None:
        self.push_screen(WeekScreen(clock=lambda: NOW))


def _at_cell(line: str, column: int) -> str:
    """What ``line`` shows from display cell ``column`` on."""
    used = 0
    for i, ch in enumerate(line):
        if used >= column:
            return line[i:]
        used += cells(ch)
    return ""


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("pools", [False, True])
async def test_the_week_view_in_chinese_has_no_english_and_keeps_its_columns(
    chinese: None, size: tuple[int, int], pools: bool
) -> None:
    app = WeekHost()
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: isinstance(app.screen, WeekScreen), "the week screen")
        week = app.screen
        assert isinstance(week, WeekScreen)
        if pools:
            await pilot.press("p")
        week.show_week(week.token, ROWS, BARS)
        await until(pilot, lambda: bool(week.lines), "the board")
        text = screen_text(app)
        assert english_words(text, DATA | KEYS | marks(text)) == [], text
        assert "周一" in text and ("按资源池" if pools else "按 GPU") in text
        width = size[0] - SCROLLBAR  # (the board's room: less the scrollbar's gutter)
        lines = week.lines
        assert all(cells(line) <= width for line in lines)
        shown = pool_rows(ROWS) if pools else ROWS
        label = label_width(width, shown)
        per_day = day_cells(width, label)
        header = lines[0]
        for d in range(DAYS):  # each day's name starts over its own cells
            assert _at_cell(header, label + 1 + d * per_day)[:1] in "一二三四五六日周", (d, header)
        for line in lines[1 : 1 + len(shown)]:  # every line's cells start at the same column
            assert cells(line) == label + 1 + DAYS * per_day, line
        if pools:
            assert _at_cell(lines[1], label + 1)[: per_day * 2].strip(".") != ""


@pytest.mark.parametrize(
    "exc",
    [
        HeadError("unknown-op", "no such op"),
        HeadError("denied", "bookings are for admins"),
    ],
)
async def test_the_week_views_problems_are_in_chinese(chinese: None, exc: HeadError) -> None:
    app = WeekHost()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, WeekScreen), "the week screen")
        week = app.screen
        assert isinstance(week, WeekScreen)
        week.show_problem(week.token, week_problem(exc))
        await until(pilot, lambda: bool(week.lines), "the problem")
        text = screen_text(app)
        # (the head's own words are its data)
        head_words = {"bookings", "are", "for", "admins"}
        assert english_words(text, head_words | KEYS) == [], text
        assert "调度主节点" in text and "没有可显示的预约" in text


@settings(max_examples=60, deadline=None)
@given(st.integers(40, 240), st.integers(-3, 3), st.booleans())
def test_a_chinese_board_fits_its_width_in_cells(width: int, weeks: int, pools: bool) -> None:
    i18n.choose("zh_CN")
    try:
        lines = board_lines(ROWS, BARS, SINCE + weeks * DAYS * DAY_S, width, pools=pools)
    finally:
        i18n.choose("en")
    assert all(cells(line) <= width for line in lines)
    text = "\n".join(lines)
    cut_short = {w[:n] for w in DATA for n in range(1, len(w))}  # (a note cut at the edge)
    assert english_words(text, DATA | cut_short | marks(text)) == []


# -- the forms ---------------------------------------------------------------------

FORM_DATA = {
    # the forms' examples: a command line, variables, keywords of "runs in" and "export"
    "python", "train.py", "train", "epochs", "SEED", "WANDB_MODE", "offline", "NONE", "ALL",
    "KEY", "KEY1", "KEY2", "ENV", "PATH", "IMAGE", "image", "GPUTUI", "SBATCH", "srv", "proj",
    "gpu", "gpu01", "home", "you", "x.sh", "ID",
}  # fmt: skip


def _form(kind: type[FormScreen]) -> FormScreen:
    return SubmitScreen(cwd="/srv/proj") if kind is SubmitScreen else ClaimScreen("gpu01")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", [SubmitScreen, ClaimScreen])
async def test_the_forms_in_chinese_have_no_english(
    chinese: None, app: GpuTuiApp, size: tuple[int, int], kind: type[FormScreen]
) -> None:
    async with app.run_test(size=size) as pilot:
        form = _form(kind)
        await app.push_screen(form)
        await until(pilot, lambda: isinstance(app.focused, Input), "the form's first field")
        text = screen_text(app)
        assert english_words(text, FORM_DATA) == [], text
        assert "MIG 切片" in text or size[1] < 30  # (the submit form scrolls at 24 rows)


BAD: list[tuple[type[FormScreen], dict[str, str], str]] = [
    (SubmitScreen, {"f-command": ""}, "f-command"),
    (SubmitScreen, {"f-command": "'unclosed"}, "f-command"),
    (SubmitScreen, {"f-gpus": ""}, "f-gpus"),
    (SubmitScreen, {"f-gpus": "x"}, "f-gpus"),
    (SubmitScreen, {"f-gpus": "99"}, "f-gpus"),
    (SubmitScreen, {"f-mig": "big"}, "f-mig"),
    (SubmitScreen, {"f-cwd": "relative"}, "f-cwd"),
    (SubmitScreen, {"f-after": "x,y"}, "f-after"),
    (SubmitScreen, {"f-script": "rel.sh"}, "f-script"),
    (SubmitScreen, {"f-runs-in": "somewhere else"}, "f-runs-in"),
    (ClaimScreen, {"f-gpus": ""}, "f-gpus"),
    (ClaimScreen, {"f-gpus": "0"}, "f-gpus"),
    (ClaimScreen, {"f-mig": "1g.10gb+"}, "f-mig"),
]


@pytest.mark.parametrize(("kind", "values", "field"), BAD)
async def test_the_forms_refusals_are_in_chinese(
    chinese: None, app: GpuTuiApp, kind: type[FormScreen], values: dict[str, str], field: str
) -> None:
    sent: list[Any] = []
    async with app.run_test(size=(200, 50)) as pilot:
        form = _form(kind)
        await app.push_screen(form)
        await until(pilot, lambda: isinstance(app.focused, Input), "the form")
        if kind is SubmitScreen and "f-command" not in values:
            values = {"f-command": "python train.py", **values}
        for name, value in values.items():
            form.query_one(f"#{name}", Input).value = value
        form.action_send()
        await pilot.pause()
        line = str(form.query_one("#form-error").render())
        assert line and not form.sending, line
        assert app.focused is form.query_one(f"#{field}")
        # The field's own words are data (a profile, a path, the shell's own message).
        allowed = FORM_DATA | {
            "big",
            "relative",
            "rel.sh",
            "somewhere",
            "else",
            "unclosed",
            "No",
            "closing",
            "quotation",
        }
        assert english_words(line, allowed) == [], line
        assert not sent


class _Forms(App[None]):
    CSS_PATH: ClassVar[str | None] = None
