"""``gputui incident HOST[:GPU] [--since T] [--json]``: one card's story, for the report.

A timeline, oldest first, of what is known about a host (or one of its GPUs) since
``--since`` (default 24h): when the host booted, every Xid (the kernel log's history
and NVML's events, and with a head those the head received) with what it means, the
problems there are now with when each was first seen (with a head, the head's board:
first seen is when the head first saw it; without one, this probe's checks), the
head's audit rows about it (fence, drain, force-free, kill, preempt, enforce), the
readings the head stored (about one a minute, across its restarts) and those the
probe took. With
``gputui health --json`` and ``gputui audit --json`` that is what an incident
report needs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from gputui.cli.health import EXIT_ERROR, probe, severity_text, wait_refused
from gputui.cli.layout import pad, terminal_width, wrap
from gputui.common.durations import ago
from gputui.common.i18n import N_, _, ngettext
from gputui.common.text import clean
from gputui.common.untrusted import epoch, integer, number
from gputui.config.loader import ConfigError, find_config, load_config
from gputui.config.models import Config
from gputui.health.board import HealthBoard, Problem
from gputui.health.head_answer import HeadBoard
from gputui.health.words import shown
from gputui.health.xid import info
from gputui.telemetry import HostSnapshot
from gputui.wire.messages import GpuSample

EXIT_OK = 0
MAX_AUDIT = 2000


@dataclass(frozen=True, slots=True)
class Entry:
    time: float
    kind: str
    """``boot``, ``xid``, ``problem``, ``audit``, ``reading`` (kept by the head, about
    one a minute) or ``sample`` (taken by this probe)."""
    gpu: int | None
    text: str
    """In English, as ``--json`` has it."""
    words: str = field(default="", compare=False)
    """The text in the chosen language, as the timeline prints it ("": ``text``)."""

    def as_json(self) -> dict[str, Any]:
        return {"time": self.time, "kind": self.kind, "gpu": self.gpu, "text": self.text}


KINDS = {
    "boot": N_("boot"),
    "xid": N_("xid"),
    "problem": N_("problem"),
    "audit": N_("audit"),
    "reading": N_("reading"),
    "sample": N_("sample"),
}
"""An entry's kind as the timeline shows it (``--json`` keeps the code)."""


class Note(str):
    """A note under the timeline: in English (the JSON's), with ``words``, the note in
    the chosen language (what the timeline prints)."""

    words: str

    def __new__(cls, english: str, words: str) -> Note:
        note = super().__new__(cls, english)
        note.words = words
        return note


def note(message: str, /, **fields: Any) -> Note:
    """``said`` as a ``Note``."""
    return Note(*said(message, **fields))


def said(message: str, /, **fields: Any) -> tuple[str, str]:
    """``message`` (marked with ``N_``) filled in: in English (the JSON's) and in the
    chosen language (the timeline's)."""
    return message.format(**fields), _(message).format(**fields)


def _since(text: str, now: float) -> float:
    since = ago(text, now)
    if since is None:
        raise ValueError(
            _("--since: not a span: {text} (30m, 12h, 2d, 1w)").format(text=repr(clean(text, 40)))
        )
    return since


def _target(text: str, config: Config) -> tuple[str, int | None]:
    host, _colon, gpu = text.partition(":")
    names = {h.name for h in config.hosts}
    if host not in names:
        raise ValueError(
            _("{host}: no such host in hosts.yaml").format(host=repr(clean(host, 128)))
        )
    if not gpu:
        return host, None
    if not gpu.isdigit() or int(gpu) > 63:
        raise ValueError(
            _("{target}: GPU must be an index 0-63 (HOST:GPU)").format(
                target=repr(clean(text, 160))
            )
        )
    return host, int(gpu)


