"""``gputui history``: finished jobs, Slurm's ``sacct`` (exit, GPU-hours, busy share,
energy), filtered by user, end state and the range they ended in.

Loaded only when it runs (``verbs.handler``). Bad input is one line and exit status 2,
checked before the scheduler is asked. The table fits the terminal (80 columns at
least): the user and name columns give way, the figures never do.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import unicodedata
from collections.abc import Sequence
from typing import Any

from gputui.cli.dates import span, stamp
from gputui.cli.listing import known_user
from gputui.cli.tables import print_json
from gputui.common.printable import shown
from gputui.scheduler.client.backend import SyncBackend
from gputui.scheduler.client.errors import HeadError

MAX_LIMIT = 10_000  # the head's own cap (read_args.MAX_HISTORY), without importing pydantic
DEFAULT_LIMIT = 100
STATES = ("completed", "failed", "timeout", "killed", "cancelled")
CODES = {
    "CD": ("completed",),
    "F": ("failed",),
    "TO": ("timeout",),
    "CA": ("cancelled", "killed"),
}
"""Slurm's state codes ``--state`` also takes (its CANCELLED is gputui's cancel and kill)."""
MIN_WIDTH = 80
HEADER = ("JOBID", "USER", "NAME", "STATE", "EXIT", "ENDED", "GPU-H", "BUSY", "KWH")
FLEXIBLE = (1, 2)
"""USER and NAME: cut to fit; the other columns are shown whole."""
RIGHT = frozenset({0, 6, 7, 8})


def states_of(text: str | None) -> list[str]:
    """``--state``: end states or Slurm's codes, comma-separated."""
    if text is None:
        return []
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part.lower() in STATES:
            out.append(part.lower())
        elif part.upper() in CODES:
            out.extend(CODES[part.upper()])
        else:
            raise HeadError(
                "usage",
                f"--state: {shown(part, 40)!r} is not one of {', '.join(STATES)}"
                f" (or {', '.join(CODES)})",
            )
    return sorted(set(out))


def limit_of(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    try:
        value = int(text)
    except ValueError:
        raise HeadError("usage", f"--limit: not a number: {shown(text, 40)!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise HeadError("usage", f"--limit: 1 to {MAX_LIMIT}, not {value}")
    return value


# -- the table ------------------------------------------------------------------------------


def cells(text: str) -> int:
    """Terminal cells ``text`` takes (wide characters two, combining ones none)."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, an ellipsis where it was cut."""
    if cells(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = cells(ch)
        if used + w > width - 1:
            break
        out, used = out + ch, used + w
    return out + "…"


def pad(text: str, width: int, right: bool) -> str:
    room = " " * max(0, width - cells(text))
    return room + text if right else text + room


def _exit(job: dict[str, Any]) -> str:
    code, signal = job.get("exit_code"), job.get("exit_signal")
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    if signal:
        return shown("SIG" + str(signal).removeprefix("SIG"), 9)
    return "-"


def _number(value: Any, fmt: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return format(float(value), fmt)


def _share(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return f"{100 * float(value):.0f}%"


def _ended(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return "-"
    return time.strftime("%m-%d %H:%M", time.localtime(value))


def row_of(job: dict[str, Any]) -> tuple[str, ...]:
    return (
        shown(job.get("id", "")),
        shown(job.get("user", "")),
        shown(job.get("name") or "-"),
        shown(job.get("state", ""), 10),
        _exit(job),
        _ended(job.get("ended_at")),
        _number(job.get("gpu_h"), ".2f"),
        _share(job.get("busy_share")),
        _number(job.get("energy_kwh"), ".2f"),
    )


def total_of(jobs: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The figures summed: GPU-hours; busy share and kWh of the jobs that have them."""
    gpu_h = sum(float(j.get("gpu_h") or 0.0) for j in jobs)
    metered = [j for j in jobs if j.get("busy_gpu_h") is not None]
    busy = sum(float(j["busy_gpu_h"]) for j in metered)
    alloc = sum(float(j.get("gpu_h") or 0.0) for j in metered)
    kwh = [float(j["energy_kwh"]) for j in jobs if j.get("energy_kwh") is not None]
    share = f"{100 * busy / alloc:.0f}%" if alloc > 0 else "-"
    return ("TOTAL", "", "", "", "", "", f"{gpu_h:.2f}", share, f"{sum(kwh):.2f}" if kwh else "-")


def history_table(jobs: Sequence[dict[str, Any]], width: int) -> list[str]:
    """The jobs (oldest first) and a total, in at most ``max(width, MIN_WIDTH)`` cells."""
    rows = [HEADER, *(row_of(j) for j in jobs), total_of(jobs)]
    widths = [max(cells(r[i]) for r in rows) for i in range(len(HEADER))]
    room = max(width, MIN_WIDTH) - 2 * (len(HEADER) - 1)
    fixed = sum(w for i, w in enumerate(widths) if i not in FLEXIBLE)
    left = max(8, room - fixed)
    user = min(widths[1], max(8, left // 3))
    widths[2] = min(widths[2], max(4, left - user))
    widths[1] = min(widths[1], max(4, left - widths[2]))
    return [
        "  ".join(pad(cut(c, widths[i]), widths[i], i in RIGHT) for i, c in enumerate(r)).rstrip()
        for r in rows
    ]


# -- the verb -------------------------------------------------------------------------------


def run(backend: SyncBackend, a: argparse.Namespace) -> int:
    if a.user is not None and a.all_users:
        raise HeadError("usage", "--user or --all-users, not both")
    states, limit = states_of(a.state), limit_of(a.limit)
    since, until = span(a.since, a.until, time.time())
    result = backend.history(
        since=since, until=until, user=a.user, all_users=a.all_users, states=states, limit=limit
    )
    jobs = list(result["jobs"])
    known_user(a.user, jobs)
    if a.json:
        print_json(result)
        return 0
    whose = "everyone" if a.all_users else shown(result.get("user") or a.user or "you", 20)
    print(f"Jobs that ended {stamp(since)} to {stamp(until)} ({whose})")
    if not jobs:
        print("no finished jobs" + (f" in state {', '.join(states)}" if states else ""))
        return 0
    width = shutil.get_terminal_size((MIN_WIDTH, 24)).columns
    for line in history_table(list(reversed(jobs)), width):
        print(line)
    if result.get("more"):
        print(
            f"gputui history: the newest {len(jobs)} shown; more ended then (--limit, --since)",
            file=sys.stderr,
        )
    return 0
