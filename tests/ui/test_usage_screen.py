"""The usage screen: bars per user and group, the hourly chart, totals, and what it
says when the head cannot answer.

The console is the real app with its real head link and client over a real Unix
socket; the head at the other end is ``usage_fakes.FakeUsageHead``, which answers
``usage`` with constructed numbers (the accounting side builds the real answer).
Bars and columns are read back from what the widgets draw, cell by cell, with the
colour each part is drawn in. Hostile answers: test_usage_hostile.py.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.pilot import Pilot
from ui_fakes import NOW, FakeSource, fixed_clock
from ui_helpers import help_text, screen_text, steady, until
from usage_fakes import DAY, WEEK, HeadRefusal, fake_usage_head, usage_answer

from gputui.config.models import Config, HeadConfig
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.usage_view import UsageHour, UsageTotal
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.usage import UsageScreen
from gputui.ui.widgets.usage_charts import (
    LEFT_EIGHTHS,
    LOWER_EIGHTHS,
    ChartStyles,
    HourlyChart,
    UsageBars,
    bar_lines,
    hour_columns,
    hourly_lines,
)

CONSOLE = Console(width=400, color_system="truecolor")


def console(sock: Path) -> GpuTuiApp:
    return GpuTuiApp(FakeSource(), Config(head=HeadConfig(socket=str(sock))), clock=fixed_clock)


async def open_usage(
    pilot: Pilot[Any], app: GpuTuiApp, *, connected: bool = True, answered: bool = True
) -> UsageScreen:
    if connected:
        await until(pilot, lambda: app.head.link and app.head.link.view, "the head's state")
    await pilot.press("U")
    await until(pilot, lambda: isinstance(app.screen, UsageScreen), "the usage screen")
    screen = app.screen
    assert isinstance(screen, UsageScreen)
    if answered:  # asked (on mount), and answered
        await until(pilot, lambda: screen.requests and not screen.asking, "the head's answer")
        await steady(pilot, app)  # the bars grow to what came at the next layout
    return screen


def status(app: GpuTuiApp) -> str:
    return screen_text(app).splitlines()[0]


@dataclass
class Part:
    """Eighths of a bar or column, by the colour they are drawn in."""

    busy: int = 0
    idle: int = 0

    @property
    def total(self) -> int:
        return self.busy + self.idle


def parts(cells: list[tuple[str, Any]], blocks: str, widget: UsageBars | HourlyChart) -> Part:
    """What ``cells`` (character, style) draw: busy eighths and allocated-idle ones."""
    colours = widget.styles_now()
    busy, idle = colours.busy.color, colours.idle.color
    assert busy is not None and idle is not None and busy != idle
    part = Part()
    for char, style in cells:
        if char not in blocks or char == " ":
            continue
        filled = blocks.index(char)
        if style.color == busy:
            part.busy += filled
            if style.bgcolor == idle:
                part.idle += 8 - filled
        else:
            assert style.color == idle, (char, style)
            part.idle += filled
    return part


def styled(line: Text) -> list[tuple[str, Any]]:
    return [(line.plain[i], line.get_style_at_offset(CONSOLE, i)) for i in range(len(line))]


def rendered(widget: UsageBars | HourlyChart) -> list[Text]:
    return widget.render().split("\n")


def bars(screen: UsageScreen, which: str) -> dict[str, tuple[Part, str]]:
    """Each key's bar and its numbers, in the order drawn."""
    widget = screen.query_one(which, UsageBars)
    out: dict[str, tuple[Part, str]] = {}
    for line in rendered(widget)[1:]:
        name, _, rest = line.plain.partition(" ")
        cells = styled(line)[len(name) :]
        out[name] = (parts(cells, LEFT_EIGHTHS, widget), rest.strip(LEFT_EIGHTHS + " "))
    return out


async def test_bars_follow_the_numbers_with_the_busy_part_apart(tmp_path: Path) -> None:
    with fake_usage_head(tmp_path / "head.sock") as head:
        app = console(tmp_path / "head.sock")
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_usage(pilot, app)
            asked = sorted(head.usage_args(), key=lambda a: str(a["by"]))
            assert [(a["by"], a.get("hourly", False)) for a in asked] == [
                ("group", False),
                ("user", True),
            ]
            assert all((a["since"], a["until"]) == (NOW - WEEK, NOW) for a in asked)

            users = bars(screen, "#usage-users")
            assert list(users) == ["alice", "bob", "carol"]  # most allocated first
            (alice, alice_numbers), (bob, _), (carol, _) = users.values()
            # Lengths follow the hours (200, 100, 50), to the eighth of a cell.
            assert abs(2 * bob.total - alice.total) <= 1 and abs(4 * carol.total - alice.total) <= 2
            # The busy part: 150 of alice's 200, 20 of bob's 100, all of carol's 50.
            assert abs(alice.busy - 0.75 * alice.total) <= 1
            assert abs(bob.busy - 0.2 * bob.total) <= 1 and bob.idle > 3 * bob.busy
            assert carol.idle == 0 and carol.busy == carol.total
            assert alice_numbers == "200.0h  75%"
            groups = bars(screen, "#usage-groups")
            assert list(groups) == ["ml", "vision"]
            assert [numbers for _, numbers in groups.values()] == ["250.0h  68%", "100.0h  50%"]

            totals = screen_text(app).splitlines()[1]
            assert totals.strip() == (
                "350.0 GPU-h allocated, 63% busy, 130.0 GPU-h idle · 105.0 kWh · 210.00 EUR"
            )
            assert "past week (07 Nov 22:13 to 14 Nov 22:13)  updated 22:13:20" in status(app)