def main(args: argparse.Namespace) -> int:
    refused = wait_refused(args.wait)
    if refused:
        print(f"gputui incident: {refused}", file=sys.stderr)
        return EXIT_ERROR
    try:
        config = load_config(find_config(args.hosts))
        now = time.time()
        since = _since(args.since, now)
        host, gpu = _target(args.target, config)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"gputui incident: {line}", file=sys.stderr)
        return EXIT_ERROR
    except ValueError as exc:
        print(f"gputui incident: {exc}", file=sys.stderr)
        return EXIT_ERROR
    only = config.model_copy(update={"hosts": [h for h in config.hosts if h.name == host]})
    snap = asyncio.run(probe(only, args.wait, progress=False)).get(host)
    notes: list[Note] = []
    head = _head(config, args.hosts, host=host, gpu=gpu, since=since, notes=notes)
    board = head.board if head is not None else None
    entries = (
        timeline(snap, config, gpu, since, notes=notes, now=now, board=board)
        if snap is not None
        else []
    )
    if head is not None:
        if snap is None and board is not None:
            entries += _problems(board.problems(), gpu, since)
        entries += _head_xids(head.events, entries, gpu)
        entries += head.entries
    entries.sort(key=lambda e: e.time)
    if args.json:
        out = {
            "host": host,
            "gpu": gpu,
            "since": since,
            "entries": [e.as_json() for e in entries],
            "notes": [str(n) for n in notes],
        }
        print(json.dumps(out, indent=1))
        return EXIT_OK
    where = host if gpu is None else _("{host} GPU {gpu}").format(host=host, gpu=gpu)
    print(_("Incident timeline for {where}, since {time}").format(where=where, time=_stamp(since)))
    for line in timeline_lines(entries, gpu, terminal_width()):
        print(line)
    if not entries:
        print(_("(nothing recorded in that time)"))
    for each in notes:
        print(_("note: {note}").format(note=each.words))
    return EXIT_OK


def timeline_lines(entries: list[Entry], gpu: int | None, width: int | None) -> list[str]:
    """One entry a line, wrapped under its text in ``width`` cells."""
    out = []
    for e in entries:
        card = "" if e.gpu is None or gpu is not None else f"GPU {e.gpu}  "
        kind = pad(_(KINDS[e.kind]) if e.kind in KINDS else e.kind, 7)
        out += wrap(f"{_stamp(e.time)}  {kind}  {card}{e.words or e.text}", width, 30)
    return out


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def timeline(
    snap: HostSnapshot,
    config: Config,
    gpu: int | None,
    since: float,
    *,
    notes: list[Note],
    now: float,
    board: HeadBoard | None = None,
) -> list[Entry]:
    """What the host says: boot, Xids, the problems now (``board``'s, the head's, when
    given; else this probe's checks of ``snap``), its readings now."""
    out: list[Entry] = []
    if snap.status.is_problem:
        notes.append(
            note(
                N_("{host} did not answer ({status}: {message})"),
                host=snap.name,
                status=snap.status.value,
                message=clean(snap.message, 200),
            )
        )
    hello = snap.hello
    if hello is not None and hello.boot_time is not None and hello.boot_time >= since:
        booted = N_("the host booted")
        out.append(Entry(hello.boot_time, "boot", None, booted, _(booted)))
    for event in snap.events:
        if event.xid is None or event.time is None or event.time < since:
            continue
        if gpu is not None and event.gpu_index != gpu:
            continue
        entry = info(event.xid)
        message = N_("Xid {xid} ({kind}, {source}): {meaning}")
        text = message.format(
            xid=event.xid, kind=entry.kind, source=event.source, meaning=entry.meaning
        )
        words = _(message).format(
            xid=event.xid, kind=shown(entry.kind), source=event.source, meaning=shown(entry.meaning)
        )
        if event.text:
            text += f" -- {clean(event.text, 200)}"
            words += f" -- {clean(event.text, 200)}"
        out.append(Entry(event.time, "xid", event.gpu_index, text, words))
    if board is not None:
        out += _problems(board.problems(), gpu, since)
    else:
        own = HealthBoard(config.health, {h.name: h.gpus for h in config.hosts})
        own.observe(snap, now)
        out += _problems(own.problems(), gpu, since)
    if snap.sample is not None:
        for g in snap.sample.gpus:
            if gpu is None or g.index == gpu:
                text, words = _reading(g)
                out.append(Entry(snap.sample.time or now, "sample", g.index, text, words))
    return out


