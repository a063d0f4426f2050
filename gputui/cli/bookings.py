"""The booking verbs: ``gputui book``, ``unbook`` and ``bookings``.

Loaded only when one of them runs (``verbs.handler``). ``--from`` is read here, in
this machine's local time (``dates.start_time``), and sent as seconds since the
epoch; the head checks the limits and the other bookings.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from gputui.cli.args import EXIT_OK
from gputui.cli.dates import start_time
from gputui.cli.layout import fit_table, terminal_width
from gputui.cli.tables import print_json
from gputui.common.durations import coarse_text
from gputui.common.i18n import N_, _
from gputui.common.printable import shown
from gputui.scheduler.client.backend import SyncBackend


def span_text(start: float, end: float) -> str:
    """``Mon 07 Dec 09:00 - Wed 09 Dec 09:00`` in local time (the end's date only
    when it is another day); in Chinese ``12月07日 09:00 - 12月09日 09:00``."""
    moment = _("%a %d %b %H:%M")  # a strftime format: each language its own order
    first = time.strftime(moment, time.localtime(start))
    same = time.localtime(start)[:3] == time.localtime(end)[:3]
    last = time.strftime("%H:%M" if same else moment, time.localtime(end))
    return f"{first} - {last}"


HEADER = (
    N_("BOOKING"),
    N_("USER"),
    N_("STATE"),
    N_("GPUS"),
    N_("HOST"),
    N_("WHEN"),
    N_("LENGTH"),
    N_("NOTE"),
)
"""The board's column titles, looked up where it is drawn."""
BOOKING_STATES = (N_("booked"), N_("active"), N_("done"), N_("cancelled"))
"""A booking's states (``scheduler.head.bookings``) as the table shows them; the codes
stay in ``--json``."""


def bookings_table(items: Sequence[dict[str, Any]], width: int | None = None) -> list[str]:
    """BOOKING USER STATE GPUS HOST WHEN LENGTH NOTE; in ``width`` cells NOTE, HOST
    and USER are cut first, then NOTE and LENGTH go."""
    rows = [tuple(_(title) for title in HEADER)]
    for b in items:
        start, end = float(b.get("start") or 0), float(b.get("end") or 0)
        state = _state(b.get("state", "")) + (" " + _("maint") if b.get("maint") else "")
        rows.append(
            (
                f"b{b.get('id')}",
                shown(b.get("user", ""), 12),
                state,
                str(len(b.get("gpu_uuids") or [])),
                shown(b.get("host") or "-", 16),
                span_text(start, end),
                coarse_text(end - start),
                shown(b.get("note") or "", 40),
            )
        )
    return fit_table(rows, width, flex={7: 4, 4: 8, 1: 8}, drop=(7, 6))


def _state(code: object) -> str:
    text = shown(code, 9)
    return _(text) if text in BOOKING_STATES else text


def book(backend: SyncBackend, a: argparse.Namespace) -> int:
    now = time.time()
    result = backend.book(
        start=start_time(a.start, now),
        duration_s=a.duration,
        gpus=a.gpus,
        gpu_refs=a.gpu,
        pool=a.pool,
        model=a.model,
        host=a.host,
        note=a.note,
        maint=a.maint,
        reason=a.reason,
    )["booking"]
    if a.json:
        print_json(result)
        return EXIT_OK
    cards = len(result.get("gpu_uuids") or [])
    said = (
        _("maintenance booking b{id}: {cards} GPU(s) on {host}, {when}")
        if result.get("maint")
        else _("booking b{id}: {cards} GPU(s) on {host}, {when}")
    )
    print(
        said.format(
            id=result["id"],
            cards=cards,
            host=shown(result.get("host") or "-", 64),
            when=span_text(result["start"], result["end"]),
        )
    )
    return EXIT_OK


def unbook(backend: SyncBackend, a: argparse.Namespace) -> int:
    result = backend.unbook(a.booking, reason=a.reason)["booking"]
    print(_("unbooked b{id}").format(id=result["id"]))
    return EXIT_OK


def bookings(backend: SyncBackend, a: argparse.Namespace) -> int:
    items = backend.bookings(all=a.all)["bookings"]
    if a.json:
        print_json(items)
        return EXIT_OK
    if not items:
        print(_("no bookings") if a.all else _("no bookings ahead (gputui book to make one)"))
        return EXIT_OK
    for line in bookings_table(items, terminal_width()):
        print(line)
    return EXIT_OK


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {
    "book": book,
    "unbook": unbook,
    "bookings": bookings,
}
