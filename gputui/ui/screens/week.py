"""The week screen: the team's booking board (``W``).

GPUs down the side (``p``: pools, each line counting its cards booked or held),
seven days across from today (``[`` and ``]`` step a week), bookings, active claims,
running jobs and waiting jobs at their estimated start as bars
(``gputui.ui.widgets.week_board``), a legend naming each booking and estimated job.
Like the usage screen it never talks to the head itself: it
posts ``Wanted`` with the week, the app asks the head for the bookings in it and
hands back ``show_week`` or ``show_problem``; it asks again ``refresh_s`` after the
last answer, and an answer to an older request is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from gputui.common.i18n import N_, _, ngettext
from gputui.common.text import clean
from gputui.ui.widgets.footer import TranslatedFooter
from gputui.ui.widgets.week_board import (
    DAY_S,
    DAYS,
    Bar,
    BoardRow,
    WeekBoard,
    board_lines,
    day_text,
)

REFRESH_S = 60.0
SCROLLBAR = 2
"""Cells the board's vertical scrollbar takes (its gutter is always kept)."""


def midnight(t: float) -> float:
    """Local midnight of the day holding ``t``."""
    day = time.localtime(t)
    return time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0, 0, 0, -1))


class WeekScreen(Screen[None]):
    """The booking board: a week of bookings, claims and jobs, per GPU or per pool."""

    DEFAULT_CSS = """
    WeekScreen #week-scroll { scrollbar-gutter: stable; scrollbar-size-vertical: 2; }
    WeekScreen #week-status { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,W", "close", N_("Back"), tooltip=N_("Back to the GPUs")),
        Binding("r", "refresh", N_("Refresh"), tooltip=N_("Ask the head again now")),
        Binding("left_square_bracket", "step(-1)", N_("Week back"), tooltip=N_("The week before")),
        Binding("right_square_bracket", "step(1)", N_("Week on"), tooltip=N_("The week after")),
        Binding("t", "step(0)", N_("Today"), tooltip=N_("The week from today")),
        Binding("p", "pools", N_("GPUs/pools"), tooltip=N_("A line per GPU, or per pool")),
    ]

    @dataclass
    class Wanted(Message):
        """``screen`` wants the board over ``since``..``until``; its answer carries ``token``."""

        screen: WeekScreen
        since: float
        until: float
        token: int

    def __init__(
        self, *, clock: Callable[[], float] = time.time, refresh_s: float = REFRESH_S
    ) -> None:
        super().__init__()
        self.clock = clock
        self.refresh_s = refresh_s
        self.weeks = 0
        """Weeks from this one (``[`` and ``]``)."""
        self.pools = False
        """A line per pool (``p``), not per GPU."""
        self.rows: tuple[BoardRow, ...] = ()
        self.bars: tuple[Bar, ...] = ()
        self.problem: str | None = None
        self.note: str | None = None
        """What the board lacks (its estimates could not be had), under its key."""
        self.asking = False
        self.updated_at: float | None = None
        self.requests = 0
        self._token = 0
        self._timer: Timer | None = None
        self.lines: list[str] = []
        """What the board shows now (tests read it)."""

    @property
    def since(self) -> float:
        return midnight(self.clock() + self.weeks * DAYS * DAY_S)

    def compose(self) -> ComposeResult:
        yield Static("", id="week-status")
        with VerticalScroll(id="week-scroll"):
            yield WeekBoard("", id="week-board")
        yield TranslatedFooter()

    def on_mount(self) -> None:
        self.ask()

    @property
    def token(self) -> int:
        return self._token

    def ask(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._token += 1
        self.requests += 1
        self.asking = True
        since = self.since
        self.post_message(self.Wanted(self, since, since + DAYS * DAY_S, self._token))
        self._status()

    def _answered(self, token: int) -> bool:
        if token != self._token or not self.is_attached:
            return False
        self.asking = False
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.refresh_s, self.ask, name="week-refresh")
        return True

    def show_week(
        self,
        token: int,
        rows: Sequence[BoardRow],
        bars: Sequence[Bar],
        note: str | None = None,
    ) -> None:
        """The GPUs and what is on them this week, for request ``token``; ``note``:
        what the board lacks (no estimates from this head), in a line."""
        if not self._answered(token):
            return
        self.rows, self.bars, self.problem = tuple(rows), tuple(bars), None
        self.note = None if note is None else clean(note, 200)
        self.updated_at = self.clock()
        self._status()
        self._draw()

    def show_problem(self, token: int, line: str) -> None:
        """Request ``token`` got no answer: ``line`` says why. What was shown stays."""
        if not self._answered(token):
            return
        self.problem = clean(line, 300)
        self._status()
        if not self.rows:
            self.lines = [_("no bookings to show")]
            self.query_one(WeekBoard).show(self.lines)

    def on_resize(self, _: Resize) -> None:
        if self.rows:
            self._draw()

    def _draw(self) -> None:
        # The board's room: the screen less the scrollbar's gutter (kept whether or not
        # the board is taller than the screen, so a line never wraps under it).
        width = max(40, self.size.width - SCROLLBAR)
        self.lines = board_lines(
            self.rows, self.bars, self.since, width, pools=self.pools, note=self.note
        )
        self.query_one(WeekBoard).show(self.lines)

    def _status(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        text.append(" " + _("gputui week") + " ", "bold reverse")
        if self.problem is not None:
            text.append(f"  !! {self.problem}", "bold red")
        since = self.since
        first, last = day_text(since), day_text(since + (DAYS - 1) * DAY_S + 3600)
        text.append("  " + _("{first} to {last}").format(first=first, last=last))
        text.append("  " + (_("by pool") if self.pools else _("by GPU")))
        booked = sum(1 for b in self.bars if b.booked)
        guessed = sum(1 for b in self.bars if b.estimated)
        if self.updated_at is not None:
            text.append("  " + ngettext("{n} booking", "{n} bookings", booked).format(n=booked))
            if guessed:
                text.append(
                    "  "
                    + ngettext("{n} job estimated", "{n} jobs estimated", guessed).format(n=guessed)
                )
        if self.asking:
            text.append("  " + _("asking the head…"))
        self.query_one("#week-status", Static).update(text)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_refresh(self) -> None:
        self.ask()

    def action_pools(self) -> None:
        self.pools = not self.pools
        self._status()
        if self.rows:
            self._draw()

    def action_step(self, weeks: int) -> None:
        self.weeks = 0 if weeks == 0 else self.weeks + weeks
        self.ask()
