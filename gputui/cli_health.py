"""``gputui health``: every problem in the cluster, ranked, from the shell.

Connects to every host of hosts.yaml (or the one of ``--host``) the way the console
does, takes each host's first full reading (or its failure to answer), runs the
health checks once and prints the ranked list, or JSON with ``--json``. The exit
code is for cron and monitoring: 0 nothing wrong, 1 warnings only, 2 something
critical, 3 when the check itself could not run (bad config or arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gputui.config import Config, ConfigError, find_config, load_config
from gputui.health.board import HealthBoard, Problem
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.text import clean

EXIT_OK, EXIT_WARN, EXIT_CRIT, EXIT_ERROR = 0, 1, 2, 3
_EXIT = {"ok": EXIT_OK, "warn": EXIT_WARN, "crit": EXIT_CRIT}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "health",
        help="every problem on every host, ranked (exit 0 ok, 1 warnings, 2 critical)",
        description=__doc__.split("\n\n")[1].replace("\n", " ") if __doc__ else None,
    )
    p.add_argument("--json", action="store_true", help="print JSON (problems and unknown checks)")
    p.add_argument("--host", action="append", metavar="NAME", help="only this host (repeatable)")
    p.add_argument(
        "--wait",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="how long to wait for hosts to answer (default 20)",
    )


def main(args: argparse.Namespace) -> int:
    try:
        config = load_config(find_config(args.hosts))
    except ConfigError as exc:
        for line in exc.lines:
            print(f"gputui health: {line}", file=sys.stderr)
        return EXIT_ERROR
    if not 0 < args.wait <= 3600:
        print("gputui health: --wait must be between 0 and 3600 seconds", file=sys.stderr)
        return EXIT_ERROR
    try:
        config = _only(config, args.host or ())
    except ValueError as exc:
        print(f"gputui health: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not config.hosts:
        print("gputui health: no hosts in hosts.yaml", file=sys.stderr)
        return EXIT_ERROR
    progress = sys.stderr.isatty() and not args.json
    snapshots = asyncio.run(probe(config, args.wait, progress=progress))
    now = time.time()
    board = HealthBoard(config.health, {h.name: h.gpus for h in config.hosts})
    for snap in snapshots.values():
        board.observe(snap, now)
    notes = from_head(board, config, args.hosts, now, set(snapshots))
    if args.json:
        print(json.dumps({**as_json(board, len(snapshots)), "notes": notes}, indent=1))
    else:
        print(as_text(board, len(snapshots), shutil.get_terminal_size((120, 24)).columns))
        for note in notes:
            print(f"note: {note}")
    return _EXIT[board.worst()]


def from_head(
    board: HealthBoard, config: Config, hosts_file: str | None, now: float, hosts: set[str]
) -> list[str]:
    """What the head knows of these hosts (cards it fenced, cards an admin drained,
    idle jobs) when hosts.yaml has a head; a note when it cannot say."""
    if config.head is None:
        return []
    from gputui.scheduler.client import HeadClient, HeadError, socket_path
    from gputui.ui.head_health import head_findings
    from gputui.ui.head_view import HeadView

    try:
        with HeadClient(socket_path(None, hosts_file)) as client:
            state = client.call("cluster", {})
    except (HeadError, OSError) as exc:
        return [f"the head did not answer ({clean(str(exc), 200)}): no fences or drains"]
    findings = [f for f in head_findings(HeadView.parse(state), now) if f.host in hosts]
    board.set_outside(findings, now)
    return []


def _only(config: Config, names: Sequence[str]) -> Config:
    if not names:
        return config
    known = {h.name for h in config.hosts}
    missing = [n for n in names if n not in known]
    if missing:
        shown = ", ".join(sorted(known)[:10]) + (" ..." if len(known) > 10 else "")
        raise ValueError(f"--host {clean(missing[0], 128)!r}: no such host (hosts: {shown})")
    return config.model_copy(update={"hosts": [h for h in config.hosts if h.name in names]})


def _settled(snap: HostSnapshot) -> bool:
    """Read twice (the helper sends the kernel log's Xid history beside its first
    sample, so after the second it has come), or failed once."""
    return (snap.sample is not None and snap.sample.seq >= 2) or (
        snap.status.is_problem and snap.status is not HostStatus.STALE
    )


async def probe(config: Config, wait_s: float, *, progress: bool) -> dict[str, HostSnapshot]:
    """Every host's snapshot once it settled, or as it stands after ``wait_s``."""
    from gputui.fleet.fleet import Fleet

    fleet = Fleet(config)
    await fleet.start()
    latest: dict[str, HostSnapshot] = dict(fleet.snapshots())
    shown = 0.0
    try:
        async with asyncio.timeout(wait_s), fleet.updates() as updates:
            async for snap in updates:
                latest[snap.name] = snap
                waiting = [name for name, s in latest.items() if not _settled(s)]
                if not waiting:
                    break
                if progress and time.monotonic() - shown >= 1.0:
                    shown = time.monotonic()
                    names = ", ".join(waiting[:4]) + (" ..." if len(waiting) > 4 else "")
                    print(
                        f"\rwaiting for {len(waiting)} of {len(latest)} hosts ({names})\x1b[K",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
    except TimeoutError:
        pass
    finally:
        if progress and shown:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)
        latest.update(fleet.snapshots())
        await fleet.close()
    return latest


