"""Durations as people type them, and Slurm's TIME column."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.common.durations import (
    MAX_SECONDS,
    MAX_TEXT,
    coarse_text,
    elapsed_text,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("45", 2700),
     ("1:30", 90), ("1:00:00", 3600), ("1-12:00", 129600)],
)  # fmt: skip
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["0s", "0", "0:00", "nan", "-5m", "2x", "", "1e9h"])
def test_a_duration_that_is_not_one_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse_duration(text)
    assert "\n" not in str(info.value)


@given(st.text(max_size=40))
def test_any_text_is_a_positive_duration_or_a_clear_refusal(text: str) -> None:
    try:
        value = parse_duration(text)
    except argparse.ArgumentTypeError:
        return
    assert value > 0


def test_elapsed_reads_like_slurm() -> None:
    assert [elapsed_text(s) for s in (0, 65, 3721, 90061, -3)] == [
        "0:00", "1:05", "1:02:01", "1-01:01:01", "0:00",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-3, "0s"), (0, "0s"), (59.9, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h00m"),
     (7500, "2h05m"), (86399, "23h59m"), (86400 * 3 + 4 * 3600 + 59, "3d04h")],
)  # fmt: skip
def test_coarse_lengths_of_time_round_down_to_whole_units(seconds: float, text: str) -> None:
    assert coarse_text(seconds) == text


def test_ago_takes_only_the_units_asked_for() -> None:
    from gputui.common.durations import ago

    assert ago("30m", 10_000.0) == 10_000.0 - 1800
    assert ago(" 2d ", 1e6) == 1e6 - 2 * 86400
    assert ago("30m", 10_000.0, units="hdw") is None  # usage's spans are hours and up
    for bad in ("", "m", "-3h", "3.5h", "123456h", "3 h", "3y", "\x1b[3h"):
        assert ago(bad, 0.0) is None, bad


@given(
    st.text()
    | st.from_regex(r"\s*\d{1,40}(\.\d{1,20})?\s*[smhd]?\s*", fullmatch=True)
    | st.from_regex(r"(\d{1,20}-)?\d{1,20}(:\d{1,20}){0,2}", fullmatch=True)
)
def test_any_text_is_a_sane_duration_or_one_short_line(text: str) -> None:
    """Never a traceback, never ``inf`` nor a thousand years: a finite time of at
    most ten years, or one line that echoes at most a short piece of the text."""
    try:
        value = parse_duration(text)
    except argparse.ArgumentTypeError as exc:
        message = str(exc)
        assert "\n" not in message
        assert len(message) <= 50 + len(repr(text[:MAX_TEXT])), message
        return
    assert math.isfinite(value)
    assert 0 < value <= MAX_SECONDS


@pytest.mark.parametrize("text", ["9" * 20 + "d", "3651d", "1" * 32, "99999-00:00"])
def test_absurd_durations_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="more than 10 years"):
        parse_duration(text)
