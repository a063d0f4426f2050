"""The health view with a head: the head's board, and acknowledging problems on it.

Without a head the console judges its own snapshots (``HealthBoard``) and an
acknowledgement lives in this console's board. With a head, the view shows the
head's board (``SharedBoard``): the same problems ``gputui health`` and every other
console show, first seen when the head first saw them, with the head's own (fences,
drains, flagged processes, idle jobs) and the Xids it received. While the view is open
it reads the board every few seconds; ``a`` sends ``health_ack``, which the head keeps
(in its database, for every console) and drops when the problem changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from textual.app import App

from gputui.common.i18n import N_, _
from gputui.common.text import clean
from gputui.health.board import Ack, HealthBoard, Problem
from gputui.health.head_answer import HeadBoard
from gputui.health.words import shown as shown_words
from gputui.scheduler.client.errors import HeadError
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.screens.health import HealthScreen

HEAD_BOARD_EVERY_S = 5.0
"""How often the open health view reads the head's board."""


class SharedBoard:
    """The head's board as this console last read it (what the view shows with a head)."""

    def __init__(self) -> None:
        self.board: HeadBoard | None = None
        self.read_at: float | None = None
        self.failure: str | None = None
        """Why the last read failed (None: it did not)."""

    def problems(self) -> list[Problem]:
        return [] if self.board is None else self.board.problems()

    def unknown(self) -> dict[str, list[tuple[int, str, str]]]:
        return {} if self.board is None else self.board.unknown()

    def take(self, answer: Mapping[str, Any], now: float) -> None:
        self.board, self.read_at, self.failure = HeadBoard(answer), now, None

    def acknowledged(self, key: str, ack: Ack) -> None:
        """One acknowledgement the head just took (shown before the board is next read)."""
        if self.board is not None:
            self.board.acknowledged(key, ack)

    def note(self) -> tuple[bool, str]:
        """(whether there is a board to show, a line about where it comes from)."""
        if self.board is None:
            if self.failure:
                return False, _("reading the head's board: {why}").format(why=self.failure)
            return False, _("reading the head's board…")
        if self.failure is not None and self.read_at is not None:
            at = time.strftime("%H:%M:%S", time.localtime(self.read_at))
            said = _("the head's board as read at {time} ({why})")
            return True, said.format(time=at, why=self.failure)
        return True, _("the head's board")


class HealthActions:
    """The health view (``h``) and acknowledging problems, with a head or without one."""

    def __init__(
        self,
        app: App[None],
        asks: HeadRequests,
        local: HealthBoard,
        clock: Callable[[], float],
    ) -> None:
        self.app = app
        self.asks = asks
        self.local = local
        """This console's own board (what the view shows without a head)."""
        self.clock = clock
        self.board = SharedBoard()
        """The head's board as last read (what the view shows with a head)."""
        self.login = this_user()
        """Who acknowledges a problem where there is no head."""

    def showing(self) -> bool:
        """Whether the health view is open already."""
        return any(isinstance(screen, HealthScreen) for screen in self.app.screen_stack)

    def open_view(self) -> None:
        """The health view, of the head's board with a head, else this console's."""
        if self.showing():
            return
        link = self.asks.link
        self.app.push_screen(
            HealthScreen(
                self.local if link is None else self.board,
                clock=self.clock,
                user=self.login,
                may_acknowledge=self._may_ack,
                acknowledge=self.acknowledge,
                refresh_board=None if link is None else self.refresh_board,
                refresh_board_s=HEAD_BOARD_EVERY_S,
                note=None if link is None else self.board.note,
            )
        )

    def _may_ack(self) -> str | None:
        """With a head, only its admins acknowledge problems (as the head says who is),
        where its scheduler can keep acknowledgements at all."""
        link = self.asks.link
        lacking = link.lacks(("health_ack",)) if link is not None else None
        if lacking is not None:
            return lacking
        view = self.asks.view
        return view.me.refused(N_("acknowledge problems")) if view is not None else None

    def acknowledge(self, problem: Problem, note: str, shown: Callable[[], None]) -> None:
        """Acknowledge ``problem`` with ``note``; ``shown`` once the board has it."""
        if self.asks.link is None:
            if self.local.acknowledge(problem.key, self.login or "you", note, self.clock()):
                shown()
            return
        link = self.asks.usable(N_("acknowledge"), "health_ack")
        if link is not None:
            self.asks.request(N_("acknowledge"), self._acknowledge(link, problem, note, shown))

    async def _acknowledge(
        self, link: HeadLink, problem: Problem, note: str, shown: Callable[[], None]
    ) -> None:
        done = await self.asks.call(
            link, N_("acknowledge"), "health_ack", lambda b: b.health_ack(problem.key, note)
        )
        if not isinstance(done, Mapping):
            return
        said = done.get("acknowledged")
        said = said if isinstance(said, Mapping) else {}
        by = said.get("by")
        ack = Ack(
            clean(by, 64) if isinstance(by, str) else self.login,
            clean(note, 512),
            self.clock(),
            (),
        )
        self.board.acknowledged(problem.key, ack)
        self.app.notify(
            _("{problem}: acknowledged at the head").format(
                problem=clean(shown_words(problem.finding.title), 96)
            ),
            title=_("acknowledged"),
            markup=False,
        )
        shown()

    def refresh_board(self) -> None:
        """Read the head's board again (when it is up; otherwise the last one read
        stays, and the view says since when)."""
        link = self.asks.link
        if link is None:
            return
        if not link.connected:
            self.board.failure = _("the head is unreachable")
            return
        lacking = link.lacks(("health",))
        if lacking is not None:
            self.board.failure = lacking
            return
        self.asks.ask_in_worker(
            "health-board", _("reading the head's health board"), self._read(link)
        )

    async def _read(self, link: HeadLink) -> None:
        try:
            answer: Any = await link.ask("health", lambda b: b.health())
        except HeadError as exc:  # the last board read stays; the next read tries again
            self.board.failure = clean(exc.message, 120)
            return
        if isinstance(answer, Mapping):
            self.board.take(answer, self.clock())


def this_user() -> str:
    """Who acknowledges a problem from this console."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
