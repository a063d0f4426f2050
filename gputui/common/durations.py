"""Durations as people type them (``30m``, ``2h``, ``1-12:00``) and as Slurm shows them.

Shared by the CLI and the console's forms and queue screen; stdlib only, so a
``gputui submit`` stays light.
"""

from __future__ import annotations

import argparse
import math
import re

from gputui.common.i18n import _

_DURATION = re.compile(r"\s*(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?\s*")
_UNIT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*")


MAX_TEXT = 32
"""The longest duration text read (``1-12:00:00`` is 10 characters)."""
MAX_SECONDS = 3650 * 86400.0
"""The longest duration taken: ten years (more is a typo, or a probe)."""


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``2h``, ``1d``, ``MM``, ``HH:MM:SS``, ``D-HH:MM`` -> seconds:
    finite, more than 0 and at most ``MAX_SECONDS``; else ``ArgumentTypeError``, one
    line that shows at most ``MAX_TEXT`` characters of ``text``."""
    if len(text) > MAX_TEXT:
        raise argparse.ArgumentTypeError(
            _("not a duration: {text}… (too long)").format(text=repr(text[:MAX_TEXT]))
        )
    try:
        total = _seconds(text)
    except OverflowError:
        total = math.inf
    if not math.isfinite(total) or total > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            _("not a duration: {text} (more than 10 years)").format(text=repr(text))
        )
    return total


def _seconds(text: str) -> float:
    unit = _UNIT.fullmatch(text)
    if unit:
        total = float(unit.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit.group(2)]
        if total <= 0:
            raise argparse.ArgumentTypeError(
                _("duration must be positive: {text}").format(text=repr(text))
            )
        return total
    match = _DURATION.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(
            _("not a duration: {text} (e.g. 30m, 2h, 1-12:00)").format(text=repr(text))
        )
    days, a, b, c = match.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:
        hours, minutes, seconds = ([*parts, 0, 0])[:3]
        total = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    elif len(parts) == 1:
        total = parts[0] * 60  # plain minutes, as Slurm's --time
    elif len(parts) == 2:
        total = parts[0] * 60 + parts[1]
    else:
        total = parts[0] * 3600 + parts[1] * 60 + parts[2]
    if total <= 0:
        raise argparse.ArgumentTypeError(
            _("duration must be positive: {text}").format(text=repr(text))
        )
    return float(total)


def elapsed_text(seconds: float) -> str:
    """Slurm's TIME: ``0:00``, ``12:05``, ``3:02:01``, ``2-01:00:00``."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:d}:{secs:02d}"


def coarse_text(seconds: float) -> str:
    """A rough length of time for a sentence or a flag: ``45s``, ``12m``, ``2h05m``,
    ``3d04h`` (whole units, rounded down; never negative)."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


_AGO = re.compile(r"(\d{1,5})([mhdw])")
_AGO_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def ago(text: str, now: float, units: str = "mhdw") -> float | None:
    """``N`` minutes, hours, days or weeks (``30m``, ``12h``, ``2d``, ``1w``; only the
    ``units`` given) before ``now``; None when ``text`` is not such a span."""
    match = _AGO.fullmatch(text.strip())
    if not match or match.group(2) not in units:
        return None
    return now - int(match.group(1)) * _AGO_S[match.group(2)]
