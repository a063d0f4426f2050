"""The console's side of the usage screen: open it, ask the head.

The screen posts ``UsageScreen.Wanted``; an app worker (group ``usage``, one at a
time: a newer request cancels an older one) sends two read-only ``usage`` requests
over the head link, by user with the hours and by group, parses both answers
(``UsageReport.parse``: cleaned, clamped, never raising) and hands them to the
screen, or one line saying why there is nothing: no head configured, the head
unreachable (and why), a head too old to know ``usage``, or the head's refusal in
its own words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.app import App

from gputui.common.i18n import _
from gputui.common.text import clean
from gputui.scheduler.client.errors import HeadError
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.head.usage_view import UsageReport
from gputui.ui.screens.usage import REFRESH_S, UsageScreen

USAGE_TIMEOUT_S = 20.0
"""A head answers a month of hours in milliseconds; past this it is said, not waited on."""


def usage_problem(exc: HeadError) -> str:
    """One line for a ``usage`` request that got no answer."""
    if exc.code == "unknown-op":
        return _("the head is too old to answer usage requests (upgrade it)")
    if exc.code == "unsupported":  # the scheduler cannot count usage: its own line
        return clean(exc.message, 300)
    said = _("head unreachable ({reason})").split("{reason}", 1)[0]
    if exc.message.startswith(("head unreachable", said)):  # the link's line, whole
        return clean(exc.message, 300)
    if exc.code == "unreachable":  # the connection went while the head was asked
        return clean(_("head unreachable ({reason})").format(reason=exc.message), 300)
    return clean(_("the head refused usage: {why}").format(why=exc.message), 300)


class UsageActions:
    """``U``: the usage screen and its reads of the head's accounting."""

    def __init__(self, app: App[None], asks: HeadRequests, clock: Callable[[], float]) -> None:
        self.app = app
        self.asks = asks
        self.clock = clock
        self.refresh_s: float = REFRESH_S
        """How long the usage screen waits after an answer before it asks again."""

    def open_usage(self) -> None:
        """Push the usage screen (once: ``U`` on it closes it)."""
        app = self.app
        if any(isinstance(screen, UsageScreen) for screen in app.screen_stack):
            return

        def closed(_: None) -> None:
            app.workers.cancel_group(app, "usage")

        app.push_screen(UsageScreen(clock=self.clock, refresh_s=self.refresh_s), closed)

    def fetch(self, message: UsageScreen.Wanted) -> None:
        """The screen wants figures: ask the head, or say at once why it cannot be asked."""
        link = self.asks.connected(
            lambda why: message.screen.show_problem(message.token, why), "usage"
        )
        if link is not None:
            self.asks.ask_in_worker("usage", _("usage from the head"), self._fetch(link, message))

    async def _fetch(self, link: HeadLink, message: UsageScreen.Wanted) -> None:
        since, until = message.since, message.until
        answers = await asyncio.gather(
            link.ask(
                "usage",
                lambda b: b.usage(
                    since=since, until=until, by="user", hourly=True, timeout=USAGE_TIMEOUT_S
                ),
            ),
            link.ask(
                "usage",
                lambda b: b.usage(since=since, until=until, by="group", timeout=USAGE_TIMEOUT_S),
            ),
            return_exceptions=True,
        )
        for answer in answers:
            if isinstance(answer, HeadError):
                message.screen.show_problem(message.token, usage_problem(answer))
                return
            if isinstance(answer, Exception):  # a bug: said on the screen, refreshes go on
                why = _("usage failed: {error}").format(error=f"{type(answer).__name__}: {answer}")
                message.screen.show_problem(message.token, clean(why, 300))
                return
            if isinstance(answer, BaseException):
                raise answer
        users, groups = answers
        message.screen.show_usage(
            message.token,
            UsageReport.parse(users, since=since, until=until, by="user"),
            UsageReport.parse(groups, since=since, until=until, by="group"),
        )
