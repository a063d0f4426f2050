"""The console's own health checks (no head): rounds over the snapshots that came
meanwhile, run in slices so a key press is never stuck behind one.

A board of a few thousand GPUs is too much work at every sample, so the app keeps
the latest snapshot of each host in ``pending`` and runs a round every few seconds
(or at once, when the health view opens). A round longer than ``slice_s`` goes on
after a ``gap_s`` pause in which the event loop handles input. With a head there
are no rounds: the health view shows the head's board.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable

from gputui.health.board import HealthBoard
from gputui.telemetry import HostSnapshot


class HealthRounds:
    """Feeds ``board`` the snapshots in ``pending``, a round at a time, in slices."""

    def __init__(
        self,
        board: HealthBoard,
        clock: Callable[[], float],
        *,
        slice_s: float,
        gap_s: float,
    ) -> None:
        self.board = board
        self.clock = clock
        self.slice_s = slice_s
        self.gap_s = gap_s
        self.pending: dict[str, HostSnapshot] = {}
        """The newest snapshot of each host since the last round began."""
        self._todo: deque[HostSnapshot] = deque()
        """The round under way."""
        self._next: asyncio.TimerHandle | None = None

    def run(self, *, at_once: bool = False) -> None:
        """Start a round on ``pending``; ``at_once``: finish it (and any under way) now."""
        if self._todo and not at_once:
            return  # the last round is still going: what came meanwhile waits for the next
        self._todo.extend(self.pending.values())
        self.pending = {}
        self._slice(at_once=at_once)

    def _slice(self, *, at_once: bool = False) -> None:
        if self._next is not None:
            self._next.cancel()
            self._next = None
        todo, observe = self._todo, self.board.observe
        now = self.clock()
        deadline = math.inf if at_once else time.perf_counter() + self.slice_s
        while todo:
            observe(todo.popleft(), now)
            if todo and time.perf_counter() > deadline:
                loop = asyncio.get_running_loop()
                self._next = loop.call_later(self.gap_s, self._slice)
                return
