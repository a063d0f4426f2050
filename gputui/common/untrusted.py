"""Numbers read from an answer another process sent (the head's JSON, mostly), each
checked the one way: an int or float (never a bool), finite, inside its range, and
anything else ``None``, never an exception, so one bad field drops that field, not
the screen or the command.

Stdlib only, so a light scheduler verb may use it; the console's views, the CLI
and the health rules read the head's answers with these (a string field with
``gputui.common.text.clean_str``).
"""

from __future__ import annotations

import math
from typing import Any

TIME_MAX = 1e11
"""An epoch time at or past this (the year 5138) is not a time."""
NUMBER_MAX = 1e12
"""A plain figure (seconds, counts shown as numbers) is under this in size."""


def number(value: Any, low: float = -NUMBER_MAX, high: float = NUMBER_MAX) -> float | None:
    """A finite number in [low, high), as a float; None for anything else (NaN, an
    infinity, a bool, an int too big for a float, a string)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) and low <= out < high else None


def epoch(value: Any) -> float | None:
    """A time: a finite number of seconds since 1970, under ``TIME_MAX``."""
    return number(value, 0.0, TIME_MAX)


def integer(value: Any, low: int, high: int) -> int | None:
    """An int (never a bool) in [low, high]; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value
