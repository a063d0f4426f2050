"""How the console's scheduler side asks the head: ``HeadRequests``, shared by its parts.

It holds the one ``HeadLink`` (None without a ``head:`` section, or before the app
has started it). A request that cannot be made says why at once (no head configured,
the head unreachable and why); one the head refuses shows the head's own words. The
work runs in app-owned workers, never on a screen's own time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from textual.app import App

from gputui.common.i18n import _
from gputui.scheduler.client.backend import Answer, AsyncBackend
from gputui.scheduler.client.errors import HeadError
from gputui.ui.head.link import HeadLink
from gputui.ui.head.view import HeadView


class HeadRequests:
    """The link to the head and the app's workers that ask over it."""

    def __init__(self, app: App[None]) -> None:
        self.app = app
        self.link: HeadLink | None = None
        """The one link to the head; None without a head (or before it starts)."""

    @property
    def view(self) -> HeadView | None:
        """The newest state the head pushed; None before the first (or without a head)."""
        return self.link.view if self.link is not None else None

    def usable(self, what: str, *needs: str) -> HeadLink | None:
        """The link when a request can be sent now and the scheduler can do each of
        ``needs`` (capabilities); else say why ``what`` cannot be done."""
        return self.connected(lambda why: self.refuse(what, why), *needs)

    def refuse(self, what: str, why: str) -> None:
        """An error toast: ``cannot {what}`` (``what`` marked ``N_`` where it is written,
        or already in the reader's language), and why."""
        title = _("cannot {what}").format(what=_(what))
        self.app.notify(why, title=title, severity="error", timeout=8, markup=False)

    def connected(self, problem: Callable[[str], None], *needs: str) -> HeadLink | None:
        """The head link when it is up and its scheduler can do each of ``needs``; else
        None, and ``problem`` says why in one line."""
        link = self.link
        if link is None:
            problem(_("no head configured (add a head: section to hosts.yaml)"))
            return None
        if not link.connected:
            reason = link.reason or _("not connected")
            problem(_("head unreachable ({reason})").format(reason=reason))
            return None
        return link if self.able(link, problem, *needs) else None

    def able(self, link: HeadLink, problem: Callable[[str], None], *needs: str) -> bool:
        """Whether the scheduler can do each of ``needs``; if not, ``problem`` says so."""
        lacking = link.lacks(needs)
        if lacking is not None:
            problem(lacking)
        return lacking is None

    def request(self, what: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (a request that changes something) in an app worker."""
        self.app.run_worker(
            work,
            group="head-request",
            description=what,
            exclusive=False,
            exit_on_error=False,
        )

    async def call(
        self,
        link: HeadLink,
        what: str,
        op: str,
        request: Callable[[AsyncBackend], Awaitable[Answer]],
    ) -> Answer | None:
        """The answer to ``request`` (which uses capability ``op``), or None after
        saying why it failed."""
        try:
            return await link.ask(op, request)
        except HeadError as exc:
            self.refuse(what, exc.shown)
            return None

    def ask_in_worker(self, group: str, description: str, work: Coroutine[Any, Any, None]) -> None:
        """Run a screen's request to the head in the app's worker ``group`` (a newer one
        cancels an older one)."""
        self.app.run_worker(
            work,
            name=group,
            group=group,
            description=description,
            exclusive=True,
            exit_on_error=False,
        )
