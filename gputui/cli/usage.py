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
from gputui.cli.tables import day_text
from gputui.common.i18n import N_, _
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
    return _("(none)") if by == "project" and name == "" else _shown(name, 24)


# -- usage ---------------------------------------------------------------------------------


_BY_TITLES = {
    "user": N_("USER"),
    "group": N_("GROUP"),
    "project": N_("PROJECT"),
    "pool": N_("POOL"),
}
"""The first column's title for each ``--by`` (in the chosen language)."""

_BY_WORDS = {
    "user": N_("user"),
    "group": N_("group"),
    "project": N_("project"),
    "pool": N_("pool"),
}
"""What ``--by`` counts by, in the line over the table."""


def usage_table(result: dict[str, Any], daily: bool, width: int | None = None) -> list[str]:
    """sreport-like columns: [DAY] KEY, GPU-H ALLOC, GPU-H BUSY, BUSY%, KWH, COST, and
    IDLE KWH (held but idle) when the head counts it; a total. In ``width`` cells the
    KEY is cut first, then IDLE KWH, KWH and COST go."""
    by, currency = str(result["by"]), _shown(result["currency"], 8)
    idle = _counts_idle(result)
    lead = [_("DAY")] if daily else []
    titles = (
        _(_BY_TITLES.get(by, by.upper())),
        _("GPU-H ALLOC"),
        _("GPU-H BUSY"),
        _("BUSY%"),
        _("KWH"),
    )
    cost = _("COST {currency}").format(currency=currency)
    rows = [(*lead, *titles, cost, *([_("IDLE KWH")] if idle else []))]
    items = result["rows"] if daily else result["totals"]
    for r in items:
        day = [str(r["day"])] if daily else []
        rows.append((*day, _key(r["key"], by), *_numbers(r), *_idle_cells(r, idle)))
    fields = (*_FIELDS, *_IDLE_FIELDS) if idle else _FIELDS
    sums = {
        f: None
        if any(r.get(f) is None for r in result["totals"])
        else sum(float(r[f]) for r in result["totals"])
        for f in fields
    }
    rows.append((*([""] if daily else []), _("TOTAL"), *_numbers(sums), *_idle_cells(sums, idle)))
    first = len(lead) + 1
    numbers = range(first, len(rows[0]))
    kwh = first + 3
    drop = (kwh + 2, kwh, kwh + 1) if idle else (kwh, kwh + 1)
    return fit_table(rows, width, flex={first - 1: 8}, drop=drop, right=numbers)


_IDLE_FIELDS = ("idle_held_gpu_h", "idle_held_kwh", "idle_held_cost")
"""Held but idle (``power.mode`` report or lock): in the JSON, the CSV and the table."""


def _counts_idle(result: dict[str, Any]) -> bool:
    """Whether the head counted held-but-idle cards (``power.mode`` is not off)."""
    return result.get("power_mode") in ("report", "lock")


def _idle_cells(r: dict[str, Any], idle: bool) -> tuple[str, ...]:
    return (_opt(r.get("idle_held_kwh")),) if idle else ()


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
    fields = (*_FIELDS, *_IDLE_FIELDS) if _counts_idle(result) else _FIELDS
    head = (["day"] if daily else []) + [by, *fields, "currency"]
    out = [head]
    for r in result["rows"] if daily else result["totals"]:
        day = [str(r["day"])] if daily else []
        out.append(
            [
                *day,
                _cell(r["key"]),
                *("" if r.get(f) is None else repr(float(r[f])) for f in fields),
                _cell(result["currency"]),
            ]
        )
    return out


def run_usage(backend: SyncBackend, a: argparse.Namespace) -> int:
    if a.by not in KEYS:
        raise HeadError(
            "usage",
            _("--by: {value} is not one of {keys}").format(
                value=repr(_shown(a.by, 40)), keys=", ".join(KEYS)
            ),
        )
    if a.csv and a.json:
        raise HeadError("usage", _("--csv or --json, not both"))
    since, until = span(a.since, a.until, time.time())
    result = backend.usage(since=since, until=until, by=a.by)
    if a.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    elif a.csv:
        csv.writer(sys.stdout, lineterminator="\n").writerows(usage_csv(result, a.daily))
    else:
        by = _(_BY_WORDS[a.by])
        start, end = stamp(result["since"]), stamp(result["until"])
        print(_("GPU usage by {by}, {since} to {until}").format(by=by, since=start, until=end))
        if not result["totals"]:
            print(_("no GPU was allocated then"))
        else:
            for line in usage_table(result, a.daily, terminal_width()):
                print(line)
            if result.get("unknown"):
                print(_("not known: {what}").format(what=_shown(result["unknown"], 200)))
            if result.get("note"):
                print(_("note: {note}").format(note=_shown(result["note"], 200)))
    return 0


