"""What the console tells a person: one short line at the bottom, and a history.

Every ``notify`` goes through ``NoticeLog.add``: the whole notice (title, every
line of its text, when) is kept for the notices screen (``N``), and the toast gets
it as one line, cut at the screen's edge, for a few seconds. The toast sits
on the footer's row, so it never hides a table's cursor row, and it is hidden
under a form or a question (the CSS), so it never lands on what is being typed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from gputui.common.text import clean

SHOW_S = {"information": 4.0, "warning": 6.0, "error": 8.0}
"""Longest a toast stays, by severity: errors a little longer."""
KEEP = 200
"""Notices the history keeps (the oldest go first)."""
LINE_LIMIT = 400
"""Longest line of a notice that is kept (an env line of 8 GPUs is ~350)."""
LINES_LIMIT = 12


@dataclass(frozen=True, slots=True)
class Notice:
    """One notice as it was raised."""

    at: float
    severity: str
    title: str
    lines: tuple[str, ...]

    @property
    def line(self) -> str:
        """The toast's one line: ``title: text``, the text's lines joined by `` · ``
        (cut at the screen's edge; the notices screen has every line whole)."""
        text = " · ".join(self.lines)
        return f"{self.title}: {text}" if self.title else text


def split_lines(text: str) -> tuple[str, ...]:
    """A notice's text as clean, non-empty lines (control characters dropped)."""
    out = [clean(part, LINE_LIMIT).strip() for part in text.splitlines()[:LINES_LIMIT]]
    return tuple(line for line in out if line) or ("",)


class NoticeLog:
    """The notices raised so far, newest last."""

    def __init__(self, keep: int = KEEP) -> None:
        self._notices: deque[Notice] = deque(maxlen=keep)

    def add(self, at: float, severity: str, title: str, text: str) -> Notice:
        notice = Notice(at, severity, clean(title, 80), split_lines(text))
        self._notices.append(notice)
        return notice

    def __iter__(self) -> Iterator[Notice]:
        return iter(self._notices)

    def __len__(self) -> int:
        return len(self._notices)

    def newest_first(self) -> list[Notice]:
        return list(reversed(self._notices))


def show_for(severity: str, asked: float | None) -> float:
    """How long a toast of ``severity`` stays: what the caller asked, at most ``SHOW_S``."""
    cap = SHOW_S.get(severity, SHOW_S["information"])
    return cap if asked is None else max(0.5, min(asked, cap))