def _problems(problems: list[Problem], gpu: int | None, since: float) -> list[Entry]:
    out = []
    for problem in problems:
        f = problem.finding
        if gpu is not None and f.gpu not in (None, gpu):
            continue
        fields = {"title": f.title, "action": f.action, "count": problem.count}
        message = (
            N_("{severity} {title}: {action} ({count} times)")
            if problem.count > 1
            else N_("{severity} {title}: {action}")
        )
        text = message.format(severity=f.severity.upper(), **fields)
        fields.update(title=shown(f.title), action=shown(f.action))
        words = _(message).format(severity=severity_text(f.severity), **fields)
        at = max(problem.first_seen, since)
        out.append(Entry(at, "problem", f.gpu, clean(text, 300), clean(words, 300)))
    return out


READING_PARTS = {
    "util": N_("util {value}"),
    "mem": N_("mem {value}"),
    "temp": N_("temp {value}"),
    "power": N_("power {value}"),
    "ecc": N_("ecc {value}"),
    "throttle": N_("throttle {value}"),
}
"""A reading's parts, as the timeline says them (``--json`` has them in English)."""
_NOT_READ = N_("n/a")


def reading_text(
    state: str, parts: list[tuple[str, str | None]], extra: str = ""
) -> tuple[str, str]:
    """``ok, util 5%, mem 100 MiB, …``: in English (the JSON's) and in the chosen
    language; a part the host did not read (None) is ``n/a``."""
    english = [state]
    words = [state]
    for name, value in parts:
        message = READING_PARTS[name]
        english.append(message.format(value=_NOT_READ if value is None else value))
        words.append(_(message).format(value=_(_NOT_READ) if value is None else value))
    return ", ".join(english) + extra, ", ".join(words) + extra


def _reading(g: GpuSample) -> tuple[str, str]:
    def unit(value: object, suffix: str = "") -> str | None:
        return None if value is None else f"{value}{suffix}"

    parts = [
        ("util", unit(g.util_gpu, "%")),
        ("mem", unit(g.mem_used_mib, " MiB")),
        ("temp", unit(g.temp_c, " C")),
        ("power", unit(g.power_w, " W")),
        ("ecc", unit(g.ecc_uncorrected)),
    ]
    text, words = reading_text(g.state, parts)
    count = len(g.processes)
    text += ", " + f"{count} processes"
    words += ", " + ngettext("{count} process", "{count} processes", count).format(count=count)
    if g.throttle:
        throttle = "+".join(g.throttle)
        text += ", " + READING_PARTS["throttle"].format(value=throttle)
        words += ", " + _(READING_PARTS["throttle"]).format(value=throttle)
    return text, words


@dataclass(slots=True)
class HeadFacts:
    """What the head answered: its board of the host (None: it could not say), the Xids
    it received, and its audit rows and kept readings as entries."""

    board: HeadBoard | None
    events: list[dict[str, Any]]
    entries: list[Entry]


def _head(
    config: Config,
    hosts_file: str | None,
    *,
    host: str,
    gpu: int | None,
    since: float,
    notes: list[Note],
) -> HeadFacts | None:
    """The head's board of the host, its audit rows, readings and Xids (None: no head)."""
    if config.head is None:
        notes.append(note(N_("no head in hosts.yaml: no audit rows")))
        return None
    from gputui.scheduler.client.backend import require
    from gputui.scheduler.client.errors import HeadError
    from gputui.scheduler.client.session import local_head

    fallback = N_("the head did not answer: problems as this probe sees them now (first seen: now)")
    try:
        with local_head(hosts_file) as head:
            require(head, ("audit", "incident", "health"))
            answer = head.audit(since=since, limit=MAX_AUDIT)
            kept = head.incident(host, since=since, gpu=gpu)
            health = head.health([host])
    except HeadError as exc:
        notes.append(
            note(N_("no audit rows, past readings or board: {why}"), why=clean(exc.message, 200))
        )
        notes.append(note(fallback))
        return HeadFacts(None, [], [])
    except OSError as exc:
        notes.append(
            note(
                N_("no audit rows, past readings or board: head unreachable ({why})"),
                why=clean(str(exc), 200),
            )
        )
        notes.append(note(fallback))
        return HeadFacts(None, [], [])
    board = HeadBoard(health) if isinstance(health, dict) else None
    raw = kept.get("events") if isinstance(kept, dict) else None
    events = [e for e in raw[:10_000] if isinstance(e, dict)] if isinstance(raw, list) else []
    entries = _audit_rows(answer, host=host, gpu=gpu) + _readings(kept, since, notes)
    return HeadFacts(board, events, entries)


