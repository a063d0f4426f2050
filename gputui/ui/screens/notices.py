"""The notices screen (``N``): every notice of this session, newest first, in full;
``h`` switches to your notice history as the head keeps it (every job start and end,
preemption, claim, fence and quota notice, read or not: what ``gputui notices --all``
lists and your chat channels are sent).

A toast shows one line for a few seconds; here each notice has its time, its
severity as a word (readable without colour), its title and every line of its
text. A line is never wrapped: a copied env line stands alone on its row, whole,
where a mouse (tmux's too) can select it; a line wider than the screen scrolls.
The screen never talks to the head itself: ``h`` posts ``Wanted``; the app asks
the head (``notices``) in a worker and hands back ``show_history`` or
``show_problem``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Log, Static

from gputui.common.i18n import N_, _
from gputui.common.job_words import notice_kind_text
from gputui.common.text import cells, clean
from gputui.ui.notices import Notice
from gputui.ui.widgets.footer import TranslatedFooter
from gputui.wire.words import shown

LEVELS = {"information": N_("info"), "warning": N_("warn"), "error": N_("error")}
LEVEL_CELLS = 5
HISTORY_MAX = 200
"""The head's newest notices asked for (its own cap)."""


def notice_lines(notices: Sequence[Notice]) -> list[str]:
    """The screen's lines: ``HH:MM:SS level title: first line``, then any further
    line of the notice alone on its own row."""
    out: list[str] = []
    for notice in notices:
        when = time.strftime("%H:%M:%S", time.localtime(notice.at))
        known = notice.severity in LEVELS
        level = _pad(_(LEVELS[notice.severity])) if known else notice.severity[:5]
        first, *rest = notice.lines
        head = f"{notice.title}: {first}" if notice.title else first
        out.append(f"{when}  {level}  {head}")
        out.extend(rest)
    return out


def _pad(text: str, width: int = LEVEL_CELLS) -> str:
    """``text`` and spaces to ``width`` cells (never cut)."""
    return text + " " * max(0, width - cells(text))


@dataclass(frozen=True, slots=True)
class HeadNoticeRow:
    """One notice as the head keeps it."""

    time: float
    kind: str
    text: str
    unread: bool


def parse_history(answer: object) -> list[HeadNoticeRow]:
    """The head's ``notices`` answer (oldest first) as rows, newest first; whatever is
    malformed in it is left out, never raised."""
    rows = answer.get("notices") if isinstance(answer, Mapping) else None
    out: list[HeadNoticeRow] = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, Mapping):
            continue
        at = row.get("time")
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 <= at < 2**40:
            continue
        out.append(
            HeadNoticeRow(
                time=float(at),
                kind=clean(row.get("kind"), 12),
                text=clean(
                    shown(clean(row.get("text"), 512), row.get("msg"), row.get("args")), 512
                ),
                unread=row.get("unread") is True,
            )
        )
    return out[::-1]


def history_lines(rows: Sequence[HeadNoticeRow]) -> list[str]:
    """``MM-DD HH:MM:SS * kind text`` (``*``: not shown to you before)."""
    return [
        f"{time.strftime('%m-%d %H:%M:%S', time.localtime(r.time))} {'*' if r.unread else ' '}"
        f" {_pad(notice_kind_text(r.kind), 10)} {r.text}"
        for r in rows
    ]


class NoticesScreen(Screen[None]):
    """The history of notices; ``h`` the head's history of yours; Esc (or N) goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,N", "close", N_("Back"), tooltip=N_("Back to where you were")),
        Binding(
            "h",
            "history",
            N_("Head's history"),
            tooltip=N_("Your notices as the head keeps them (h again: this session's)"),
        ),
    ]

    @dataclass
    class Wanted(Message):
        """``screen`` wants your notice history from the head; its answer carries
        ``token``."""

        screen: NoticesScreen
        token: int

    def __init__(self, notices: Sequence[Notice]) -> None:
        super().__init__()
        self.notices = list(notices)
        self.history = False
        """Showing the head's history (else this session's notices)."""
        self.token = 0

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="notices-status")
        log = Log(id="notices-log", highlight=False, auto_scroll=False)
        yield log
        yield TranslatedFooter()

    def _title(self) -> str:
        count = len(self.notices)
        if not count:
            return _("Notices   (h: the head's history of yours; Esc: back)")
        return _(
            "Notices: {count}, newest first   (h: the head's history of yours; Esc: back)"
        ).format(count=count)

    def on_mount(self) -> None:
        self._session()
        self.query_one(Log).focus()

    def _session(self) -> None:
        lines = notice_lines(self.notices)
        self._show(lines or [_("No notices yet in this session.")])
        self.query_one("#notices-status", Static).update(self._title())

    def _show(self, lines: list[str]) -> None:
        log = self.query_one(Log)
        log.clear()
        log.write_lines(lines)
        log.scroll_home(animate=False)

    def action_history(self) -> None:
        self.token += 1  # an answer still on its way is for the view left
        self.history = not self.history
        if not self.history:
            self._session()
            return
        self.query_one("#notices-status", Static).update(
            _("Your notices, as the head keeps them: asking the head …   (h: this session's)")
        )
        self._show([])
        self.post_message(self.Wanted(self, self.token))

    def show_history(self, token: int, rows: list[HeadNoticeRow]) -> None:
        if token != self.token or not self.history:
            return  # an answer to an older question
        if rows:
            said = _(
                "Your notices, as the head keeps them: the newest {count}, newest first"
                " (*: new)   (h: this session's; Esc: back)"
            ).format(count=len(rows))
        else:
            said = _(
                "Your notices, as the head keeps them: none yet, newest first (*: new)"
                "   (h: this session's; Esc: back)"
            )
        self.query_one("#notices-status", Static).update(said)
        self._show(history_lines(rows) or [_("The head keeps no notice of yours.")])

    def show_problem(self, token: int, problem: str) -> None:
        if token != self.token or not self.history:
            return
        self.query_one("#notices-status", Static).update(
            _("Your notices, as the head keeps them: {problem}   (h: this session's)").format(
                problem=clean(problem, 200)
            )
        )

    def action_close(self) -> None:
        self.dismiss(None)
