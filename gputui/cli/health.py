"""``gputui health``: every problem in the cluster, ranked, from the shell.

The head's board when there is a head, else a probe of every host; JSON with
``--json``; an exit code for cron and monitoring. ``console.HEALTH_ABOUT`` (what
``gputui health --help`` prints) says it all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gputui.cli.layout import cut, fit_widths, pad, table_lines, terminal_width, wrap
from gputui.common.i18n import N_, _, ngettext
from gputui.common.locations import SOCKET_ENV, LocationError, find_hosts
from gputui.common.text import clean
from gputui.config.loader import ConfigError, find_config, load_config
from gputui.config.models import Config
from gputui.health.board import HealthBoard, Problem
from gputui.health.report import not_applicable_counts, problem_json, unknown_json
from gputui.health.words import shown
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Sample

EXIT_OK, EXIT_WARN, EXIT_CRIT, EXIT_ERROR, EXIT_UNKNOWN = 0, 1, 2, 3, 4
MAX_WAIT_S = 3600
_EXIT = {"ok": EXIT_OK, "warn": EXIT_WARN, "crit": EXIT_CRIT}


class Board(Protocol):
    """A board to print: the console's own (``HealthBoard``) or the head's answer."""

    def problems(self) -> list[Problem]: ...
    def unknown(self) -> dict[str, list[tuple[int, str, str]]]: ...
    def not_applicable(self) -> dict[str, list[tuple[int, str]]]: ...
    def worst(self) -> str: ...


def wait_refused(wait: float) -> str | None:
    """Why ``--wait`` is refused (None: it is fine): a number of seconds in (0, 3600],
    never NaN or an infinity. ``gputui health`` and ``gputui incident`` both check it."""
    if 0 < wait <= MAX_WAIT_S:
        return None
    return _("--wait must be between 0 and {limit} seconds").format(limit=MAX_WAIT_S)


def given_socket(args: argparse.Namespace) -> str | None:
    """The head's socket the user gave: ``--socket``, else ``$GPUTUI_HEAD_SOCKET``."""
    return getattr(args, "socket", None) or os.environ.get(SOCKET_ENV) or None