def _head_xids(events: list[dict[str, Any]], have: list[Entry], gpu: int | None) -> list[Entry]:
    """The Xids and SXids the head received, but those this probe has too."""
    seen = {(e.gpu, e.text.partition(" (")[0], round(e.time)) for e in have if e.kind == "xid"}
    out = []
    for e in events:
        when, index = epoch(e.get("time")), integer(e.get("gpu"), 0, 1023)
        xid, sxid = e.get("xid"), e.get("sxid")
        if when is None:
            continue
        if gpu is not None and index not in (None, gpu):
            continue
        source = clean(str(e.get("source") or "?"), 16)
        text = clean(str(e.get("text") or ""), 200)
        if isinstance(xid, int) and not isinstance(xid, bool) and 0 <= xid < 1 << 16:
            if (index, f"Xid {xid}", round(when)) in seen:
                continue
            message = N_("Xid {xid} ({kind}, {source}, received by the head): {meaning}")
            line = message.format(
                xid=xid, kind=info(xid).kind, source=source, meaning=info(xid).meaning
            )
            words = _(message).format(
                xid=xid,
                kind=shown(info(xid).kind),
                source=source,
                meaning=shown(info(xid).meaning),
            )
        elif isinstance(sxid, int) and not isinstance(sxid, bool) and 0 <= sxid < 1 << 16:
            bus = clean(str(e.get("bus_id") or "?"), 32)
            line, words = said(
                N_("SXid {sxid} on NVSwitch {bus} ({source}, received by the head)"),
                sxid=sxid,
                bus=bus,
                source=source,
            )
        else:
            continue
        more = f" -- {text}" if text else ""
        out.append(Entry(float(when), "xid", index, line + more, words + more))
    return out


def _audit_rows(answer: Any, *, host: str, gpu: int | None) -> list[Entry]:
    """The head's audit rows naming the host (or the GPU)."""
    wanted = {host} if gpu is None else {f"{host}:{gpu}", host}
    out = []
    rows = answer.get("rows") if isinstance(answer, dict) else None
    for row in rows[:MAX_AUDIT] if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        target, when = row.get("target"), epoch(row.get("time"))
        if not isinstance(target, str) or when is None:
            continue
        names = set(re.split(r"[\s,]+", target))
        if not (names & wanted or any(n.startswith(f"{host}:") for n in names if gpu is None)):
            continue
        text = " ".join(
            clean(str(row.get(k) or ""), 200) for k in ("user", "action", "target", "reason")
        )
        outcome = row.get("outcome")
        if isinstance(outcome, str) and outcome:
            text += f" -> {clean(outcome, 200)}"
        out.append(Entry(when, "audit", gpu, text))
    return out


def _readings(kept: Any, since: float, notes: list[Note]) -> list[Entry]:
    """The readings the head kept (about one a minute per host), as entries."""
    out: list[Entry] = []
    readings = kept.get("readings") if isinstance(kept, dict) else None
    for r in readings[:100_000] if isinstance(readings, list) else []:
        if not isinstance(r, dict):
            continue
        when, index = epoch(r.get("time")), integer(r.get("gpu"), 0, 1023)
        if when is None or index is None:
            continue

        def unit(key: str, suffix: str = "", r: dict[str, Any] = r) -> str | None:
            value = r.get(key)
            return f"{value}{suffix}" if number(value) is not None else None

        parts = [
            ("util", unit("util_gpu", "%")),
            ("mem", unit("mem_used_mib", " MiB")),
            ("temp", unit("temp_c", " C")),
            ("power", unit("power_w", " W")),
            ("ecc", unit("ecc_uncorrected")),
        ]
        text, words = reading_text(clean(str(r.get("state") or "?"), 16), parts)
        throttle = r.get("throttle")
        if isinstance(throttle, str) and throttle:
            value = clean(throttle, 120)
            text += ", " + READING_PARTS["throttle"].format(value=value)
            words += ", " + _(READING_PARTS["throttle"]).format(value=value)
        out.append(Entry(when, "reading", index, text, words))
    started = epoch(kept.get("kept_since")) if isinstance(kept, dict) else None
    if started is not None and started > since:
        notes.append(note(N_("the head has kept readings only since {time}"), time=_stamp(started)))
    return out
