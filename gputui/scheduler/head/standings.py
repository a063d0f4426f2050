"""The one set of standing figures (fair-share factors, quota use) the head works by.

Usage moves slowly and a pass must not read a month of allocations, so the figures
are worked out again every ``REFRESH_S`` of the head's clock, in the writer's
transaction, and kept here. Every reader takes them from here: the scheduling
pass, ``explain`` and ``quota`` (on the reader thread), so what a person is told
is what the scheduler decides by. A fresh head works them out before its first
pass (``Head._load``).

Each refresh also judges again the quota standing of the work that holds GPUs:
a job placed within its group's quota that crosses it while it runs is marked
over quota (and so may be preempted by work within quota), and one whose group
falls back within quota (a new week) is no longer.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import explain_reads
from gputui.scheduler.policy.shares import Standing
from gputui.scheduler.store.api import Tx

REFRESH_S = 60.0
"""How often the figures are worked out again from the allocations (head clock)."""

JUDGED = ("starting", "running")
"""The states of a job whose quota standing a refresh judges again (a stopping job
is already on its way out)."""


class Standings:
    """Holds the current ``Standing``; ``at`` refreshes it when it is due."""

    def __init__(self, config: Callable[[], SchedulerConfig]) -> None:
        self._config = config
        self._current: Standing | None = None

    @property
    def current(self) -> Standing:
        """The figures in force (before the first refresh: everyone equal)."""
        return self._current if self._current is not None else Standing()

    def due(self, now: float) -> bool:
        held = self._current
        return held is None or now - held.at >= REFRESH_S or now < held.at

    def at(self, tx: Tx, now: float) -> tuple[Standing, bool]:
        """The figures for a pass at ``now``, refreshed first when due; and whether a
        running job's quota standing changed (the pass must then look at victims)."""
        changed = self.refresh(tx, now) if self.due(now) else False
        return self.current, changed

    def refresh(self, tx: Tx, now: float) -> bool:
        """Work the figures out again and judge running jobs by them; whether any
        running job's standing changed."""
        config = self._config()
        standing = explain_reads.standing_of(tx, config, now)
        changed = False
        for job in tx.jobs(JUDGED):
            over = standing.over_quota(job.group, job.pool)
            if job.over_quota != over:
                job.over_quota = over
                changed = True
        self._current = standing  # one assignment: a reader sees the old or the new
        return changed
