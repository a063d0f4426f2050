"""The console's side of the audit screen, mixed into the app: open it, ask the head.

The screen posts ``AuditScreen.Wanted``; an app worker (group ``audit``, one at a
time) sends a read-only ``audit`` request over the head link and hands the parsed
rows (``parse_rows``: cleaned, never raising) to the screen, or one line saying why
there are none: no head configured, the head unreachable, or its refusal.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.scheduler.client import HeadError
from gputui.ui.head.link import HeadLink
from gputui.ui.head.usage import UsageActions
from gputui.ui.screens.audit import LIMIT, AuditScreen, parse_rows

AUDIT_TIMEOUT_S = 20.0


class AuditActions(UsageActions):
    """The audit part of ``GpuTuiApp`` (a mixin, under ``HeadActions``)."""

    head_link: HeadLink | None = None
    clock: Callable[[], float]

    def open_audit(self) -> None:
        if any(isinstance(screen, AuditScreen) for screen in self.screen_stack):
            return

        def closed(_: None) -> None:
            self.workers.cancel_group(self, "audit")

        self.push_screen(AuditScreen(clock=self.clock), closed)

    def on_audit_screen_wanted(self, message: AuditScreen.Wanted) -> None:
        link = self.connected_head(lambda why: message.screen.show_problem(message.token, why))
        if link is not None:
            self.ask_in_worker(
                "audit", "the audit trail from the head", self._fetch_audit(link, message)
            )

    async def _fetch_audit(self, link: HeadLink, message: AuditScreen.Wanted) -> None:
        try:
            answer = await link.call("audit", {"limit": LIMIT}, timeout=AUDIT_TIMEOUT_S)
        except HeadError as exc:
            message.screen.show_problem(message.token, f"the head: {exc.message}")
            return
        message.screen.show_rows(message.token, parse_rows(answer))