def _when(t: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(t))


def _problem_json(p: Problem) -> dict[str, Any]:
    f = p.finding
    return {
        "severity": f.severity,
        "host": f.host,
        "gpu": f.gpu,
        "uuid": f.uuid,
        "code": f.code,
        "title": f.title,
        "meaning": f.meaning,
        "action": f.action,
        "detail": f.detail,
        "first_seen": p.first_seen,
        "last_seen": p.last_seen,
        "count": p.count,
        "acknowledged": None if p.ack is None else {"by": p.ack.by, "note": p.ack.note},
    }


def as_json(board: HealthBoard, hosts: int) -> dict[str, Any]:
    unknown: Mapping[str, list[tuple[int, str, str]]] = board.unknown()
    return {
        "status": board.worst(),
        "hosts": hosts,
        "problems": [_problem_json(p) for p in board.problems()],
        "unknown": [
            {"host": host, "gpu": gpu, "check": check, "reason": why}
            for host, items in sorted(unknown.items())
            for gpu, check, why in items
        ],
        "not_applicable": not_applicable_counts(board),
    }


def not_applicable_counts(board: HealthBoard) -> dict[str, int]:
    """Per check: on how many GPUs it does not apply (their models lack the feature)."""
    counts: dict[str, int] = {}
    for items in board.not_applicable().values():
        for _, check in items:
            counts[check] = counts.get(check, 0) + 1
    return dict(sorted(counts.items()))


def as_text(board: HealthBoard, hosts: int, width: int) -> str:
    problems = board.problems()
    lines: list[str] = []
    if problems:
        rows = [("SEV", "HOST", "GPU", "PROBLEM", "FIRST SEEN", "N", "WHAT TO DO")]
        for p in problems:
            f = p.finding
            rows.append(
                (
                    f.severity.upper(),
                    f.host,
                    "-" if f.gpu is None else str(f.gpu),
                    f.title + (" [ack]" if p.ack else ""),
                    _when(p.first_seen),
                    str(p.count),
                    f.action,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        widths[3] = min(widths[3], 48)
        for r in rows:
            cells = [c[: widths[i]].ljust(widths[i]) for i, c in enumerate(r[:6])]
            line = "  ".join(cells) + "  " + r[6]
            lines.append(line[: max(width, 60)].rstrip())
        lines.append("")
        for p in problems:  # what each means, once, below the table
            f = p.finding
            where = f.host + ("" if f.gpu is None else f" GPU {f.gpu}")
            lines.append(f"{f.severity.upper():4}  {where}: {f.title}: {f.meaning}")
        lines.append("")
    counts = {
        s: sum(1 for p in problems if p.finding.severity == s) for s in ("crit", "warn", "info")
    }

    def n(count: int, noun: str) -> str:
        return f"{count} {noun}" + ("" if count == 1 or noun == "critical" else "s")

    where = f"{hosts} host" + ("" if hosts == 1 else "s")
    summary = (
        f"{n(counts['crit'], 'critical')}, {n(counts['warn'], 'warning')},"
        f" {n(counts['info'], 'note')} on {where}"
        if problems
        else f"no problems on {where}"
    )
    lines.append(summary)
    unknown = board.unknown()
    if unknown:
        per_host = []
        for host, items in sorted(unknown.items()):
            checks = sorted({f"{check} ({why})" for _, check, why in items})
            per_host.append(f"{host}: {', '.join(checks)}")
        lines.append("not checked (unknown, not ok): " + "; ".join(per_host))
    return "\n".join(clean(line, 2048) for line in lines)
