"""The week board draws waiting jobs at their estimated start (``~``, dim), from one
``estimates`` answer of the head (not an ``explain`` a job).

End to end: a real head on a real socket and SQLite file runs a job on all of
``gpu01``'s cards; a job queued behind it shows on the week view at 80x24 and
200x50 as ``~`` exactly from the running job's limit to its own, on the cards the
head projects, with a legend line, a count in the status line, and (``p``) a ``~``
line under its pool. On the board alone (hypothesis): an estimate shows exactly
where it meets a cell and nothing held or booked does, by GPU and by pool; a
hostile answer gives clean bars or none. In Chinese nothing English is left.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_scheduler import LAYOUT, StaticSource, connected, snapshot, uuid
from test_week_board import JSON, SINCE, WEEK, boards
from ui_helpers import screen_text, shows, until

from gputui.common.text import cells as cell_len
from gputui.config.models import Config, HeadConfig
from gputui.scheduler.client.errors import HeadError
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.week import estimates_note, parse_estimates
from gputui.ui.screens.week import SCROLLBAR, WeekScreen
from gputui.ui.widgets.week_board import (
    COUNTS,
    DAY_S,
    DAYS,
    ESTIMATES_LISTED,
    Bar,
    BoardRow,
    board_lines,
    covered,
    day_cells,
    label_width,
    pool_rows,
)

from headkit import FAST_TICK_S, SettableClock, running_head  # isort: skip  (on sys.path via test_scheduler)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words

SIZES = [(80, 24), (200, 50)]


def _drawn(line: str, label: int, cells: int) -> str:
    return line[label + 1 : label + 1 + DAYS * cells]


@pytest.mark.parametrize("size", SIZES)
async def test_a_waiting_job_shows_at_its_estimated_start(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    clock = SettableClock()
    async with running_head(tmp_path, LAYOUT, clock=clock, tick_s=FAST_TICK_S) as (_h, _s, sock):
        source = StaticSource([snapshot(h, n, time.time()) for h, n in LAYOUT.items()])
        app = GpuTuiApp(source, Config(head=HeadConfig(socket=str(sock))), clock=clock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            big = await link.ask(
                "submit", lambda b: b.submit(argv=["train"], gpus=4, time_limit_s=5 * 3600)
            )
            small = await link.ask(
                "submit",
                lambda b: b.submit(argv=["eval"], gpus=2, time_limit_s=30 * 3600, name="eval"),
            )
            big_id, small_id = big["job"]["id"], small["job"]["id"]

            def running() -> bool:
                view = link.view
                return view is not None and any(
                    j.id == big_id and j.started_at is not None and j.gpu_uuids for j in view.jobs
                )

            await until(pilot, running, "the 4-GPU job running", timeout=20)
            await pilot.press("W")
            await until(pilot, lambda: isinstance(app.screen, WeekScreen), "the week screen")
            week = app.screen
            assert isinstance(week, WeekScreen)
            await until(
                pilot,
                lambda: not week.asking and any(b.estimated for b in week.bars),
                "the estimate",
            )
            (guess,) = [b for b in week.bars if b.estimated]
            (held,) = [b for b in week.bars if b.kind == "job"]
            assert guess.ident == small_id and guess.user == "root" and guess.note == "eval"
            assert held.end is not None
            assert guess.start == pytest.approx(held.end)  # when the job before it ends
            assert guess.end == pytest.approx(held.end + 30 * 3600)
            assert len(guess.rows) == 2 and set(guess.rows) <= {uuid("gpu01", i) for i in range(4)}
            width = size[0] - SCROLLBAR
            lines = week.lines
            assert all(cell_len(line) <= width for line in lines)
            label = label_width(width, week.rows)
            cells = day_cells(width, label)
            ahead = set(covered(guess.start, guess.end, week.since, cells))
            running_cells = set(covered(held.start, held.end, week.since, cells))
            assert ahead - running_cells, "the estimate shows on the board this week"
            for index in range(4):
                key = uuid("gpu01", index)
                row = next(line for line in lines if line.startswith(f"gpu01:{index} "))
                drawn = _drawn(row, label, cells)
                got = {c for c, ch in enumerate(drawn) if ch == "~"}
                want = ahead - running_cells if key in guess.rows else set()
                assert got == want, (index, row)
            text = await shows(pilot, app, f"~ job {small_id} root 2 GPU est. ")
            assert f"~ job {small_id} root 2 GPU est. " in text and "eval" in text
            assert "1 job estimated" in text and "~ waiting job, estimated" in text

            await pilot.press("p")  # by pool: a ``~`` line under a100 counts its 2 cards
            await until(pilot, lambda: any(line.startswith(" ~") for line in week.lines), "~")
            pools = pool_rows(week.rows)
            label = label_width(width, pools)
            cells = day_cells(width, label)
            ahead = set(covered(guess.start, guess.end, week.since, cells))
            line = next(line for line in week.lines if line.startswith(" ~"))
            drawn = _drawn(line, label, cells)
            assert {c for c, ch in enumerate(drawn) if ch == COUNTS[1]} == ahead
            assert {c for c, ch in enumerate(drawn) if ch != "."} == ahead


# -- the board alone ------------------------------------------------------------------


@st.composite
def boards_with_estimates(draw: st.DrawFn) -> tuple[list[BoardRow], list[Bar]]:
    rows, bars = draw(boards())
    for ident in range(300, 300 + draw(st.integers(1, 20))):
        cards = draw(st.lists(st.sampled_from(rows), min_size=1, max_size=3, unique=True))
        start = SINCE + draw(st.floats(0, WEEK + DAY_S, allow_nan=False))
        end = draw(st.one_of(st.none(), st.floats(start + 60, start + 3 * DAY_S)))
        keys = tuple(r.key for r in cards)
        bars.append(Bar("estimate", ident, keys, start, end, "dave", "sweep", gpus=len(keys)))
    return rows, bars


def _meets(bar: Bar, c: int, cells: int) -> bool:
    end = SINCE + WEEK if bar.end is None else bar.end
    return c in covered(bar.start, end, SINCE, cells)


@settings(max_examples=200, deadline=None)
@given(boards_with_estimates(), st.integers(40, 240))
def test_an_estimate_shows_where_it_meets_a_cell_and_nothing_held_or_booked_does(
    board: tuple[list[BoardRow], list[Bar]], width: int
) -> None:
    rows, bars = board
    lines = board_lines(rows, bars, SINCE, width)
    assert all(cell_len(line) <= width for line in lines)
    label = label_width(width, rows)
    cells = day_cells(width, label)
    for i, row in enumerate(rows):
        drawn = _drawn(lines[1 + i], label, cells)
        for c, shown in enumerate(drawn):
            on = [b for b in bars if row.key in b.rows and _meets(b, c, cells)]
            guessed = any(b.estimated for b in on)
            other = any(not b.estimated for b in on)
            assert (shown == "~") == (guessed and not other), (row, c, drawn)
    estimated = sorted((b for b in bars if b.estimated), key=lambda b: (b.start, b.ident))
    listed = [line for line in lines if re.match(r"~ job \d+ ", line)]
    assert len(listed) == min(len(estimated), ESTIMATES_LISTED)
    if width >= 60:
        for bar, line in zip(estimated, listed, strict=False):
            assert line.startswith(f"~ job {bar.ident} dave {len(bar.rows)} GPU est.")
    assert any(line.startswith("~ … and") for line in lines) == (len(estimated) > ESTIMATES_LISTED)


@settings(max_examples=150, deadline=None)
@given(boards_with_estimates(), st.integers(40, 240))
def test_by_pool_a_tilde_line_counts_the_cards_estimated_there(
    board: tuple[list[BoardRow], list[Bar]], width: int
) -> None:
    rows, bars = board
    lines = board_lines(rows, bars, SINCE, width, pools=True)
    assert all(cell_len(line) <= width for line in lines)
    pools = pool_rows(rows)
    label = label_width(width, pools)
    cells = day_cells(width, label)
    at = 1
    for pool in pools:
        held = _drawn(lines[at], label, cells)
        assert lines[at].startswith(pool.label[:label])
        at += 1
        guessed = [
            len(
                {k for b in bars if b.estimated and _meets(b, c, cells) for k in b.rows}
                & set(pool.keys)
            )
            for c in range(DAYS * cells)
        ]
        for c, shown in enumerate(held):  # the pool's own line counts what is held or booked
            n = len(
                {k for b in bars if not b.estimated and _meets(b, c, cells) for k in b.rows}
                & set(pool.keys)
            )
            assert shown == ("." if n == 0 else COUNTS[n - 1] if n <= len(COUNTS) else "+")
        if not any(guessed):
            assert not lines[at].startswith(" ~")
            continue
        assert lines[at].startswith(" ~")
        drawn = _drawn(lines[at], label, cells)
        for c, shown in enumerate(drawn):
            n = guessed[c]
            assert shown == ("." if n == 0 else COUNTS[n - 1] if n <= len(COUNTS) else "+")
        at += 1


@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "kind": JSON | st.sampled_from(["job", "claim"]),
                "id": JSON | st.integers(0, 2**60),
                "gpus": JSON | st.integers(-1, 5000),
                "start": JSON | st.floats(0, 2e10),
                "end": JSON | st.floats(0, 2e10),
                "gpu_uuids": JSON | st.lists(st.text(max_size=200), max_size=4),
                "user": JSON,
                "name": JSON | st.just("evil\x1b[31m [bold]name[/]\u202e"),
            },
        ),
        max_size=6,
    )
)
def test_a_hostile_estimates_answer_gives_clean_bars_or_none(items: list[object]) -> None:
    for bar in parse_estimates({"estimates": items}):
        assert bar.estimated and 1 <= bar.ident <= 2**53 and 1 <= bar.gpus <= 4096
        assert bar.end is None or bar.start < bar.end
        for text in (bar.user, bar.note, *bar.rows):
            assert not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in text)
            assert "\u202e" not in text
    assert parse_estimates(None) == parse_estimates({"estimates": "x"}) == []


# -- in Chinese -------------------------------------------------------------------------

NOW = SINCE + 3 * 3600
ROWS = [BoardRow(f"GPU-gpu01-{i}", f"gpu01:{i}", "a100") for i in range(4)]
BARS = [
    Bar("job", 40, tuple(r.key for r in ROWS), NOW - 600, NOW + DAY_S, "carol", "train"),
    Bar("estimate", 41, (ROWS[0].key, ROWS[1].key), NOW + DAY_S, NOW + 2 * DAY_S, "dave", "", 2),
    Bar("estimate", 42, (ROWS[2].key,), NOW + DAY_S, None, "dave", "", 1),
    *(
        Bar("estimate", 50 + k, (ROWS[3].key,), NOW + (2 + k) * DAY_S, None, "erin", "", 1)
        for k in range(ESTIMATES_LISTED + 1)
    ),
]
DATA = {"gpu", "gpu01", "carol", "dave", "erin", "train", "a100"}


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("pools", [False, True])
def test_estimates_on_a_chinese_board_have_no_english(
    chinese: None, width: int, pools: bool
) -> None:
    lines = board_lines(ROWS, BARS, SINCE, width, pools=pools)
    assert all(cell_len(line) <= width for line in lines)
    text = "\n".join(lines)
    assert "预计" in text
    assert english_words(text, DATA) == [], text


@pytest.mark.parametrize("exc", [HeadError("unknown-op", "no such op"), HeadError("internal", "x")])
async def test_a_board_without_estimates_says_why_in_chinese(chinese: None, exc: HeadError) -> None:
    from test_week_forms_zh import KEYS, WeekHost

    app = WeekHost()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, WeekScreen), "the week screen")
        week = app.screen
        assert isinstance(week, WeekScreen)
        week.show_week(week.token, ROWS, BARS[:1], estimates_note(exc))  # (the job running)
        await until(pilot, lambda: "没有预计开始时间" in screen_text(app), "the note")
        text = screen_text(app)
        assert english_words(text, DATA | KEYS | {"x"}) == [], text