def main(args: argparse.Namespace) -> int:
    if wait_refused(args.wait):
        print(f"gputui health: {wait_refused(args.wait)}", file=sys.stderr)
        return EXIT_ERROR
    socket = given_socket(args)
    try:
        source = find_hosts(args.hosts)
    except LocationError as exc:
        print(f"gputui health: {exc.line}", file=sys.stderr)
        return EXIT_ERROR
    if source is None and socket is not None:
        return head_only(args, socket)  # no hosts.yaml: the head the socket names, as queue
    try:
        config = load_config(find_config(args.hosts))
    except ConfigError as exc:
        for line in exc.lines:
            print(f"gputui health: {line}", file=sys.stderr)
        return EXIT_ERROR
    try:
        config = _only(config, args.host or ())
    except ValueError as exc:
        print(f"gputui health: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not config.hosts:
        print("gputui health: " + _("no hosts in hosts.yaml"), file=sys.stderr)
        return EXIT_ERROR
    if args.ack is not None or args.note is not None:
        return acknowledge(config, args, socket)
    board: Board
    notes: list[str] = []
    answer, why = ask_head(config, args.hosts, args.host or [], socket)
    if answer is not None:
        from gputui.health.head_answer import HeadBoard

        board = head_board = HeadBoard(answer)
        hosts = head_board.hosts
    else:
        if why:
            notes.append(
                _("the head did not answer ({why}): probed the hosts directly").format(why=why)
            )
        progress = sys.stderr.isatty() and not args.json
        snapshots = asyncio.run(probe(config, args.wait, progress=progress))
        now = time.time()
        own = HealthBoard(config.health, {h.name: h.gpus for h in config.hosts})
        for snap in snapshots.values():
            own.observe(snap, now)
        board, hosts = own, len(snapshots)
    return report(args, board, hosts, notes)


def head_only(args: argparse.Namespace, socket: str) -> int:
    """No hosts.yaml, a socket given: the head's board, or its refusal (exit 3)."""
    if args.ack is not None or args.note is not None:
        return acknowledge(None, args, socket)
    answer, why = ask_head(None, None, args.host or [], socket)
    if answer is None:
        print(f"gputui health: {why}", file=sys.stderr)
        return EXIT_ERROR
    from gputui.health.head_answer import HeadBoard

    board = HeadBoard(answer)
    return report(args, board, board.hosts, [])


def report(args: argparse.Namespace, board: Board, hosts: int, notes: list[str]) -> int:
    """Print the board (text or ``--json``); its exit status."""
    if args.json:
        print(json.dumps({**as_json(board, hosts), "notes": notes}, indent=1))
    else:
        print(as_text(board, hosts, terminal_width()))
        if args.keys:
            from gputui.health.head_answer import keys_text

            print("\n" + keys_text(board.problems()))
        for note in notes:
            print(_("note: {note}").format(note=note))
    return exit_code(board)


def exit_code(board: Board) -> int:
    """The worst problem's code; with none, 4 when some check could not be made."""
    worst = board.worst()
    if worst == "ok" and board.unknown():
        return EXIT_UNKNOWN
    return _EXIT[worst]


def ask_head(
    config: Config | None, hosts_file: str | None, hosts: Sequence[str], socket: str | None = None
) -> tuple[dict[str, Any] | None, str]:
    """The head's ``health`` answer, or (None, why not); (None, "") with no head (none
    in hosts.yaml and no ``socket`` given)."""
    if socket is None and (config is None or config.head is None):
        return None, ""
    from gputui.scheduler.client.backend import require
    from gputui.scheduler.client.errors import HeadError
    from gputui.scheduler.client.session import local_head

    try:
        with local_head(hosts_file, socket) as head:
            require(head, ("health",))
            return head.health(list(hosts)), ""
    except (HeadError, OSError) as exc:
        return None, clean(str(exc), 200)


def acknowledge(config: Config | None, args: argparse.Namespace, socket: str | None = None) -> int:
    """``--ack KEY --note TEXT``: 0 once the head acknowledged it, 3 otherwise."""
    if not args.ack or not (args.note or "").strip():
        print(
            "gputui health: " + _("--ack KEY needs --note TEXT (why it may wait)"), file=sys.stderr
        )
        return EXIT_ERROR
    if socket is None and (config is None or config.head is None):
        print(
            "gputui health: " + _("--ack needs a head (hosts.yaml has no head:)"), file=sys.stderr
        )
        return EXIT_ERROR
    from gputui.scheduler.client.backend import require
    from gputui.scheduler.client.errors import HeadError
    from gputui.scheduler.client.session import local_head

    try:
        with local_head(args.hosts, socket) as head:
            require(head, ("health_ack",))
            done = head.health_ack(args.ack, args.note)
    except (HeadError, OSError) as exc:
        print(f"gputui health: {clean(str(exc), 300)}", file=sys.stderr)
        return EXIT_ERROR
    print(_("acknowledged {key}").format(key=clean(str(done.get("key", args.ack)), 256)))
    return EXIT_OK


def _only(config: Config, names: Sequence[str]) -> Config:
    if not names:
        return config
    known = {h.name for h in config.hosts}
    missing = [n for n in names if n not in known]
    if missing:
        shown = ", ".join(sorted(known)[:10]) + (" ..." if len(known) > 10 else "")
        raise ValueError(
            _("--host {name}: no such host (hosts: {hosts})").format(
                name=repr(clean(missing[0], 128)), hosts=shown
            )
        )
    return config.model_copy(update={"hosts": [h for h in config.hosts if h.name in names]})


def _failed(snap: HostSnapshot) -> bool:
    return snap.status.is_problem and snap.status is not HostStatus.STALE


def _read(sample: Sample | None) -> bool:
    """Whether ``sample`` carries a health reading of every GPU it lists that can be
    read (a lost card cannot: waiting for its reading would wait for ever)."""
    return sample is not None and all(g.health_read or g.state != "ok" for g in sample.gpus)


class _Probed:
    """One host as the probe saw it: its latest snapshot and the latest sample of it
    that carried the health readings (what the checks judge)."""

    def __init__(self, snap: HostSnapshot) -> None:
        self.latest = snap
        self.reading: Sample | None = None
        self.take(snap)

    def take(self, snap: HostSnapshot) -> None:
        self.latest = snap
        if _read(snap.sample):
            self.reading = snap.sample

    def settled(self) -> bool:
        """Read twice (the helper sends the kernel log's Xid history beside its first
        sample, so after the second it has come) with a health reading, or failed."""
        sample = self.latest.sample
        return _failed(self.latest) or (
            sample is not None and sample.seq >= 2 and self.reading is not None
        )

    def judged(self, wait_s: float) -> HostSnapshot:
        """What the checks see: the latest snapshot with the reading's sample (without
        one, the latest sample: its health checks are then unknown, not ok)."""
        snap = self.latest
        if self.reading is not None and not _failed(snap):
            return snap.with_changes(sample=self.reading)
        if snap.sample is None and not snap.status.is_problem:
            return snap.with_changes(
                status=HostStatus.UNREACHABLE, message=f"no reading in {wait_s:g} s"
            )
        return snap


async def probe(config: Config, wait_s: float, *, progress: bool) -> dict[str, HostSnapshot]:
    """Every host's snapshot once it settled, or as it stands after ``wait_s``; its
    sample the latest one with a health reading (each helper takes one per sample
    here, not every ``health_every_s``)."""
    from gputui.fleet.fleet import Fleet

    now_please = max(1.0, config.refresh_interval)
    fleet = Fleet(config.model_copy(update={"health_every_s": now_please}))
    await fleet.start()
    probed = {name: _Probed(s) for name, s in fleet.snapshots().items()}
    shown = 0.0
    try:
        async with asyncio.timeout(wait_s), fleet.updates() as updates:
            async for snap in updates:
                if snap.name in probed:
                    probed[snap.name].take(snap)
                else:
                    probed[snap.name] = _Probed(snap)
                waiting = [name for name, p in probed.items() if not p.settled()]
                if not waiting:
                    break
                if progress and time.monotonic() - shown >= 1.0:
                    shown = time.monotonic()
                    names = ", ".join(waiting[:4]) + (" ..." if len(waiting) > 4 else "")
                    told = _("waiting for {count} of {total} hosts ({names})").format(
                        count=len(waiting), total=len(probed), names=names
                    )
                    print(
                        f"\r{told}\x1b[K",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
    except TimeoutError:
        pass
    finally:
        if progress and shown:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)
        for name, snap in fleet.snapshots().items():
            if name in probed and snap is not probed[name].latest:
                probed[name].take(snap)
        await fleet.close()
    return {name: p.judged(wait_s) for name, p in probed.items()}


def _when(t: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(t))


SEVERITIES = {"crit": N_("CRIT"), "warn": N_("WARN"), "info": N_("INFO")}
"""A problem's severity as the table shows it (``--json`` keeps the code)."""


def severity_text(severity: str) -> str:
    """``crit`` -> ``CRIT`` (in the chosen language); one not listed in capitals."""
    return _(SEVERITIES[severity]) if severity in SEVERITIES else severity.upper()


def as_json(board: Board, hosts: int) -> dict[str, Any]:
    unknown: Mapping[str, list[tuple[int, str, str]]] = board.unknown()
    return {
        "status": board.worst(),
        "hosts": hosts,
        "problems": [problem_json(p) for p in board.problems()],
        "unknown": unknown_json(unknown),
        "not_applicable": not_applicable_counts(board.not_applicable()),
    }


def as_text(board: Board, hosts: int, width: int | None) -> str:
    """The problems as a table, then what each means; in ``width`` cells (None: any) the
    PROBLEM is cut first, then WHAT TO DO leaves the table for a line under the meaning."""
    problems = board.problems()
    lines: list[str] = []
    if problems:
        titles = (
            N_("SEV"),
            N_("HOST"),
            N_("GPU"),
            N_("PROBLEM"),
            N_("FIRST SEEN"),
            N_("N"),
            N_("WHAT TO DO"),
        )
        rows = [tuple(_(t) for t in titles)]
        for p in problems:
            f = p.finding
            rows.append(
                (
                    severity_text(f.severity),
                    f.host,
                    "-" if f.gpu is None else str(f.gpu),
                    cut(shown(f.title), 42 if p.ack else 48) + (" " + _("[ack]") if p.ack else ""),
                    _when(p.first_seen),
                    str(p.count),
                    shown(f.action),
                )
            )
        widths = fit_widths(rows, width, flex={3: 16, 1: 8}, drop=(6,))
        lines += table_lines(rows, widths, width)
        lines.append("")
        for p in problems:  # what each means, once, below the table
            f = p.finding
            where = (
                f.host if f.gpu is None else _("{host} GPU {gpu}").format(host=f.host, gpu=f.gpu)
            )
            sev = pad(severity_text(f.severity), 4)
            lines += wrap(f"{sev}  {where}: {shown(f.title)}: {shown(f.meaning)}", width, 6)
            if 6 not in widths:
                lines += wrap(
                    "      " + _("what to do: {action}").format(action=shown(f.action)), width, 18
                )
        lines.append("")
    counts = {
        s: sum(1 for p in problems if p.finding.severity == s) for s in ("crit", "warn", "info")
    }

    where = ngettext("{count} host", "{count} hosts", hosts).format(count=hosts)
    if problems:
        crit = _("{count} critical").format(count=counts["crit"])
        warn = ngettext("{count} warning", "{count} warnings", counts["warn"])
        info = ngettext("{count} note", "{count} notes", counts["info"])
        summary = _("{critical}, {warnings}, {notes} on {hosts}").format(
            critical=crit,
            warnings=warn.format(count=counts["warn"]),
            notes=info.format(count=counts["info"]),
            hosts=where,
        )
    else:
        summary = _("no problems on {hosts}").format(hosts=where)
    lines += wrap(summary, width, 2)
    unknown = board.unknown()
    if unknown:
        per_host = []
        for host, items in sorted(unknown.items()):
            checks = sorted({f"{check} ({why})" for _at, check, why in items})
            per_host.append(f"{host}: {', '.join(checks)}")
        told = _("not checked (unknown, not ok): {checks}").format(checks="; ".join(per_host))
        lines += wrap(told, width, 2)
    return "\n".join(clean(line, 2048) for line in lines)
