"""The head's ``health`` answer read back as a board: for ``gputui health`` through
the head (first seen, counts and acks kept across runs and restarts) and for the
console, which takes the head's acknowledgements from it.

The head's answer is untrusted like any other: strings are cleaned, numbers
range-checked, a malformed problem is left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gputui.common.i18n import _
from gputui.common.text import cells, fit
from gputui.common.text import clean_str as _text
from gputui.common.untrusted import epoch as _time
from gputui.common.untrusted import integer as _int
from gputui.health.board import Ack, Problem, worst
from gputui.health.finding import RANK, Finding, Level
from gputui.health.words import shown

MAX_PROBLEMS = 100_000


def _problem(raw: Mapping[str, Any]) -> Problem | None:
    severity = raw.get("severity")
    code, host = _text(raw.get("code"), 64), _text(raw.get("host"), 64)
    first, last = _time(raw.get("first_seen")), _time(raw.get("last_seen"))
    count = _int(raw.get("count"), 1, 2**31)
    gpu = _int(raw.get("gpu"), 0, 1023)
    if severity not in RANK or not code or not host or first is None or last is None or not count:
        return None
    if raw.get("gpu") is not None and gpu is None:
        return None
    key = _text(raw.get("key"), 256)
    where = f"{host}:{'' if gpu is None else gpu}:{code}:"
    level: Level = "crit" if severity == "crit" else "warn" if severity == "warn" else "info"
    finding = Finding(
        code,
        level,
        host,
        gpu,
        _text(raw.get("title"), 256),
        _text(raw.get("meaning"), 512),
        _text(raw.get("action"), 512),
        _text(raw.get("detail"), 512),
        _text(raw.get("uuid"), 96) or None,
        subject=key[len(where) :] if key.startswith(where) else "",
    )
    ack = None
    acked = raw.get("acknowledged")
    if isinstance(acked, Mapping):
        at = _time(acked.get("at"))
        ack = Ack(_text(acked.get("by"), 64), _text(acked.get("note"), 512), at or 0.0, ())
    return Problem(finding, first, last, count, ack)


class HeadBoard:
    """The head's ``health`` answer, read like a board (``as_text``, ``as_json``)."""

    def __init__(self, answer: Mapping[str, Any]) -> None:
        raw = answer.get("problems")
        items = raw[:MAX_PROBLEMS] if isinstance(raw, list) else []
        found = (_problem(p) for p in items if isinstance(p, Mapping))
        self._problems = [p for p in found if p is not None]
        self._unknown: dict[str, list[tuple[int, str, str]]] = {}
        unknown = answer.get("unknown")
        for item in unknown[:MAX_PROBLEMS] if isinstance(unknown, list) else []:
            if not isinstance(item, Mapping):
                continue
            host, gpu = _text(item.get("host"), 64), _int(item.get("gpu"), 0, 1023)
            if host and gpu is not None:
                entry = (gpu, _text(item.get("check"), 64), _text(item.get("reason"), 128))
                self._unknown.setdefault(host, []).append(entry)
        self._not_applicable: dict[str, list[tuple[int, str]]] = {}
        not_applicable = answer.get("not_applicable")
        for item in not_applicable[:MAX_PROBLEMS] if isinstance(not_applicable, list) else []:
            if not isinstance(item, Mapping):
                continue
            host, gpu = _text(item.get("host"), 64), _int(item.get("gpu"), 0, 1023)
            check = _text(item.get("check"), 64)
            if host and gpu is not None and check:
                self._not_applicable.setdefault(host, []).append((gpu, check))
        hosts = _int(answer.get("hosts"), 0, 1_000_000)
        self.hosts = 0 if hosts is None else hosts
        self.since = _time(answer.get("since"))

    def problems(self) -> list[Problem]:
        return list(self._problems)

    def unknown(self) -> dict[str, list[tuple[int, str, str]]]:
        return {host: list(items) for host, items in self._unknown.items()}

    def not_applicable(self) -> dict[str, list[tuple[int, str]]]:
        return {host: list(items) for host, items in self._not_applicable.items()}

    def worst(self) -> str:
        return worst(self._problems)

    def acknowledged(self, key: str, ack: Ack) -> None:
        """The head just took ``ack`` for problem ``key`` (until the board is read again)."""
        self._problems = [replace(p, ack=ack) if p.key == key else p for p in self._problems]

    def acks(self) -> dict[str, Ack]:
        """Each acknowledged problem's key and who acknowledged it, and why."""
        return {p.key: p.ack for p in self._problems if p.ack is not None}


def keys_text(problems: Sequence[Problem]) -> str:
    """``--keys``: each problem's key (for ``--ack``), with its title."""
    titles = (_("KEY"), _("PROBLEM"))
    rows = [titles] + [(p.key, shown(p.finding.title)) for p in problems]
    width = max(cells(k) for k, _t in rows)
    return "\n".join(f"{fit(k, width)}  {t}"[:200].rstrip() for k, t in rows)
