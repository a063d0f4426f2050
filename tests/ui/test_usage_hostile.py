"""The usage screen against hostile answers: huge, negative and NaN numbers, control
characters and very long names, missing fields, thousands of users.

Properties: the parse never raises and gives clamped, cleaned numbers and keys; every
chart line is exactly its width and safe; the whole screen, through pilot, stays in
shape with nothing that a terminal would act on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hostile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.text import Text
from ui_fakes import NOW, FakeSource, fixed_clock
from ui_helpers import until
from usage_fakes import DAY, WEEK

from gputui.common.text import cells
from gputui.config.models import Config
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.usage_view import KEY_CELLS, MAX_AMOUNT, MAX_SPAN_S, UsageReport
from gputui.ui.screens.usage import UsageScreen
from gputui.ui.widgets.usage_charts import ChartStyles, bar_lines, hour_columns, hourly_lines

amounts = st.one_of(st.floats(0, 5_000), hostile.extreme_numbers)
entry = st.fixed_dictionaries(
    {},
    optional={
        "key": hostile.field(hostile.hostile_text),
        "alloc_gpu_h": hostile.field(amounts),
        "busy_gpu_h": hostile.field(amounts),
        "energy_kwh": hostile.field(amounts),
        "cost": hostile.field(amounts),
    },
)
thousands = st.integers(1_000, 3_000).map(
    lambda n: [
        {"key": f"user{i}\x1b]0;pwned\x07" + "x" * (i % 90), "alloc_gpu_h": n - i, "busy_gpu_h": i}
        for i in range(n)
    ]
)
hour = st.fixed_dictionaries(
    {
        "hour": hostile.ident(
            st.integers(int(NOW - 30 * DAY), int(NOW)).map(lambda h: h // 3600 * 3600)
        )
    },
    optional={
        "gpu_h": hostile.field(amounts),
        "alloc_gpu_h": hostile.field(amounts),
        "busy_gpu_h": hostile.field(amounts),
    },
)
answers = st.fixed_dictionaries(
    {},
    optional={
        "since": hostile.field(st.floats(NOW - 30 * DAY, NOW)),
        "until": hostile.field(st.just(NOW)),
        "by": hostile.field(hostile.hostile_text),
        "currency": hostile.field(hostile.hostile_text),
        "totals": st.one_of(
            st.lists(hostile.field(entry), max_size=40), thousands, hostile.any_json
        ),
        "hours": st.one_of(st.lists(hour, max_size=300), hostile.any_json),
        "rows": hostile.any_json,
    },
)


def parsed(answer: Any) -> UsageReport:
    return UsageReport.parse(answer, since=NOW - WEEK, until=NOW)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(answers, hostile.any_json))
def test_any_answer_parses_to_clamped_cleaned_numbers(answer: Any) -> None:
    report = parsed(answer)
    assert 0 < report.until - report.since <= MAX_SPAN_S
    for total in report.totals:
        assert hostile.is_safe_text(total.key) and 0 < cells(total.key) <= KEY_CELLS
        numbers = (total.alloc_gpu_h, total.busy_gpu_h, total.energy_kwh, total.cost)
        assert all(0 <= n <= MAX_AMOUNT for n in numbers)  # NaN fails this too
        assert total.busy_gpu_h <= total.alloc_gpu_h
    allocs = [(-t.alloc_gpu_h, t.key) for t in report.totals]
    assert allocs == sorted(allocs) and len({t.key for t in report.totals}) == len(allocs)
    assert [h.hour for h in report.hours] == sorted({h.hour for h in report.hours})
    for h in report.hours:
        assert 0 <= h.busy_gpu_h <= h.gpu_h and 0 <= h.alloc_gpu_h <= h.gpu_h <= MAX_AMOUNT
    assert hostile.is_safe_text(report.currency) and cells(report.currency) <= 8


def test_busy_beyond_allocated_is_capped_row_by_row() -> None:
    rows = [
        {"key": "a", "alloc_gpu_h": 10, "busy_gpu_h": 50},
        {"key": "a", "alloc_gpu_h": 10, "busy_gpu_h": 0},  # the same key again: summed
        {"key": "b\x1b[2J", "alloc_gpu_h": float("nan"), "busy_gpu_h": 3},
        {"key": "", "alloc_gpu_h": 10**400, "cost": -5},
    ]
    report = parsed({"totals": rows, "currency": "EUR\x07"})
    assert [(t.key, t.alloc_gpu_h, t.busy_gpu_h, t.cost) for t in report.totals] == [
        ("(none)", MAX_AMOUNT, 0.0, 0.0),
        ("a", 20.0, 10.0, 0.0),
        ("b", 0.0, 0.0, 0.0),
    ]
    assert report.currency == "EUR"


def test_the_range_is_the_heads_when_it_is_sound() -> None:
    assert (parsed({"since": NOW - DAY, "until": NOW}).since, parsed({}).since) == (
        NOW - DAY,
        NOW - WEEK,
    )
    for start, end in [(NOW, NOW - DAY), (float("nan"), NOW), (0, 1e12), (True, NOW)]:
        report = parsed({"since": start, "until": end})
        assert (report.since, report.until) == (NOW - WEEK, NOW), (start, end)


def width_of(line: Text) -> int:
    return cells(line.plain)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers, st.integers(1, 220), st.integers(1, 60))
def test_every_chart_line_is_its_width_and_safe(answer: Any, width: int, height: int) -> None:
    report = parsed(answer)
    plain = ChartStyles.plain()
    lines = bar_lines(report.totals, width, height, plain)
    assert len(lines) == min(height, len(report.totals))
    assert all(width_of(line) == width and hostile.is_safe_text(line.plain) for line in lines)
    if len(report.totals) > height:  # the rest folded into the last line
        folded = f"{len(report.totals) - height + 1} others"
        assert lines[-1].plain[: min(width, 2)] == folded[: min(width, 2)]
    cols, per = hour_columns(report.hours, report.since, report.until, width)
    assert 1 <= len(cols) <= width and 24 % per == 0
    chart = hourly_lines(cols, width, height, plain)
    assert len(chart) == height and all(width_of(line) == width for line in chart)


async def _show_everywhere(users: UsageReport, groups: UsageReport, size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        screen = UsageScreen(clock=fixed_clock)
        await app.push_screen(screen)
        await until(pilot, lambda: screen.problem is not None, "no head configured")
        screen.show_usage(screen.token, users, groups)
        for key in ("", "p", "p"):  # the other periods ask again: the same answer stays
            if key:
                await pilot.press(key)
            await pilot.pause()
            for strip in app.screen._compositor.render_strips():
                text = "".join(segment.text for segment in strip)
                assert hostile.is_safe_text(text), repr(text)
                assert strip.cell_length == size[0]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers, answers, st.sampled_from([(80, 24), (200, 50), (40, 12)]))
def test_the_screen_survives_hostile_answers(
    users: Any, groups: Any, size: tuple[int, int]
) -> None:
    asyncio.run(_show_everywhere(parsed(users), parsed(groups), size))
