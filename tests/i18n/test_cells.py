"""Columns are fitted by display cells: a fitted string is always exactly its width
in cells (wide CJK characters two, combining marks none), and the grid's header in
Chinese keeps every column where it is in English, at 80, 120 and 200 columns."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from gputui.cli import layout
from gputui.common import i18n
from gputui.common.text import cells, clean, fit
from gputui.ui.widgets.grid_columns import plan_columns
from gputui.ui.widgets.grid_render import Palette, column_header

# ASCII, CJK ideographs and punctuation, fullwidth forms, accented Latin, combining marks.
_CHARS = st.one_of(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x3000, max_codepoint=0x303F),
    st.characters(min_codepoint=0xFF01, max_codepoint=0xFF60),
    st.characters(min_codepoint=0xC0, max_codepoint=0x17F),
    st.characters(min_codepoint=0x300, max_codepoint=0x36F),
)
TEXT = st.text(_CHARS, max_size=40)


@given(TEXT, st.integers(min_value=0, max_value=60), st.booleans())
def test_a_fitted_string_is_exactly_its_width_in_cells(raw: str, width: int, right: bool) -> None:
    text = clean(raw)  # what reaches a column: cleaned where it entered
    fitted = fit(text, width, right=right)
    assert cells(fitted) == width == cell_len(fitted)
    if cells(text) <= width:  # whole, and on the side asked for
        assert fitted.strip(" ") == text.strip(" ")
        assert fitted.startswith(text) if not right else fitted.endswith(text)


@given(TEXT)
def test_wide_characters_count_two_and_combining_marks_none(raw: str) -> None:
    text = clean(raw)
    assert cells(text) == layout.cells(text)


def _columns(line: str) -> list[tuple[int, int]]:
    """Each title's (first cell, cell after it) in a header line."""
    spans, at, start = [], 0, None
    for char in line + " ":
        if char == " ":
            if start is not None:
                spans.append((start, at))
                start = None
        elif start is None:
            start = at
        at += cells(char)
    return spans


_RIGHT = {"#", "TEMP", "POWER", "FAN", "SM", "PROCS"}


@pytest.mark.parametrize("width", [80, 120, 200])
@pytest.mark.parametrize(("grouped", "held"), [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("sort", [None, "util", "temp", "host"])
def test_the_chinese_grid_header_keeps_every_column_in_line(
    width: int, grouped: bool, held: bool, sort: str | None
) -> None:
    cols = plan_columns(width, grouped, 10, held=held)
    i18n.choose("en")
    english = column_header(cols, Palette.plain(), sort).text
    i18n.choose("zh_CN")
    chinese = column_header(cols, Palette.plain(), sort).text
    assert cells(english) == cells(chinese) == width
    assert "型号" in chinese and "MODEL" not in chinese
    titles = english.split()
    en, zh = _columns(english), _columns(chinese)
    assert len(en) == len(zh) == len(titles)
    for title, (en_start, en_end), (zh_start, zh_end) in zip(titles, en, zh, strict=True):
        if title.rstrip("▼▲") in _RIGHT:
            assert zh_end == en_end, (title, english, chinese)
        else:
            assert zh_start == en_start, (title, english, chinese)


NOW = 1_700_000_000.0
JOBS = [
    {
        "id": 12345,
        "user": "alexandra.k",
        "name": "resnet152-imagenet-sweep-lr3e-4",
        "state": "queued",
        "gpus": 8,
        "host": "dgx-a100-rack3-node07",
        "reason": "Resources: 8 GPUs on one host in pool a100-80g, none free until job 12001 ends",
        "started_at": None,
    },
    {
        "id": 12001,
        "user": "王小明",
        "name": "微调-llama",
        "state": "running",
        "gpus": 2,
        "host": "gpu01",
        "reason": None,
        "started_at": NOW - 3 * 86400 - 5000,
        "idle_since": NOW - 7600,
    },
]


@pytest.mark.parametrize("width", [80, 200])
def test_the_chinese_queue_table_keeps_its_columns_in_line(width: int) -> None:
    from gputui.cli.tables import queue_table

    i18n.choose("zh_CN")
    lines = queue_table(JOBS, NOW, idle_after_s=3600, width=width)
    assert lines[0].split()[:3] == ["作业号", "用户", "名称"]
    assert "资源不足" in lines[1] and "排队中" in lines[1] and "运行中" in lines[2]
    assert "空闲 2h" in lines[2]
    starts = [start for start, _ in _columns(lines[0])]
    for line in lines:
        assert cells(line) <= width
        shape = [cells(line[:i]) for i in range(len(line) + 1)]
        for start in starts[1:]:  # each column begins where its title does, after the gap
            at = shape.index(start) if start in shape else None
            assert at is not None and line[at - 2 : at] == "  " and line[at] != " ", (
                start,
                line,
            )
