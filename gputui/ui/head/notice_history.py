"""The console's side of the notices screen's ``h``: your notice history, asked of the
head.

The screen posts ``NoticesScreen.Wanted``; an app worker (group ``notices``, one at
a time) sends ``notices`` (``all``: the newest, read or not; those unread are marked
read, as shown) over the head link and hands the parsed rows (``parse_history``:
cleaned, never raising) to the screen, or one line saying why there are none: no
head configured, the head unreachable, or its refusal.
"""

from __future__ import annotations

from gputui.scheduler.client.errors import HeadError
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.screens.notices import NoticesScreen, parse_history

HISTORY_TIMEOUT_S = 20.0


class NoticeHistory:
    """``N`` then ``h``: the reads of the head's notices of this user."""

    def __init__(self, asks: HeadRequests) -> None:
        self.asks = asks

    def fetch(self, message: NoticesScreen.Wanted) -> None:
        """The screen wants the history: ask the head, or say at once why it cannot."""
        link = self.asks.connected(
            lambda why: message.screen.show_problem(message.token, why), "notices"
        )
        if link is not None:
            self.asks.ask_in_worker(
                "notices", "your notice history from the head", self._fetch(link, message)
            )

    async def _fetch(self, link: HeadLink, message: NoticesScreen.Wanted) -> None:
        try:
            answer = await link.ask(
                "notices", lambda b: b.notices(all=True, timeout=HISTORY_TIMEOUT_S)
            )
        except HeadError as exc:
            message.screen.show_problem(message.token, f"the head: {exc.message}")
            return
        message.screen.show_history(message.token, parse_history(answer))
