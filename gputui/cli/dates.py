"""``--since`` / ``--until`` for the verbs that read a range (``gputui history``): a
local date (``YYYY-MM-DD``; ``--until``: the end of that day) or ``N h|d|w`` before
now, the grammar ``gputui usage`` reads; the range at most ``MAX_DAYS`` long.
Stdlib only."""

from __future__ import annotations

import argparse
import time

from gputui.common.durations import ago, parse_duration
from gputui.common.i18n import _
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
            "usage",
            _("{option}: not a date: {text} (YYYY-MM-DD, or 7d, 12h, 2w for that long ago)").format(
                option=option, text=shown
            ),
        ) from None
    if not 0 <= value <= 1e10:
        raise HeadError(
            "usage", _("{option}: {text} is out of range").format(option=option, text=shown)
        )
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
        raise HeadError(
            "usage",
            _("--until {until} is not after --since {since}").format(
                until=stamp(end), since=stamp(start)
            ),
        )
    if end - start > MAX_DAYS * 86400:
        raise HeadError(
            "usage", _("--since to --until spans over {days} days").format(days=MAX_DAYS)
        )
    return start, end


_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _clock(text: str) -> tuple[int, int] | None:
    try:
        at = time.strptime(text, "%H:%M")
    except ValueError:
        return None
    return at.tm_hour, at.tm_min


def _local(now: float, days: int, hour: int, minute: int) -> float:
    day = time.localtime(now)
    return time.mktime((day.tm_year, day.tm_mon, day.tm_mday + days, hour, minute, 0, 0, 0, -1))


def start_time(text: str, now: float) -> float:
    """A booking's ``--from``, in this machine's local time: ``now``; ``HH:MM`` (today,
    or tomorrow once past); ``mon 09:00`` (the next Monday at 09:00, today if it is
    still ahead; a day alone is 00:00); ``tomorrow 09:00``; ``YYYY-MM-DD [HH:MM]``;
    or ``+2h`` / ``in 2h`` from now. HeadError("usage") naming ``--from`` otherwise."""
    shown = repr(text[:40])
    words = text.strip().lower().split()
    bad = HeadError(
        "usage",
        _(
            "--from: not a time: {text} (now, 14:00, mon 09:00, tomorrow 09:00,"
            " 2026-03-02 09:00, +2h)"
        ).format(text=shown),
    )
    if not words or len(words) > 2:
        raise bad
    if words == ["now"]:
        return now
    if words[0] in ("+", "in") or words[0].startswith("+"):
        rest = " ".join(words[1:]) if words[0] in ("+", "in") else words[0][1:]
        try:
            return now + parse_duration(rest)
        except argparse.ArgumentTypeError:
            raise bad from None
    clock = _clock(words[-1]) if len(words) == 2 or ":" in words[0] else (0, 0)
    if clock is None:
        raise bad
    hour, minute = clock
    head = words[0]
    if len(words) == 1 and ":" in head:
        value = _local(now, 0, hour, minute)
        return value if value > now else _local(now, 1, hour, minute)
    if head in ("today", "tomorrow"):
        return _local(now, 0 if head == "today" else 1, hour, minute)
    named = [i for i, day in enumerate(_DAYS) if len(head) >= 3 and day.startswith(head)]
    if named:
        ahead = (named[0] - time.localtime(now).tm_wday) % 7
        value = _local(now, ahead, hour, minute)
        return value if value > now or ahead else _local(now, 7, hour, minute)
    try:
        day = time.strptime(head, "%Y-%m-%d")
    except ValueError:
        raise bad from None
    value = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, hour, minute, 0, 0, 0, -1))
    if not 0 <= value <= 1e10:
        raise bad
    return value