# -- the weekly report -----------------------------------------------------------------------


def _name(r: dict[str, Any]) -> str:
    return _shown(r["key"], 24) if r["key"] else _("(none)")


def _people(items: Sequence[dict[str, Any]]) -> str:
    parts = [
        _("{name} {gpu_h} GPU-h ({percent} busy)").format(
            name=_name(r),
            gpu_h=f"{float(r['alloc_gpu_h']):.1f}",
            percent=_pct(float(r["busy_gpu_h"]), float(r["alloc_gpu_h"])),
        )
        for r in items
    ]
    return _(", ").join(parts) or _("none")


def _title(result: dict[str, Any], slurm: bool) -> str:
    fields = {
        "since": stamp(result["since"]),
        "until": stamp(result["until"]),
        "days": f"{float(result['days']):g}",
    }
    if slurm:
        return _("**GPU report (Slurm), {since} to {until}** ({days} days)").format(**fields)
    return _("**GPU report, {since} to {until}** ({days} days)").format(**fields)


def slurm_report_text(result: dict[str, Any]) -> list[str]:
    """The weekly summary from Slurm's accounting: what sacct knows (GPU-hours
    allocated, by user and by account); utilisation and energy are not kept there."""
    lines = [
        _title(result, slurm=True),
        _("- GPU-hours allocated: {gpu_h} in {jobs} allocations").format(
            gpu_h=f"{float(result['alloc_gpu_h']):.1f}", jobs=int(result["jobs"])
        ),
        _("- Top users: {users}").format(users=_alloc_only(result["users"])),
        _("- Top accounts: {accounts}").format(accounts=_alloc_only(result["accounts"])),
    ]
    energy = result.get("energy_kwh")
    if energy is None:
        lines.append(
            _(
                "- Busy hours and energy: not kept by Slurm (a gputui head that relays Slurm"
                " and watches the hosts counts them)"
            )
        )
        return lines
    busy, currency = result.get("busy_gpu_h"), _shown(result.get("currency", ""), 8)
    cost = result.get("cost")
    fields = {"kwh": f"{float(energy):.1f}", "busy": f"{float(busy or 0):.1f}"}
    if cost is not None:
        lines.append(
            _(
                "- Energy: {kwh} kWh, {busy} GPU-h busy; cost {cost} {currency}"
                " (metered by the gputui head)"
            ).format(cost=f"{float(cost):.2f}", currency=currency, **fields)
        )
    else:
        lines.append(
            _("- Energy: {kwh} kWh, {busy} GPU-h busy (metered by the gputui head)").format(
                **fields
            )
        )
    if float(result.get("unmetered_gpu_h") or 0) > 0:
        lines.append(
            _("- Not metered: {gpu_h} GPU-h").format(
                gpu_h=f"{float(result['unmetered_gpu_h']):.1f}"
            )
        )
    for note in (result.get("unknown"), result.get("note")):
        if note:
            lines.append(_("- Note: {note}").format(note=_shown(note, 200)))
    return lines


def _alloc_only(items: Sequence[dict[str, Any]]) -> str:
    parts = [
        _("{name} {gpu_h} GPU-h").format(name=_name(r), gpu_h=f"{float(r['alloc_gpu_h']):.1f}")
        for r in items
    ]
    return _(", ").join(parts) or _("none")


def report_text(result: dict[str, Any]) -> list[str]:
    """A short summary a team lead can paste into a chat (Markdown-ish)."""
    if result.get("scheduler") == "slurm":
        return slurm_report_text(result)
    total, cluster = result["total"], result["cluster"]
    alloc, busy = float(total["alloc_gpu_h"]), float(total["busy_gpu_h"])
    present = float(cluster["gpu_h"])
    currency = _shown(result["currency"], 8)
    hours = {
        "alloc": f"{alloc:.1f}",
        "busy": f"{busy:.1f}",
        "percent": _pct(busy, alloc),
    }
    if present > 0:
        gpu_hours = _(
            "- GPU-hours: {alloc} allocated, {busy} busy ({percent} of allocated);"
            " {present} present, {allocated} allocated"
        ).format(present=f"{present:.1f}", allocated=_pct(alloc, present), **hours)
    else:
        gpu_hours = _(
            "- GPU-hours: {alloc} allocated, {busy} busy ({percent} of allocated)"
        ).format(**hours)
    idle = max(0.0, alloc - busy)
    lines = [
        _title(result, slurm=False),
        gpu_hours,
        _("- Utilisation (busy of present): {percent}").format(
            percent=_pct(float(cluster["busy_gpu_h"]), present)
        ),
        _("- Idle while allocated: {gpu_h} GPU-h ({percent} of allocated)").format(
            gpu_h=f"{idle:.1f}", percent=_pct(idle, alloc)
        ),
        _(
            "- Energy: {kwh} kWh, all GPUs ({allocated} kWh allocated); cost {cost} {currency}"
        ).format(
            kwh=f"{float(cluster['energy_kwh']):.1f}",
            allocated=f"{float(total['energy_kwh']):.1f}",
            cost=f"{float(total['cost']):.2f}",
            currency=currency,
        ),
        *_idle_line(result, currency),
        _("- Top users: {users}").format(users=_people(result["users"])),
        _("- Top groups: {groups}").format(groups=_people(result["groups"])),
    ]
    busiest = [h for h in result["hours_of_day"] if float(h["gpu_h"]) > 0]
    if busiest:
        idlest = sorted(
            busiest, key=lambda h: (float(h["busy_gpu_h"]) / float(h["gpu_h"]), h["clock"])
        )
        shown = _(", ").join(
            _("{clock} {percent} busy").format(
                clock=_shown(h["clock"], 5),
                percent=_pct(float(h["busy_gpu_h"]), float(h["gpu_h"])),
            )
            for h in idlest[:3]
        )
        lines.append(_("- Idlest hours of the day: {hours}").format(hours=shown))
    if result["quotas"]:
        over = [q for q in result["quotas"] if q["over"]]
        text = _(", ").join(_over_quota(q) for q in over)
        lines.append(_("- Over quota: {groups}").format(groups=text or _("none")))
    return lines


