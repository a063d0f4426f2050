"""The head's own tasks: whether each is alive, how long since it last made progress,
and what happens when one dies.

The head depends on a few long-lived tasks: the writer (every change goes through
it), the scheduling pass it runs in every batch, the host watch (samples and job
reports from the hosts), the timer (claim expiry, kill deadlines, ownership and
health ticks) and the pusher (state to consoles). When one of them ends, the head
must not go on answering half-alive: its death is logged with its traceback, and
the head stops (``Head.run`` raises ``HeadDied``; ``gputui head`` exits non-zero,
so systemd starts it again). ``ping`` reports each, and ``gputui head --check``
judges that report (``problems``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.common.text import clean

log = logging.getLogger("gputui.scheduler.head.daemon")  # one logger for the head

STALE_S: Mapping[str, float] = {
    "writer": 30.0,
    "scheduler": 30.0,
    "hosts": 300.0,
    "timer": 30.0,
}
"""Seconds without progress after which a part counts as stuck. The timer hands the
writer an item every second, and every batch ends in a scheduling pass, so a healthy
head's writer and scheduler move every second or so; the hosts send a sample every
few seconds while any answers."""


class HeadDied(Exception):
    """A task the head depends on ended: the head stopped (its line says which, why)."""


@dataclass(slots=True)
class _Part:
    task: asyncio.Task[None] | None
    """None: a part of another task's work (the scheduler runs in the writer)."""
    within: str | None
    last: float
    stale_after_s: float | None


class Liveness:
    """The head's tasks and their progress (on the head's loop)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._parts: dict[str, _Part] = {}
        self._closing = False
        self.died: str | None = None
        """Which task ended and why (one line), once one did."""
        self.dead = asyncio.Event()
        self._failing_since: float | None = None
        """Since when every batch failed with an internal error (None: one committed)."""

    def start(self, name: str, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` as the head's task ``name``: should it ever end while the head
        is not closing, the head stops."""
        task = asyncio.get_running_loop().create_task(work, name=f"gputui-head-{name}")
        self._parts[name] = _Part(task, None, self._clock(), STALE_S.get(name))
        task.add_done_callback(lambda t: self._ended(name, t))
        return task

    def part(self, name: str, within: str) -> None:
        """``name`` is work done inside the task ``within`` (alive while it is)."""
        self._parts[name] = _Part(None, within, self._clock(), STALE_S.get(name))

    def progress(self, name: str) -> None:
        part = self._parts.get(name)
        if part is not None:  # (a part not started has nothing to report)
            part.last = self._clock()

    def committed(self) -> None:
        """The writer committed a batch, which ended in a scheduling pass."""
        self._failing_since = None
        self.progress("writer")
        self.progress("scheduler")

    def failed(self, *, internal: bool) -> None:
        """The writer could not commit a batch. A bug that fails every batch (the
        timer's included) leaves nothing done: after as long as a stuck writer is
        allowed, the writer ends (raises here) rather than answer ``internal`` for
        ever. The store's own failures (a full disk) are said to each client instead."""
        self.progress("writer")
        if not internal:
            return
        now = self._clock()
        if self._failing_since is None:
            self._failing_since = now
        elif now - self._failing_since > STALE_S["writer"]:
            raise RuntimeError(f"every batch failed for {STALE_S['writer']:g} s")

    def closing(self) -> None:
        """The head is stopping: its tasks end because it cancels them."""
        self._closing = True

    def _ended(self, name: str, task: asyncio.Task[None]) -> None:
        if self._closing:
            return
        if task.cancelled():
            why = "it was cancelled"
            exc: BaseException | None = None
        else:
            exc = task.exception()
            why = "it returned" if exc is None else f"{type(exc).__name__}: {exc}"
        line = f"the {name} task ended ({why})"
        log.critical("head: %s; stopping the head so that it is started again", line, exc_info=exc)
        if self.died is None:
            self.died = line.splitlines()[0][:300]
        self.dead.set()

    def _alive(self, part: _Part) -> bool:
        if part.within is not None:
            return self._alive(self._parts[part.within])
        return part.task is not None and not part.task.done()

    def report(self) -> dict[str, dict[str, Any]]:
        """Each part: alive, seconds since its last progress, and its limit."""
        now = self._clock()
        return {
            name: {
                "alive": self._alive(part),
                "idle_s": round(max(0.0, now - part.last), 3),
                "stale_after_s": part.stale_after_s,
            }
            for name, part in self._parts.items()
        }


def problems(report: Any) -> list[str]:
    """What is wrong in ``ping``'s ``tasks`` (one line each; empty: healthy)."""
    if not isinstance(report, dict) or not report:
        return ["the head does not report its tasks (a head older than this client?)"]
    out = []
    for name in sorted(report, key=str):
        part, shown = report[name], clean(str(name), 40)
        idle = part.get("idle_s") if isinstance(part, dict) else None
        limit = part.get("stale_after_s") if isinstance(part, dict) else None
        if not isinstance(part, dict) or not isinstance(idle, int | float):
            out.append(f"{shown}: unreadable report")
        elif part.get("alive") is not True:
            out.append(f"{shown}: dead")
        elif isinstance(limit, int | float) and idle > limit:
            out.append(f"{shown}: no progress for {idle:.0f} s (limit {limit:g} s)")
    return out