def columns(chart: HourlyChart) -> tuple[list[Part], str, int]:
    """Per x position: the column's eighths; the x axis line; the chart's rows."""
    lines = rendered(chart)
    rows, axis = lines[1:-1], lines[-1].plain
    width = max(len(line) for line in rows)
    out = []
    for x in range(width):
        cells = [styled(line)[x] for line in rows if x < len(line)]
        out.append(parts(cells, LOWER_EIGHTHS, chart))
    return out, axis, len(rows)


async def test_the_hourly_chart_shows_idle_nights_as_valleys(tmp_path: Path) -> None:
    with fake_usage_head(tmp_path / "head.sock"):
        app = console(tmp_path / "head.sock")
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_usage(pilot, app)
            chart = screen.query_one(HourlyChart)
            cols, axis, rows = columns(chart)
            days = ["Wed 08", "Thu 09", "Fri 10", "Sat 11", "Sun 12", "Mon 13", "Tue 14"]
            starts = [axis.index(day) for day in days]  # x axis: by day, in order
            assert starts == sorted(starts)
            per_day = starts[1] - starts[0]
            assert all(b - a == per_day for a, b in itertools.pairwise(starts))
            full = rows * 8
            for start in starts[:-1]:
                night, noon = cols[start + per_day * 3 // 24], cols[start + per_day * 12 // 24]
                # Days: 80% busy of the GPUs present, 90% allocated.
                assert abs(noon.busy - 0.8 * full) <= 1 and abs(noon.total - 0.9 * full) <= 1
                # Nights: the valley, 5% busy, while 60% stays allocated (held idle).
                assert night.busy <= 0.05 * full + 1 and night.busy < noon.busy / 4
                assert abs(night.total - 0.6 * full) <= 1
            assert "42% busy" in chart.render().plain.splitlines()[0]


async def test_the_period_keys_and_refresh_ask_again(tmp_path: Path) -> None:
    with fake_usage_head(tmp_path / "head.sock") as head:
        app = console(tmp_path / "head.sock")
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await open_usage(pilot, app)
            for key, back, name in [
                ("p", 28 * DAY, "4 weeks"),
                ("p", DAY, "day"),
                ("r", DAY, "day"),
                ("w", WEEK, "week"),
                ("m", 28 * DAY, "4 weeks"),
                ("d", DAY, "day"),
            ]:
                count = len(head.usage_args())
                await pilot.press(key)
                await until(pilot, lambda c=count: len(head.usage_args()) == c + 2, key)
                await until(pilot, lambda: not screen.asking, "the answer")
                assert {a["since"] for a in head.usage_args()[-2:]} == {NOW - back}, key
                assert f"past {name} (" in status(app)
            assert screen.users is not None and screen.users.hours[0].hour >= NOW - DAY - 3600
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, UsageScreen), "it to close")


