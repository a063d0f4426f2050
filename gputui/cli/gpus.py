"""``gputui gpus``: every GPU, what holds it and whether it is free (``sinfo``'s role).

One line a GPU, fitted to the terminal (80 columns when it cannot say): where, its
state, its holder (a job, a claim or a process nobody was given the card for),
utilisation, memory, and why it is unavailable. ``POOL`` shows only when there is
more than one pool and ``--pool`` picks none; ``WHY`` takes what is left and is cut
with an ellipsis (``--json`` has every field in full). Free means unclaimed and idle:
no job, no claim, no process (graphics processes and ``ownership.exempt_users``'
aside).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from gputui.cli.args import EXIT_OK
from gputui.cli.layout import cells as cells_of
from gputui.cli.layout import cut, pad, terminal_width
from gputui.cli.tables import print_json
from gputui.common.i18n import N_, _
from gputui.common.job_words import gpu_state_text
from gputui.common.printable import shown
from gputui.scheduler.client.backend import SyncBackend
from gputui.wire.words import told_text

MIN_WIDTH = 60
"""Narrower terminals still get this many columns (lines then wrap)."""
WHY_MIN = 12
"""What WHY keeps at least, the other columns cut to make room."""
_CAPS = {"GPU": 16, "POOL": 8, "STATE": 9, "HOLDER": 16, "UTIL": 4, "MEMORY": 11}
"""The most each column takes (WHY takes the rest)."""


def holder_text(holder: Any) -> str:
    """``j12 alice``, ``c3 bob``, ``pid 4242 carol`` (``pid 4242+2 carol``: two more
    processes)."""
    if not isinstance(holder, dict):
        return "-"
    user = shown(holder.get("user") or "?", 12)
    kind = holder.get("kind")
    if kind == "process":
        more = holder.get("processes")
        extra = f"+{more - 1}" if isinstance(more, int) and more > 1 else ""
        return _("pid {pid}{extra} {user}").format(
            pid=shown(holder.get("pid"), 8), extra=extra, user=user
        )
    mark = "j" if kind == "job" else "c"
    return f"{mark}{shown(holder.get('id'), 12)} {user}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def memory_text(used: Any, total: Any) -> str:
    """``20.1/80G`` (GiB); ``-`` for what the host did not say."""
    u, t = _number(used), _number(total)
    if u is None and t is None:
        return "-"
    left = "?" if u is None else f"{u / 1024:.1f}"
    right = "?" if t is None else f"{t / 1024:.0f}"
    return f"{left}/{right}G"


def util_text(value: Any) -> str:
    number = _number(value)
    return "-" if number is None else f"{number:.0f}%"


def table(rows: Sequence[dict[str, Any]], width: int | None, *, pools: bool) -> list[str]:
    """The lines of the table, none wider than ``width`` terminal cells (None: into a
    pipe or a file, rows whole)."""
    names = [
        N_("GPU"),
        *([N_("POOL")] if pools else []),
        N_("STATE"),
        N_("HOLDER"),
        N_("UTIL"),
        N_("MEMORY"),
        N_("WHY"),
    ]
    cells: list[list[str]] = []
    for r in rows:
        where = f"{r.get('host', '?')}:{r.get('index', '?')}"
        profile = r.get("mig_profile")
        if isinstance(profile, str):  # a MIG slice, under its card: gpu01:0 └2g.20gb
            where += f" └{profile}"
        line = [shown(where, _CAPS["GPU"] + 10)]
        if pools:
            line.append(shown(r.get("pool") or "-", _CAPS["POOL"]))
        line += [
            gpu_state_text(shown(r.get("state") or "?", _CAPS["STATE"])),
            shown(holder_text(r.get("holder")), _CAPS["HOLDER"]),
            util_text(r.get("util")),
            memory_text(r.get("mem_used_mib"), r.get("mem_total_mib")),
            shown(told_text(r, "why"), 4096),
        ]
        cells.append(line)
    titles = [_(n) for n in names]  # in the chosen language; ``names`` say which is which
    widths = [
        max([cells_of(titles[i]), *(cells_of(c[i]) for c in cells)]) for i in range(len(names) - 1)
    ]
    if width is None:
        width = sum(widths) + 2 * len(widths) + max([WHY_MIN, *(cells_of(c[-1]) for c in cells)])
    width = max(MIN_WIDTH, width)
    # Too narrow for WHY_MIN of WHY: the widest of GPU, POOL and HOLDER give way.
    give = [i for i, n in enumerate(names) if n in ("GPU", "POOL", "HOLDER")]
    while sum(widths) + 2 * len(widths) + WHY_MIN > width:
        widest = max(give, key=lambda i: widths[i])
        if widths[widest] <= cells_of(titles[widest]):
            break
        widths[widest] -= 1
    left = width - sum(widths) - 2 * len(widths)
    out = []
    for line in [titles, *cells]:
        why = cut(line[-1], left) if left > 0 else ""
        shape = zip(line[:-1], widths, names[:-1], strict=True)
        fixed = [pad(cut(c, w), w, right=n == "UTIL") for c, w, n in shape]
        out.append("  ".join([*fixed, why]).rstrip())
    return out


def run(backend: SyncBackend, a: argparse.Namespace) -> int:
    answer = backend.gpus(pool=a.pool, free=a.free)
    rows = [r for r in answer.get("gpus") or [] if isinstance(r, dict)]
    if a.json:
        print_json(answer)
        return EXIT_OK
    total = answer.get("total")
    total = total if isinstance(total, int) else len(rows)
    if not rows:
        pool = shown(a.pool, 40) if a.pool else ""
        if a.free:
            line = _("no free GPU in pool {pool} now") if pool else _("no free GPU now")
        else:
            line = (
                _("no GPU in pool {pool} known to the head yet")
                if pool
                else _("no GPU known to the head yet")
            )
        print(line.format(pool=pool))
        return EXIT_OK
    many = isinstance(answer.get("pools"), list) and len(answer["pools"]) > 1
    for line in table(rows, terminal_width(), pools=many and not a.pool):
        print(line)
    if total > len(rows):
        print(_("… and {count} more").format(count=total - len(rows)))
    return EXIT_OK


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {"gpus": run}
