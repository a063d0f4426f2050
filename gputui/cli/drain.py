"""``gputui drain``, ``undrain`` and ``unfence``, and the block under ``gputui queue``
that lists the cards taking no new work (drained, or fenced by the head).

Like ``cli_head`` (which dispatches them), these import only the light client.
Everything shown comes from the head and is shown as untrusted text.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from gputui.durations import coarse_text
from gputui.printable import shown
from gputui.scheduler.client import HeadClient
from gputui.untrusted import number as _number

EXIT_OK = 0
MAX_SHOWN = 200


def add_parsers(sub: Any) -> None:
    d = sub.add_parser("drain", help="no new jobs or claims on a host or GPU (admins)")
    d.add_argument("target", metavar="HOST[:GPU]", help="a host, or one GPU by index or uuid")
    d.add_argument("--reason", required=True, help="why (kept in the audit log)")
    d.add_argument("--json", action="store_true")
    u = sub.add_parser("undrain", help="take new work on a drained host or GPU again (admins)")
    u.add_argument("target", metavar="HOST[:GPU]")
    u.add_argument("--reason", help="why (kept in the audit log)")
    u.add_argument("--json", action="store_true")
    f = sub.add_parser("unfence", help="clear the head's automatic fence of a GPU (admins)")
    f.add_argument("target", metavar="HOST:GPU")
    f.add_argument("--reason", required=True, help="why (kept in the audit log)")
    f.add_argument("--json", action="store_true")


def run(client: HeadClient, a: argparse.Namespace) -> int:
    body: dict[str, Any] = {"target": a.target}
    if a.reason is not None:
        body["reason"] = a.reason
    result = client.call(a.verb, body)
    if a.json:
        json.dump(result, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    print(f"{shown(a.target, 140)}: {shown(result.get('outcome', 'done'), 200)}")
    gpus = result.get("gpus")
    if isinstance(gpus, list):
        for line in gpu_lines(gpus, time.time()):
            print(f"  {line}")
    return EXIT_OK


def _since(part: Any, now: float) -> str:
    at = _number(part.get("since")) if isinstance(part, dict) else None
    return "" if at is None else f" for {coarse_text(max(0.0, now - at))}"


def gpu_lines(gpus: list[Any], now: float) -> list[str]:
    """One line a GPU: where, state, and the drain's and fence's who, why, since when."""
    lines = []
    for g in gpus[:MAX_SHOWN]:
        if not isinstance(g, dict):
            continue
        where = shown(f"{g.get('host', '?')}:{g.get('index', '?')}", 40)
        parts = []
        drain, fence = g.get("drain"), g.get("fence")
        if isinstance(fence, dict):
            parts.append(
                f"FENCED {shown(fence.get('code'), 32)}{_since(fence, now)}:"
                f" {shown(fence.get('reason'), 120)}"
            )
        if isinstance(drain, dict):
            parts.append(
                f"DRAINED by {shown(drain.get('by'), 32)}{_since(drain, now)}:"
                f" {shown(drain.get('reason'), 120)}"
            )
        elif g.get("host_drained") is True:
            parts.append("DRAINED (its host)")
        lines.append(f"{where:<20} {'; '.join(parts) or shown(g.get('state'), 16)}")
    if len(gpus) > MAX_SHOWN:
        lines.append(f"… and {len(gpus) - MAX_SHOWN} more")
    return lines


def unavailable_table(gpus: Any, now: float) -> list[str]:
    """The block under the queue (no such cards: no lines)."""
    if not isinstance(gpus, list) or not gpus:
        return []
    head = f"UNAVAILABLE: {len(gpus)} GPU(s) take no new work (drained by an admin, or fenced)"
    return ["", head, *gpu_lines(gpus, now)]
