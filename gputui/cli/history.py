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
from gputui.common.i18n import N_, _
from gputui.common.job_words import state_text
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
HEADER = (
    N_("JOBID"),
    N_("USER"),
    N_("NAME"),
    N_("STATE"),
    N_("EXIT"),
    N_("ENDED"),
    N_("GPU-H"),
    N_("BUSY"),
    N_("KWH"),
)
"""The table's column titles (English; looked up where it is drawn)."""
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
                _("--state: {text} is not one of {states} (or {codes})").format(
                    text=repr(shown(part, 40)), states=", ".join(STATES), codes=", ".join(CODES)
                ),
            )
    return sorted(set(out))


def limit_of(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    try:
        value = int(text)
    except ValueError:
        raise HeadError(
            "usage", _("--limit: not a number: {text}").format(text=repr(shown(text, 40)))
        ) from None
    if not 1 <= value <= MAX_LIMIT:
        raise HeadError(
            "usage", _("--limit: 1 to {most}, not {value}").format(most=MAX_LIMIT, value=value)
        )
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
        state_text(shown(job.get("state", ""), 10)),
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
    kwh_text = f"{sum(kwh):.2f}" if kwh else "-"
    return (_("TOTAL"), "", "", "", "", "", f"{gpu_h:.2f}", share, kwh_text)


def history_table(jobs: Sequence[dict[str, Any]], width: int) -> list[str]:
    """The jobs (oldest first) and a total, in at most ``max(width, MIN_WIDTH)`` cells."""
    header = tuple(_(title) for title in HEADER)
    rows = [header, *(row_of(j) for j in jobs), total_of(jobs)]
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
        raise HeadError("usage", _("--user or --all-users, not both"))
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
    if a.all_users:
        said = _("Jobs that ended {since} to {until} (everyone)")
    elif result.get("user") or a.user:
        said = _("Jobs that ended {since} to {until} ({user})")
    else:
        said = _("Jobs that ended {since} to {until} (you)")
    whose = shown(result.get("user") or a.user or "", 20)
    print(said.format(since=stamp(since), until=stamp(until), user=whose))
    if not jobs:
        if states:
            named = ", ".join(state_text(s) for s in states)
            print(_("no finished jobs in state {states}").format(states=named))
        else:
            print(_("no finished jobs"))
        return 0
    width = shutil.get_terminal_size((MIN_WIDTH, 24)).columns
    for line in history_table(list(reversed(jobs)), width):
        print(line)
    if result.get("more"):
        more = _("the newest {n} shown; more ended then (--limit, --since)").format(n=len(jobs))
        print(f"gputui history: {more}", file=sys.stderr)
    return 0
