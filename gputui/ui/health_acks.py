"""Acknowledging health problems from the console: at the head when there is one.

Without a head an acknowledgement lives in this console's board. With a head, the
head's board keeps them (in its database, for every console and ``gputui health``):
``a`` sends ``health_ack``, and while the health view is open the console reads the
head's acknowledgements every few seconds, so one admin's note shows on every
admin's screen and goes when the head drops it (the problem changed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gputui.health.board import Ack, HealthBoard, Problem
from gputui.health.head_answer import HeadBoard
from gputui.scheduler.client import HeadError
from gputui.text import clean
from gputui.ui.head_link import HeadLink
from gputui.ui.head_requests import HeadRequests

ACKS_EVERY_S = 5.0
"""How often the open health view reads the head's acknowledgements."""


class HealthAcks(HeadRequests):
    """Acknowledgements for ``GpuTuiApp`` (a mixin)."""

    health: HealthBoard
    login: str = ""

    def acknowledge_problem(self, problem: Problem, note: str, shown: Callable[[], None]) -> None:
        """Acknowledge ``problem`` with ``note``; ``shown`` once the board has it."""
        if self.head_link is None:
            if self.health.acknowledge(problem.key, self.login or "you", note, self.clock()):
                shown()
            return
        link = self._link("acknowledge")
        if link is not None:
            self._request("acknowledge", self._acknowledge(link, problem, note, shown))

    async def _acknowledge(
        self, link: HeadLink, problem: Problem, note: str, shown: Callable[[], None]
    ) -> None:
        done = await self._call(
            link, "acknowledge", "health_ack", {"key": problem.key, "note": note}
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
        self.health.share_ack(problem.key, ack)
        self.notify(
            f"{clean(problem.finding.title, 96)}: acknowledged at the head",
            title="acknowledged",
            markup=False,
        )
        shown()

    def refresh_head_acks(self) -> None:
        """Read the head's acknowledgements again (when it is up; quietly otherwise:
        the last ones read stay)."""
        link = self.head_link
        if link is None or not link.connected:
            return
        self.ask_in_worker("health-acks", "reading the head's acknowledgements", self._acks(link))

    async def _acks(self, link: HeadLink) -> None:
        try:
            answer: Any = await link.call("health", {})
        except HeadError:  # the last acks read stay; the next read tries again
            return
        if isinstance(answer, Mapping):
            self.health.share_acks(HeadBoard(answer).acks())