def _over_quota(q: dict[str, Any]) -> str:
    fields = {
        "group": _shown(q["group"], 24),
        "used": f"{float(q['used_gpu_h']):.1f}",
        "limit": f"{float(q['limit_gpu_h']):.1f}",
    }
    if q["pool"]:
        return _("{group} {used} of {limit} GPU-h ({pool})").format(
            pool=_shown(q["pool"], 24), **fields
        )
    return _("{group} {used} of {limit} GPU-h").format(**fields)


def _idle_line(result: dict[str, Any], currency: str) -> list[str]:
    """What held-but-idle cards cost (``power.mode`` report or lock), with whose."""
    total = result["total"]
    if not _counts_idle(result) or total.get("idle_held_kwh") is None:
        return []
    who = sorted(
        (r for r in result["users"] if float(r.get("idle_held_kwh") or 0) > 0),
        key=lambda r: (-float(r["idle_held_kwh"]), str(r["key"])),
    )
    most = _(", ").join(
        _("{name} {kwh} kWh").format(name=_name(r), kwh=f"{float(r['idle_held_kwh']):.1f}")
        for r in who[:3]
    )
    fields = {
        "gpu_h": f"{float(total['idle_held_gpu_h']):.1f}",
        "kwh": f"{float(total['idle_held_kwh']):.1f}",
        "cost": f"{float(total['idle_held_cost']):.2f}",
        "currency": currency,
    }
    if most:
        return [
            _(
                "- Held but idle: {gpu_h} GPU-h, {kwh} kWh, cost {cost} {currency} (most: {most})"
            ).format(most=most, **fields)
        ]
    return [_("- Held but idle: {gpu_h} GPU-h, {kwh} kWh, cost {cost} {currency}").format(**fields)]


def bookings_text(items: Sequence[dict[str, Any]]) -> list[str]:
    """The report's last lines: the bookings of the week ahead, by start."""
    if not items:
        return [_("- Bookings next week: none")]
    lines = [_("- Bookings next week:")]
    for b in items[:50]:
        count = len(b.get("gpu_uuids") or [])
        fields = {
            "id": int(b["id"]),
            "user": _shown(b.get("user") or "", 24),
            "what": _("maintenance") if b.get("maint") else _("{count} GPU").format(count=count),
            "host": _shown(b.get("host") or "-", 32),
            "start": day_text(float(b["start"])),
            "end": day_text(float(b["end"])),
        }
        if b.get("note"):
            line = "  " + _("- b{id} {user}: {what} on {host}, {start} to {end} ({note})").format(
                note=_shown(b["note"], 60), **fields
            )
        else:
            line = "  " + _("- b{id} {user}: {what} on {host}, {start} to {end}").format(**fields)
        lines.append(line)
    if len(items) > 50:
        lines.append("  " + _("- and {count} more (gputui bookings)").format(count=len(items) - 50))
    return lines


def run_report(backend: SyncBackend, a: argparse.Namespace) -> int:
    now = time.time()
    result = backend.report(since=now - 7 * 86400, until=now)
    if a.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    lines = report_text(result)
    if backend.supports("bookings"):  # a scheduler that books (the head): the week ahead
        ahead = backend.bookings(since=now, until=now + 7 * 86400)["bookings"]
        lines.extend(bookings_text(ahead))
    for line in lines:
        print(line)
    return 0


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {
    "usage": run_usage,
    "report": run_report,
}
