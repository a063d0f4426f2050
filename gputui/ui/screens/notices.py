"""The notices screen (``N``): every notice of this session, newest first, in full.

A toast shows one line for a few seconds; here each notice has its time, its
severity as a word (readable without colour), its title and every line of its
text. A line is never wrapped: a copied env line stands alone on its row, whole,
where a mouse (tmux's too) can select it; a line wider than the screen scrolls.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from gputui.ui.notices import Notice

LEVELS = {"information": "info ", "warning": "warn ", "error": "error"}


def notice_lines(notices: Sequence[Notice]) -> list[str]:
    """The screen's lines: ``HH:MM:SS level title: first line``, then any further
    line of the notice alone on its own row."""
    out: list[str] = []
    for notice in notices:
        when = time.strftime("%H:%M:%S", time.localtime(notice.at))
        level = LEVELS.get(notice.severity, notice.severity[:5])
        first, *rest = notice.lines
        head = f"{notice.title}: {first}" if notice.title else first
        out.append(f"{when}  {level}  {head}")
        out.extend(rest)
    return out


class NoticesScreen(Screen[None]):
    """The history of notices; Esc (or N) goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,N", "close", "Back", tooltip="Back to where you were"),
    ]

    def __init__(self, notices: Sequence[Notice]) -> None:
        super().__init__()
        self.notices = list(notices)

    def compose(self) -> ComposeResult:
        count = len(self.notices)
        title = f"Notices: {count}, newest first" if count else "Notices"
        yield Static(f"{title}   (Esc: back)", id="notices-status")
        log = Log(id="notices-log", highlight=False, auto_scroll=False)
        yield log
        yield Footer()

    def on_mount(self) -> None:
        log = self.query_one(Log)
        lines = notice_lines(self.notices)
        log.write_lines(lines or ["No notices yet in this session."])
        log.scroll_home(animate=False)
        log.focus()

    def action_close(self) -> None:
        self.dismiss(None)
