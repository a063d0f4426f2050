"""The snapshots' way in: from the telemetry source to the model, in bursts and
slices, with the once-a-second refresh of ages riding along.

The source calls ``on_snapshot`` for each ``HostSnapshot``; the first one since the
last batch was taken posts a ``HostsSampled`` message, and the rest of the burst
joins it until the app handles it. ``apply`` puts a batch into the ``ClusterModel``
for at most ``SLICE_S`` at a time, the rest after a ``SLICE_GAP_S`` pause in which
key presses are handled, and says when the whole burst is in and whether the ages
tick with it. The app owns this object (``GpuTuiApp.intake``) and hands the
changes to the main screen.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from textual.message import Message

from gputui.telemetry import HostSnapshot
from gputui.ui.health_rounds import HealthRounds
from gputui.ui.model import ClusterModel, HostChange

SLICE_S = 0.005
"""Longest the app applies snapshots in one go; input waiting is handled before the rest."""
SLICE_CHECK_EVERY = 4
"""Snapshots applied between two looks at the clock: a host of 8 GPUs takes 0.1-0.2 ms,
so a slice ends within a millisecond of ``SLICE_S``, not up to 32 hosts (5 ms) late."""
SLICE_GAP_S = 0.001
"""Pause between two slices of a burst, for input."""
TICK_WITH_DATA = 0.9
"""A batch of data also refreshes ages and totals when the last refresh is this old (ticks)."""
TICK_ALONE_AFTER = 1.25
"""Without data for this long (ticks), the timer refreshes ages and totals itself."""


@dataclass
class HostsSampled(Message):
    """Hosts have new snapshots: the latest of each, by host name.

    The app posts one of these for a burst of snapshots, not one per snapshot, and
    keeps filling its ``snapshots`` until it is handled, so a thousand hosts that
    sample in the same second cost one message (and one repaint), and a host that
    sampled twice meanwhile is applied once, with its newest state. A burst too big
    to apply at once is applied in slices, with key presses handled in between.
    """

    snapshots: dict[str, HostSnapshot]


class SnapshotIntake:
    """Batches the source's snapshots into ``HostsSampled`` and applies them to
    ``model`` in slices; ``rounds`` gets them too unless a head judges health."""

    def __init__(
        self,
        post: Callable[[Message], object],
        model: ClusterModel,
        rounds: HealthRounds,
        *,
        judge_health: bool,
        tick_interval: float,
    ) -> None:
        self.post = post
        self.model = model
        self.rounds = rounds
        self.judge_health = judge_health
        """No head: the console's own health rounds see every snapshot."""
        self.tick_interval = tick_interval
        self.pending: dict[str, HostSnapshot] = {}
        """Snapshots not yet applied: the batch the last ``HostsSampled`` announced."""
        self._changes: list[HostChange] = []
        """Applied to the model, not yet shown: the rest of their burst is still coming."""
        self.last_tick = self._last_data = -math.inf

    def on_snapshot(self, snapshot: HostSnapshot) -> None:
        """The source's callback: one host's newest snapshot."""
        pending = self.pending
        if not pending:  # the first since the last batch was taken: announce the batch
            self.post(HostsSampled(pending))
        pending[snapshot.name] = snapshot

    def apply(self, message: HostsSampled, *, shown: bool) -> tuple[list[HostChange], bool] | None:
        """Apply a slice of ``message``'s batch; once the whole burst is in and the main
        screen is ``shown``: its changes, and whether the ages tick with them."""
        snapshots = message.snapshots
        if snapshots is self.pending:
            self.pending = {}
        apply, changes = self.model.apply, self._changes
        deadline = time.perf_counter() + SLICE_S
        left = iter(snapshots.values())
        # With a head, the health view shows the head's board: nothing to judge here.
        health = self.rounds.pending if self.judge_health else {}
        for snapshot in left:
            changes.append(apply(snapshot))
            health[snapshot.name] = snapshot
            if not len(changes) % SLICE_CHECK_EVERY and time.perf_counter() > deadline:
                break
        rest = {snapshot.name: snapshot for snapshot in left}
        if rest:
            # The rest follows after a short pause in which the event loop reads the
            # terminal and a key press goes all the way to the screen (several hops
            # between message queues); a newer snapshot that came meanwhile
            # replaces its host's older one.
            pending = self.pending
            if not pending:
                self.pending = rest
                asyncio.get_running_loop().call_later(SLICE_GAP_S, self.post, HostsSampled(rest))
            else:
                for name, snapshot in rest.items():
                    pending.setdefault(name, snapshot)
            return None
        if not shown:
            # A snapshot that lands while the app starts or shuts down: the changes
            # stay for the first batch after the main screen is there.
            return None
        self._changes = []
        now = time.monotonic()
        self._last_data = now
        # The once-a-second refresh of ages and totals rides along with the data, so
        # they are one repaint, not two.
        tick = now - self.last_tick >= self.tick_interval * TICK_WITH_DATA
        if tick:
            self.last_tick = now
        return changes, tick

    def tick_alone(self) -> bool:
        """The timer's turn: True when no data came for a while, so it refreshes the
        ages itself (data flowing, the batches tick)."""
        now = time.monotonic()
        if now - self._last_data < self.tick_interval * TICK_ALONE_AFTER:
            return False
        self.last_tick = now
        return True
