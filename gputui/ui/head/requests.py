"""How the console's screens ask the head: the one base of the scheduler mixins.

A request that cannot be made says why at once (no head configured, the head
unreachable and why); one the head refuses shows the head's own words. The work
runs in app-owned workers, never on the screen's own time.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from gputui.scheduler.client import HeadError
from gputui.ui.head.link import HeadLink
from gputui.ui.model import ClusterModel

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object


class HeadRequests(_Base):
    """Asking the head, for ``GpuTuiApp`` (a mixin)."""

    head_link: HeadLink | None = None
    clock: Callable[[], float]
    model: ClusterModel

    def _link(self, what: str) -> HeadLink | None:
        """The link when a request can be sent now; else say why ``what`` cannot be done."""
        return self.connected_head(lambda why: self._refuse(what, why))

    def _refuse(self, what: str, why: str) -> None:
        self.notify(why, title=f"cannot {what}", severity="error", timeout=8, markup=False)

    def _request(self, what: str, work: Coroutine[Any, Any, None]) -> None:
        self.run_worker(
            work,
            group="head-request",
            description=what,
            exclusive=False,
            exit_on_error=False,
        )

    async def _call(self, link: HeadLink, what: str, op: str, args: dict[str, Any]) -> Any:
        """``op``'s result, or None after saying why it failed."""
        try:
            return await link.call(op, args)
        except HeadError as exc:
            self._refuse(what, exc.message)
            return None

    def connected_head(self, problem: Callable[[str], None]) -> HeadLink | None:
        """The head link when it is up; else None, and ``problem`` says why in one line."""
        link = self.head_link
        if link is None:
            problem("no head configured (add a head: section to hosts.yaml)")
            return None
        if not link.connected:
            problem(f"head unreachable ({link.reason or 'not connected'})")
            return None
        return link

    def ask_in_worker(self, group: str, description: str, work: Coroutine[Any, Any, None]) -> None:
        """Run a screen's request to the head in the app's worker ``group`` (a newer one
        cancels an older one)."""
        self.run_worker(
            work,
            name=group,
            group=group,
            description=description,
            exclusive=True,
            exit_on_error=False,
        )
