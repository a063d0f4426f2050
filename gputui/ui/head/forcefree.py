"""The console's force-free key (``F``): free a GPU for good, step by step.

``F`` on a GPU asks why, then opens ``ForceFreeScreen`` and asks the head to
``force_free`` the card; the steps the head pushes as they end go to the modal, then
the verdict. Admins only (the head refuses anyone else, and the console says so
first when the head has told it who this user is).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App

from gputui.common.i18n import N_, _
from gputui.scheduler.client.errors import HeadError
from gputui.ui.gpu_view import GpuRow, Row
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.screens.confirm import ReasonScreen
from gputui.ui.screens.forcefree import ForceFreeScreen

FORCE_FREE_TIMEOUT_S = 900.0
"""A run waits a grace period and a sample or two; a reset can take minutes."""


class ForceFreeActions:
    """``F`` on the main screen, and the run's steps as the head pushes them."""

    def __init__(self, app: App[None], asks: HeadRequests) -> None:
        self.app = app
        self.asks = asks
        self.screen: ForceFreeScreen | None = None
        """The modal of the run under way (None once its answer came)."""

    def force_free_row(self, row: Row | None) -> None:
        asks = self.asks
        link = asks.usable(N_("force-free"), "force_free")
        if link is None:
            return
        if not isinstance(row, GpuRow):
            asks.refuse(N_("force-free"), _("select a GPU first"))
            return
        view = link.view
        refused = view.me.refused(N_("force-free a GPU")) if view is not None else None
        if refused:
            asks.refuse(N_("force-free"), refused)
            return
        what = _("{host} GPU {index}").format(host=row.host, index=row.index)
        question = Text(_("Force-free {what}?").format(what=what) + "\n", "bold")
        question.append(
            _(
                "It drains the card, kills its jobs, releases its claims, SIGTERMs then"
                " SIGKILLs every process on it, and checks that the memory came back."
            )
        )

        def answered(reason: str | None) -> None:
            if not reason:
                return
            screen = ForceFreeScreen(what, reason)
            self.screen = screen
            self.app.push_screen(screen)
            asks.request(
                _("force-free {what}").format(what=what), self._send(link, screen, row, reason)
            )

        self.app.push_screen(ReasonScreen(question, _("Force-free")), answered)

    async def _send(
        self, link: HeadLink, screen: ForceFreeScreen, row: GpuRow, reason: str
    ) -> None:
        host, gpu = row.host, str(row.index)
        try:
            answer = await link.ask(
                "force_free",
                lambda b: b.force_free(
                    host=host, gpu=gpu, reason=reason, timeout=FORCE_FREE_TIMEOUT_S
                ),
            )
        except HeadError as exc:
            screen.done(None, exc.message)
            return
        finally:
            if self.screen is screen:
                self.screen = None
        screen.done(answer)

    def step(self, step: Any) -> None:
        """A step of the run, as it ended at the head: shown on its modal."""
        if self.screen is not None:
            self.screen.step(step)
