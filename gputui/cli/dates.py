"""``--since`` / ``--until`` for the verbs that read a range (``gputui history``): a
local date (``YYYY-MM-DD``; ``--until``: the end of that day) or ``N h|d|w`` before
now, the grammar ``gputui usage`` reads; the range at most ``MAX_DAYS`` long.
Stdlib only."""

from __future__ import annotations

import time

from gputui.common.durations import ago
from gputui.scheduler.client.errors import HeadError

MAX_DAYS = 366  # the head's own limit (read_args.MAX_USAGE_DAYS), without importing pydantic
DEFAULT_DAYS = 7


def when(text: str | None, option: str, now: float, *, end_of_day: bool) -> float | None:
    """One bound, None when not given; HeadError("usage") naming the option otherwise."""
    if text is None:
        return None
    shown = repr(text[:40])  # escapes what a terminal would act on
    shown = shown if len(shown) <= 60 else shown[:59] + "…"
    relative = ago(text, now, units="hdw")
    if relative is not None:
        return relative
    try:
        day = time.strptime(text.strip(), "%Y-%m-%d")
        bump = 1 if end_of_day else 0
        value = time.mktime((day.tm_year, day.tm_mon, day.tm_mday + bump, 0, 0, 0, 0, 0, -1))
    except (ValueError, OverflowError):
        raise HeadError(
            "usage", f"{option}: not a date: {shown} (YYYY-MM-DD, or 7d, 12h, 2w for that long ago)"
        ) from None
    if not 0 <= value <= 1e10:
        raise HeadError("usage", f"{option}: {shown} is out of range")
    return value


def stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def span(since: str | None, until: str | None, now: float) -> tuple[float, float]:
    """``[since, until)``: by default the ``DEFAULT_DAYS`` up to now."""
    start_at = when(since, "--since", now, end_of_day=False)
    end_at = when(until, "--until", now, end_of_day=True)
    end = now if end_at is None else end_at
    start = end - DEFAULT_DAYS * 86400 if start_at is None else start_at
    if end <= start:
        raise HeadError("usage", f"--until {stamp(end)} is not after --since {stamp(start)}")
    if end - start > MAX_DAYS * 86400:
        raise HeadError("usage", f"--since to --until spans over {MAX_DAYS} days")
    return start, end