async def test_it_asks_again_only_after_the_last_answer(tmp_path: Path) -> None:
    # A slow head (each answer takes 0.3 s) and a refresh every 0.05 s: requests never
    # pile up, each round is asked for after the last one was answered.
    with fake_usage_head(tmp_path / "head.sock", delay_s=0.3) as head:
        app = console(tmp_path / "head.sock")
        app.head.usage.refresh_s = 0.05
        async with app.run_test(size=(80, 24)) as pilot:
            await open_usage(pilot, app, answered=False)
            await until(pilot, lambda: len(head.usage_args()) >= 6, "three rounds", timeout=20)
            events = list(head.events)
            for n in range(3, 7):
                asked_at = events.index(("asked", n))
                last_round = range(1, 2 * ((n - 1) // 2) + 1)
                assert all(events.index(("answered", m)) < asked_at for m in last_round), events


async def assert_one_line(pilot: Pilot[Any], app: GpuTuiApp, line: str) -> None:
    await until(pilot, lambda: "!!" in status(app), "the problem line")
    assert status(app).startswith(f" gputui usage   !! {line}"), status(app)
    text = screen_text(app)
    assert text.count("!!") == 1 and "Traceback" not in text
    assert not app._notifications  # said once, on the screen, not as a worker failure


async def test_an_older_head_that_does_not_know_usage_is_one_line(tmp_path: Path) -> None:
    with fake_usage_head(tmp_path / "head.sock", answer=None):
        app = console(tmp_path / "head.sock")
        async with app.run_test(size=(80, 24)) as pilot:
            await open_usage(pilot, app)
            await assert_one_line(
                pilot, app, "the head is too old to answer usage requests (upgrade it)"
            )
            assert screen_text(app).count("no usage to show") == 3  # the chart, both bars


async def test_a_refusal_is_said_in_the_heads_words(tmp_path: Path) -> None:
    def refuse(args: dict[str, Any]) -> dict[str, Any]:
        raise HeadRefusal("bad-args", "usage: by: Input should be 'user'\x1b[2J or 'group'")

    with fake_usage_head(tmp_path / "head.sock", answer=refuse):
        app = console(tmp_path / "head.sock")
        async with app.run_test(size=(120, 24)) as pilot:
            await open_usage(pilot, app)
            await assert_one_line(
                pilot, app, "the head refused usage: usage: by: Input should be 'user' or 'group'"
            )


async def test_an_unreachable_head_is_one_line(tmp_path: Path) -> None:
    app = console(tmp_path / "no-head.sock")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(
            pilot, lambda: "no socket" in ((app.head.link and app.head.link.reason) or ""), "why"
        )
        await open_usage(pilot, app, connected=False)
        await assert_one_line(pilot, app, "head unreachable (no socket there; is")


async def test_a_head_that_goes_away_keeps_the_last_answer_on_screen(tmp_path: Path) -> None:
    with fake_usage_head(tmp_path / "head.sock") as head:
        app = console(tmp_path / "head.sock")
        app.head.usage.refresh_s = 0.1
        async with app.run_test(size=(120, 24)) as pilot:
            screen = await open_usage(pilot, app)
            head.hang_up()
            await until(pilot, lambda: screen.problem is not None, "the next refresh to fail")
            assert "!! head unreachable (" in status(app)
            assert "alice" in screen_text(app) and "350.0 GPU-h allocated" in screen_text(app)
            assert "last answer 22:13:20" in status(app)  # how old what is shown is


async def test_a_head_lost_while_it_is_asked_is_one_line(tmp_path: Path) -> None:
    # Usage changes nothing: an answer lost with the connection is just unanswered,
    # not "it may or may not have been done".
    with fake_usage_head(tmp_path / "head.sock", held=True) as head:
        app = console(tmp_path / "head.sock")
        async with app.run_test(size=(120, 24)) as pilot:
            await open_usage(pilot, app, answered=False)
            await until(pilot, lambda: len(head.usage_args()) == 2, "both requests asked")
            head.hang_up()
            await assert_one_line(pilot, app, "head unreachable (")
            assert "may or may not" not in status(app)


async def test_help_lists_the_usage_keys(tmp_path: Path) -> None:
    app = console(tmp_path / "no-head.sock")
    async with app.run_test(size=(100, 60)) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        text = help_text(app)
        assert "GPU-hours per user and group, utilisation by hour" in text  # U on main
        assert "Usage screen (U)" in text
        assert "p  Next period (d w m: the past day, week, 4 weeks)" in text


def test_the_fake_answers_in_the_agreed_shape() -> None:
    answer = usage_answer({"since": NOW - DAY, "until": NOW, "by": "user", "hourly": True})
    assert set(answer) == {"since", "until", "by", "currency", "rows", "totals", "hours"}
    assert [h["hour"] for h in answer["hours"]] == sorted(h["hour"] for h in answer["hours"])
    assert len(answer["hours"]) == 25 and time.gmtime(answer["hours"][0]["hour"]).tm_min == 0


def test_the_hourly_chart_draws_every_column_in_whole_cells() -> None:
    now_hour = NOW // 3600 * 3600
    full = [UsageHour(now_hour - 3600 * i, 4.0, 4.0, 4.0) for i in range(24 * 7 + 1)]
    for since, width, columns, cells_each in [
        (NOW - DAY, 80, 25, 3),  # a day at 80: an hour a column, 3 cells each
        (NOW - DAY, 200, 25, 7),
        (NOW - WEEK, 80, 57, 1),  # a week at 80: 3 hours a column
        (NOW - WEEK, 200, 169, 1),
    ]:
        cols, _per = hour_columns(full, since, NOW, width - 5)
        assert len(cols) == columns
        bottom = hourly_lines(cols, width, 6, ChartStyles.plain())[-2].plain
        assert bottom[5:].rstrip() == "█" * (columns * cells_each), (width, bottom)


def test_what_does_not_fit_is_folded_into_one_others_line() -> None:
    totals = tuple(UsageTotal(f"u{i}", 100.0 - i, 50.0) for i in range(6))
    styles = ChartStyles(Style(color="green"), Style(color="yellow"), Style(), Style())
    lines = [line.plain for line in bar_lines(totals, 40, 3, styles)]
    assert [line.split()[0] for line in lines] == ["u0", "u1", "4"]
    # 4 others: 98+97+96+95 GPU-h, longer than u0's bar: to the edge, then "»".
    assert lines[2].startswith("4 others ") and lines[2].endswith("»  386.0h  52%")
    assert lines[0].endswith("█  100.0h  50%")
    assert bar_lines(totals, 40, 6, styles)[-1].plain.startswith("u5 ")  # all fit: no fold
