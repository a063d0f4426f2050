"""The console's side of the audit screen: open it, ask the head.

The screen posts ``AuditScreen.Wanted``; an app worker (group ``audit``, one at a
time) sends a read-only ``audit`` request over the head link and hands the parsed
rows (``parse_rows``: cleaned, never raising) to the screen, or one line saying why
there are none: no head configured, the head unreachable, or its refusal.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from gputui.scheduler.client.errors import HeadError
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.screens.audit import LIMIT, AuditScreen, parse_rows

AUDIT_TIMEOUT_S = 20.0


class AuditActions:
    """``A``: the audit screen and its reads of the head's audit trail."""

    def __init__(self, app: App[None], asks: HeadRequests, clock: Callable[[], float]) -> None:
        self.app = app
        self.asks = asks
        self.clock = clock

    def open_audit(self) -> None:
        app = self.app
        if any(isinstance(screen, AuditScreen) for screen in app.screen_stack):
            return

        def closed(_: None) -> None:
            app.workers.cancel_group(app, "audit")

        app.push_screen(AuditScreen(clock=self.clock), closed)

    def fetch(self, message: AuditScreen.Wanted) -> None:
        """The screen wants rows: ask the head, or say at once why it cannot be asked."""
        link = self.asks.connected(
            lambda why: message.screen.show_problem(message.token, why), "audit"
        )
        if link is not None:
            self.asks.ask_in_worker(
                "audit", "the audit trail from the head", self._fetch(link, message)
            )

    async def _fetch(self, link: HeadLink, message: AuditScreen.Wanted) -> None:
        try:
            answer = await link.ask(
                "audit", lambda b: b.audit(limit=LIMIT, timeout=AUDIT_TIMEOUT_S)
            )
        except HeadError as exc:
            message.screen.show_problem(message.token, f"the head: {exc.message}")
            return
        message.screen.show_rows(message.token, parse_rows(answer))
