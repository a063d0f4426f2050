"""``gputui queue -o FORMAT``: the queue in the columns a Slurm user asks ``squeue -o`` for.

The field letters are Slurm's where gputui has the same thing (``%i`` id, ``%j``
name, ``%u`` user, ``%T`` state, ``%t`` its short code, ``%M`` time used, ``%l``
time limit, ``%D`` and ``%b`` GPUs, ``%R`` reason or host, ``%P`` pool, ``%Q``
priority class, ``%V`` submit time, ``%S`` start time); ``%h`` is the host asked
for. A width pads (``%10j``) or, after a dot, right-aligns (``%.10j``), and cuts what
is longer, as squeue does; ``%%`` is a percent sign; any other text is kept. An
unknown letter is one line naming it. Stdlib only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.cli.layout import cut, pad
from gputui.common.arrays import fold
from gputui.common.durations import elapsed_text
from gputui.common.i18n import N_, _
from gputui.common.job_words import reason_text, state_text
from gputui.common.printable import shown

MAX_FORMAT = 1024
MAX_WIDTH = 200

_SHORT_STATE = {
    "queued": "PD",
    "held": "PD",
    "running": "R",
    "completed": "CD",
    "failed": "F",
    "cancelled": "CA",
    "killed": "CA",
    "timeout": "TO",
    "requeued": "RQ",
}


def _stamp(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        return "N/A"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(value))


def _used(job: dict[str, Any], now: float) -> str:
    started, ended = job.get("started_at"), job.get("ended_at")
    if not isinstance(started, (int, float)) or isinstance(started, bool):
        return "0:00"
    end = ended if isinstance(ended, (int, float)) and not isinstance(ended, bool) else now
    return elapsed_text(end - started)


def _limit(job: dict[str, Any]) -> str:
    limit = job.get("time_limit_s")
    if not isinstance(limit, (int, float)) or isinstance(limit, bool) or limit <= 0:
        return _("UNLIMITED")
    return elapsed_text(limit)


def _long_state(job: dict[str, Any]) -> str:
    """Slurm's ``%T``: the state in capitals (in Chinese, its words)."""
    code = str(job.get("state") or "")
    text = state_text(code)
    return code.upper() if text == code else text


def _where(job: dict[str, Any]) -> str:
    """Slurm's ``%R``: why a waiting job waits, where a running one runs."""
    if job.get("state") == "running":
        return str(job.get("host") or "-")
    reason = job.get("reason")
    if reason:
        return reason_text(str(reason))
    return str(job.get("host") or "-")


Field = Callable[[dict[str, Any], float], str]
FIELDS: dict[str, tuple[str, Field]] = {
    "i": (N_("JOBID"), lambda j, _: str(j.get("label") or j.get("id", ""))),
    "j": (N_("NAME"), lambda j, _: str(j.get("name") or "")),
    "u": (N_("USER"), lambda j, _: str(j.get("user") or "")),
    "T": (N_("STATE"), lambda j, _: _long_state(j)),
    "t": (N_("ST"), lambda j, _: _SHORT_STATE.get(str(j.get("state")), "?")),
    "M": (N_("TIME"), _used),
    "l": (N_("TIME_LIMIT"), lambda j, _: _limit(j)),
    "D": (N_("GPUS"), lambda j, _: str(j.get("gpus", ""))),
    "b": (N_("GPUS"), lambda j, _: str(j.get("gpus", ""))),
    "R": (N_("REASON"), lambda j, _: _where(j)),
    "P": (N_("POOL"), lambda j, _: str(j.get("pool") or "-")),
    "Q": (N_("PRIORITY"), lambda j, _: str(j.get("priority") or "-")),
    "V": (N_("SUBMIT_TIME"), lambda j, _: _stamp(j.get("submitted_at"))),
    "S": (N_("START_TIME"), lambda j, _: _stamp(j.get("started_at"))),
    "h": (N_("HOST_WANTED"), lambda j, _: str(j.get("host_constraint") or "-")),
}
"""Letter -> (header, value of a job at a time)."""

_SPEC = re.compile(r"%(%|(\.)?(\d{0,3})([A-Za-z]?))")


@dataclass(frozen=True)
class Part:
    """Literal text (``letter`` empty) or one field, its width and alignment."""

    text: str = ""
    letter: str = ""
    width: int = 0
    right: bool = False

    def cell(self, value: str) -> str:
        if not self.letter:
            return self.text
        value = shown(value, MAX_WIDTH)
        if not self.width:
            return value
        if value.isascii():  # as squeue: cut without a mark
            value = value[: self.width]
            return value.rjust(self.width) if self.right else value.ljust(self.width)
        return pad(cut(value, self.width), self.width, right=self.right)  # by cells


class FormatError(ValueError):
    """A ``--format`` that cannot be used, in one line."""


def parse(spec: str) -> list[Part]:
    """``%.10i %j`` -> its parts; ``FormatError`` naming what is wrong."""
    if len(spec) > MAX_FORMAT:
        raise FormatError(_("--format: longer than {limit} characters").format(limit=MAX_FORMAT))
    bad = next((i for i, ch in enumerate(spec) if not ch.isprintable()), None)
    if bad is not None:  # a control character would reach the terminal in the header
        raise FormatError(_("--format: an unprintable character at {at}").format(at=bad + 1))
    parts: list[Part] = []
    at = 0
    for match in _SPEC.finditer(spec):
        if match.start() > at:
            parts.append(Part(text=spec[at : match.start()]))
        at = match.end()
        if match.group(1) == "%":
            parts.append(Part(text="%"))
            continue
        dot, digits, letter = match.group(2), match.group(3), match.group(4)
        if not letter:
            raise FormatError(
                _("--format: a field letter must follow % at {at}").format(at=match.start() + 1)
            )
        if letter not in FIELDS:
            known = "".join(sorted(FIELDS, key=str.lower))
            raise FormatError(
                _("--format: unknown field %{letter} (known: {known})").format(
                    letter=letter, known=known
                )
            )
        width = int(digits) if digits else 0
        if width > MAX_WIDTH:
            raise FormatError(
                _("--format: width {width} is over {limit}").format(width=width, limit=MAX_WIDTH)
            )
        parts.append(Part(letter=letter, width=width, right=dot is not None))
    if at < len(spec):
        parts.append(Part(text=spec[at:]))
    if not any(p.letter for p in parts):
        raise FormatError(_("--format: no field in it (e.g. '%.8i %.10j %.8u %.2t %M %R')"))
    return parts


def lines(parts: Sequence[Part], jobs: Sequence[dict[str, Any]], now: float) -> list[str]:
    """A header line, then one line a job (an array's waiting tasks: one line,
    ``%i`` ``12_[4-31]``)."""
    head = "".join(p.cell(_(FIELDS[p.letter][0])) if p.letter else p.text for p in parts)
    rows = [head.rstrip()]
    for label, one, _count in fold(jobs):
        job = {**one, "label": label}
        row = "".join(p.cell(FIELDS[p.letter][1](job, now)) if p.letter else p.text for p in parts)
        rows.append(shown(row.rstrip(), 4096))
    return rows
