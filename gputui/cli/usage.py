"""``gputui usage`` and ``gputui report``: GPU-hours, busy hours, energy and cost.

Loaded only when one of them runs (``verbs.handler``). Bad input is one line and
exit status 2, checked before the scheduler is asked.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from gputui.cli.dates import span, stamp
from gputui.cli.layout import fit_table, terminal_width
from gputui.common.printable import shown as _shown
from gputui.scheduler.client.backend import SyncBackend
from gputui.scheduler.client.errors import HeadError

KEYS = ("user", "group", "project", "pool")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(text: Any) -> str:
    """A name for a CSV file: printable, and never read as a spreadsheet formula."""
    value = _shown(text)
    return "'" + value if value.startswith(_FORMULA) else value


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


def _key(name: str, by: str) -> str:
    return "(none)" if by == "project" and name == "" else _shown(name, 24)


# -- usage ---------------------------------------------------------------------------------


def usage_table(result: dict[str, Any], daily: bool, width: int | None = None) -> list[str]:
    """sreport-like columns: [DAY] KEY, GPU-H ALLOC, GPU-H BUSY, BUSY%, KWH, COST; a total.
    In ``width`` cells the KEY is cut first, then KWH and COST go."""
    by, currency = str(result["by"]), _shown(result["currency"], 8)
    lead = ["DAY"] if daily else []
    rows = [(*lead, by.upper(), "GPU-H ALLOC", "GPU-H BUSY", "BUSY%", "KWH", f"COST {currency}")]
    items = result["rows"] if daily else result["totals"]
    for r in items:
        day = [str(r["day"])] if daily else []
        rows.append((*day, _key(r["key"], by), *_numbers(r)))
    sums = {
        f: None
        if any(r[f] is None for r in result["totals"])
        else sum(float(r[f]) for r in result["totals"])
        for f in _FIELDS
    }
    rows.append((*([""] if daily else []), "TOTAL", *_numbers(sums)))
    first = len(lead) + 1
    numbers = range(first, len(rows[0]))
    kwh = first + 3
    return fit_table(rows, width, flex={first - 1: 8}, drop=(kwh, kwh + 1), right=numbers)


_FIELDS = ("alloc_gpu_h", "busy_gpu_h", "energy_kwh", "cost")


def _numbers(r: dict[str, Any]) -> tuple[str, ...]:
    """A row's figures; one the scheduler does not keep (None: Slurm has no busy
    hours, energy or cost) is ``-``, never 0."""
    alloc = float(r["alloc_gpu_h"])
    if r["busy_gpu_h"] is None:
        return (f"{alloc:.2f}", "-", "-", _opt(r["energy_kwh"]), _opt(r["cost"]))
    busy = float(r["busy_gpu_h"])
    return (
        f"{alloc:.2f}",
        f"{busy:.2f}",
        _pct(busy, alloc),
        _opt(r["energy_kwh"]),
        _opt(r["cost"]),
    )


def _opt(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def usage_csv(result: dict[str, Any], daily: bool) -> list[list[str]]:
    """The same numbers as the JSON (``totals``, or ``rows`` with ``--daily``)."""
    by = str(result["by"])
    head = (["day"] if daily else []) + [by, *_FIELDS, "currency"]
    out = [head]
    for r in result["rows"] if daily else result["totals"]:
        day = [str(r["day"])] if daily else []
        out.append(
            [
                *day,
                _cell(r["key"]),
                *("" if r[f] is None else repr(float(r[f])) for f in _FIELDS),
                _cell(result["currency"]),
            ]
        )
    return out


def run_usage(backend: SyncBackend, a: argparse.Namespace) -> int:
    if a.by not in KEYS:
        raise HeadError("usage", f"--by: {_shown(a.by, 40)!r} is not one of {', '.join(KEYS)}")
    if a.csv and a.json:
        raise HeadError("usage", "--csv or --json, not both")
    since, until = span(a.since, a.until, time.time())
    result = backend.usage(since=since, until=until, by=a.by)
    if a.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    elif a.csv:
        csv.writer(sys.stdout, lineterminator="\n").writerows(usage_csv(result, a.daily))
    else:
        print(f"GPU usage by {a.by}, {stamp(result['since'])} to {stamp(result['until'])}")
        if not result["totals"]:
            print("no GPU was allocated then")
        else:
            for line in usage_table(result, a.daily, terminal_width()):
                print(line)
            if result.get("unknown"):
                print(f"not known: {_shown(result['unknown'], 200)}")
    return 0


# -- the weekly report -----------------------------------------------------------------------


def _people(items: Sequence[dict[str, Any]]) -> str:
    parts = [
        f"{_shown(r['key'] or '(none)', 24)} {float(r['alloc_gpu_h']):.1f} GPU-h"
        f" ({_pct(float(r['busy_gpu_h']), float(r['alloc_gpu_h']))} busy)"
        for r in items
    ]
    return ", ".join(parts) or "none"


def slurm_report_text(result: dict[str, Any]) -> list[str]:
    """The weekly summary from Slurm's accounting: what sacct knows (GPU-hours
    allocated, by user and by account); utilisation and energy are not kept there."""
    return [
        f"**GPU report (Slurm), {stamp(result['since'])} to {stamp(result['until'])}**"
        f" ({float(result['days']):g} days)",
        f"- GPU-hours allocated: {float(result['alloc_gpu_h']):.1f}"
        f" in {int(result['jobs'])} allocations",
        f"- Top users: {_alloc_only(result['users'])}",
        f"- Top accounts: {_alloc_only(result['accounts'])}",
        "- Busy hours and energy: not kept by Slurm (a gputui head with the hosts' helpers"
        " counts them)",
    ]


def _alloc_only(items: Sequence[dict[str, Any]]) -> str:
    parts = [
        f"{_shown(r['key'] or '(none)', 24)} {float(r['alloc_gpu_h']):.1f} GPU-h" for r in items
    ]
    return ", ".join(parts) or "none"


def report_text(result: dict[str, Any]) -> list[str]:
    """A short summary a team lead can paste into a chat (Markdown-ish)."""
    if result.get("scheduler") == "slurm":
        return slurm_report_text(result)
    total, cluster = result["total"], result["cluster"]
    alloc, busy = float(total["alloc_gpu_h"]), float(total["busy_gpu_h"])
    present = float(cluster["gpu_h"])
    currency = _shown(result["currency"], 8)
    lines = [
        f"**GPU report, {stamp(result['since'])} to {stamp(result['until'])}**"
        f" ({float(result['days']):g} days)",
        f"- GPU-hours: {alloc:.1f} allocated, {busy:.1f} busy ({_pct(busy, alloc)} of allocated)"
        + (f"; {present:.1f} present, {_pct(alloc, present)} allocated" if present > 0 else ""),
        f"- Utilisation (busy of present): {_pct(float(cluster['busy_gpu_h']), present)}",
        f"- Idle while allocated: {max(0.0, alloc - busy):.1f} GPU-h"
        f" ({_pct(max(0.0, alloc - busy), alloc)} of allocated)",
        f"- Energy: {float(cluster['energy_kwh']):.1f} kWh, all GPUs"
        f" ({float(total['energy_kwh']):.1f} kWh allocated); cost {float(total['cost']):.2f}"
        f" {currency}",
        f"- Top users: {_people(result['users'])}",
        f"- Top groups: {_people(result['groups'])}",
    ]
    hours = [h for h in result["hours_of_day"] if float(h["gpu_h"]) > 0]
    if hours:
        idlest = sorted(
            hours, key=lambda h: (float(h["busy_gpu_h"]) / float(h["gpu_h"]), h["clock"])
        )
        shown = ", ".join(
            f"{_shown(h['clock'], 5)} {_pct(float(h['busy_gpu_h']), float(h['gpu_h']))} busy"
            for h in idlest[:3]
        )
        lines.append(f"- Idlest hours of the day: {shown}")
    if result["quotas"]:
        over = [q for q in result["quotas"] if q["over"]]
        text = ", ".join(
            f"{_shown(q['group'], 24)} {float(q['used_gpu_h']):.1f} of"
            f" {float(q['limit_gpu_h']):.1f} GPU-h"
            + (f" ({_shown(q['pool'], 24)})" if q["pool"] else "")
            for q in over
        )
        lines.append(f"- Over quota: {text or 'none'}")
    return lines


def run_report(backend: SyncBackend, a: argparse.Namespace) -> int:
    now = time.time()
    result = backend.report(since=now - 7 * 86400, until=now)
    if a.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        for line in report_text(result):
            print(line)
    return 0


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {
    "usage": run_usage,
    "report": run_report,
}
