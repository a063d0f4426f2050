"""``TelemetryHub``: the head's own fleet's samples, pushed to the consoles that
subscribed (``telemetry``), as deltas.

The daemon hands it every snapshot its fleet brings (``observe``): kept, never
encoded until some console is subscribed. The pusher (``run``) wakes on news, at most
once every ``state_push_min_s``, and sends each subscriber, per host that changed
since its last push, only what differs from what that console was last sent
(``deltas.diff``): the first push is everything. Nothing is collected on request:
what a console gets is the head's last collection.

A console that has not taken what it was sent gets nothing more until it has; then
one push brings it from what it had to the latest (a diff against what it was last
sent, however many samples came meanwhile), so a slow console costs one push and
never a backlog; one that takes nothing for ``send_stall_s`` is dropped (as for the
state push). Process command lines follow ``scheduler.private_data`` (``privacy``).

Viewers: a console says which hosts it shows (``telemetry`` ``detail``, then
``telemetry_view`` whenever its view changes) and gets those in full; every other host
comes as its summary (``deltas.summary_view``: the grid's rows, no processes' detail or
health readings). A host that comes into view is sent what turns its summary into the
full view at the next push, and one that leaves it what turns it back. A console that
never says gets every host in full. A summary is sent once every ``summary_every_s``
(at once when the host's status or a GPU's state changes: a host lost, a card fallen
off the bus), and waits at most ``SUMMARY_BATCH_S`` and a push interval more (below):
the rows off screen are that old at most, and their stale limit says so. That is
5 s, or longer on a fleet of more than five times ``SUMMARY_HOSTS_PER_S`` hosts, so that
a console decodes at most that many summaries a second however big the fleet (20 s at
1,000 hosts): what a console costs does not grow with the hosts it does not show, and
a host scrolled into view is sent in full at the next push. Each host's turn comes at
the same moment for every console (its ``_phase``), so the
consoles that were sent the same summary share one delta.

Summaries ride along: a push round that would send a console only summaries holds
them until ``SUMMARY_BATCH_S`` after the last round that handled that console, and a
push of the hosts it shows takes them sooner. A console is woken by what it shows, at most every
``state_push_min_s``, and for what it does not show at most once a
``SUMMARY_BATCH_S``, not at every push round (a wakeup costs a console about as much
as a few summaries do). A view change, a new subscription and an alarm go at once.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from gputui.common.i18n import N_
from gputui.common.tasks import within
from gputui.common.text import clean
from gputui.scheduler.client.deltas import HostView, diff, host_view, summary_view
from gputui.scheduler.client.ops import MAX_VIEWED_HOSTS
from gputui.scheduler.head import privacy
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.telemetry import HostSnapshot
from gputui.wire.words import say

log = logging.getLogger(__name__)

_Key = tuple[int, bool]
"""Whose view: (uid, admin) — the privacy rule depends on nothing else."""
SUMMARY_EVERY_S = 5.0
"""How often a host a console does not show is sent to it (its status: at once)."""
SUMMARY_HOSTS_PER_S = 50.0
"""Summaries a console is sent a second at most: on a fleet bigger than this many
hosts a second for ``SUMMARY_EVERY_S``, each comes less often."""
SUMMARY_BATCH_S = 1.0
"""A push of summaries alone waits until this long after the console's last push (a
summary's stale limit grows by as much and a push interval)."""
_WAKE_LATE_S = 1e-3
"""The pusher wakes this much after a summary turn or a hold's end, never before it."""
_Alarm = tuple[str, tuple[str, ...]]
"""What sends a summary at once when it changes: the host's status, its GPUs' states."""
_Sent = tuple[int, bool, HostView, int, _Alarm]
"""What a console was last sent of a host (``_Subscriber.sent``)."""
ALARMS_KEPT = 1024
"""Alarms kept for a console that has not taken a push (a stalled reader), beyond
twice the hosts: past that, it looks at every host at its next push instead."""


@dataclass(slots=True)
class _Subscriber:
    conn: Connection
    request_id: int
    detail: frozenset[str] | None
    """The hosts this console shows in full (None: all); the rest get their summary."""
    gpu: tuple[str, int] | None = None
    """The GPU the console has selected (its host is in ``detail``)."""
    sent: dict[str, _Sent] = field(default_factory=dict)
    """host -> (its version, whether in full, the view, the summary turn, its alarm)
    last pushed."""
    pushes: int = 0
    catching_up: bool = False
    pushed_at: float = 0.0
    """When a round last handled it, sending all that was due or nothing if nothing was
    (``time.monotonic``): the summary turns since are due."""
    alarms_seen: int = 0
    """The hub's alarm count at that push: the alarms since are due."""
    owed: set[str] = field(default_factory=set)
    """Hosts due at a push that had nothing new for it yet (or whose place in the view
    changed): looked at again at each push until sent."""
    moved: bool = False
    """Its view changed since its last push: the next push goes at once."""


class TelemetryHub:
    """The telemetry subscriptions: the latest snapshot of each host, and each console's."""

    def __init__(
        self,
        hosts: Sequence[str],
        *,
        private: Callable[[], bool],
        min_interval_s: Callable[[], float],
        spawn: Callable[[Coroutine[Any, Any, Any]], None],
        progress: Callable[[], None] = lambda: None,
    ) -> None:
        self._order = list(hosts)
        self._watched = frozenset(self._order)
        self._private = private
        self._interval = min_interval_s
        self._spawn = spawn
        self._progress = progress
        self._latest: dict[str, tuple[int, HostSnapshot]] = {}
        self._alarms: dict[str, _Alarm] = {}
        """host -> its latest snapshot's ``_Alarm``."""
        self._views: dict[tuple[str, bool], tuple[int, HostView]] = {}
        """(host, in full) -> (version, its view), made once per version, on demand."""
        self._subs: dict[Connection, _Subscriber] = {}
        self._event = asyncio.Event()
        self._phase: dict[str, float] = {}
        """host -> where its summary turns fall in ``summary_every_s`` (spread evenly)."""
        self._turns: list[tuple[float, str]] = []
        """(when in ``summary_every_s`` a host's turn comes, host), sorted: the hosts
        whose turn came between two pushes, found without a look at every host."""
        self._alarm_log: list[str] = []
        """The hosts whose ``_Alarm`` changed (or that came for the first time), in
        order; entry ``i`` is alarm number ``_alarm_base + i``."""
        self._alarm_base = 0
        self._deferred = False
        """The last round handled a console that shows some hosts: the next of its
        summary turns wakes the pusher, news or not."""
        self._held_until: float | None = None
        """The last round held a console's summaries back until then
        (``time.monotonic``): that wakes the pusher too."""
        self.summary_every_s = max(SUMMARY_EVERY_S, len(self._order) / SUMMARY_HOSTS_PER_S)
        self.pushed = 0
        """Pushes sent (``ping`` tells it)."""
        self.push_cpu_s = 0.0
        """CPU seconds the pusher's rounds took (on the loop's thread), which ``ping``
        tells with how many consoles are subscribed: most of what consoles cost the
        head, not all (the rest of a write the kernel did not take at once, a slow
        console's catch-up, its requests)."""

    # -- the head's side ---------------------------------------------------------

    @property
    def summary_every_s(self) -> float:
        """How often a host a console does not show is sent to it."""
        return self._every

    @summary_every_s.setter
    def summary_every_s(self, seconds: float) -> None:
        self._every = seconds
        self._phase = {
            name: (zlib.crc32(name.encode()) % 997) / 997 * seconds for name in self._order
        }
        self._turns = sorted(((seconds - phase) % seconds, n) for n, phase in self._phase.items())

    def observe(self, snap: HostSnapshot) -> None:
        """The fleet's newest snapshot of a host (kept: encoded only when pushed)."""
        name = snap.name
        if name not in self._watched:
            return
        version = self._latest.get(name, (0, snap))[0] + 1
        self._latest[name] = (version, snap)
        states = () if snap.sample is None else tuple(g.state for g in snap.sample.gpus)
        alarm = (snap.status.value, states)
        if self._alarms.get(name) != alarm:
            self._alarms[name] = alarm
            if self._subs:
                self._alarm_log.append(name)
        if self._subs:
            self._event.set()

    def latest(self, host: str) -> HostSnapshot | None:
        """The last snapshot of ``host`` the fleet brought (None: none yet)."""
        got = self._latest.get(host)
        return None if got is None else got[1]

    # -- the consoles' side --------------------------------------------------------

    def subscribe(
        self,
        conn: Connection,
        request_id: int,
        detail: Sequence[str] | None,
        gpu: tuple[str, int] | None = None,
    ) -> dict[str, Any]:
        """``conn`` subscribes (again: from nothing) showing ``detail`` (None: every
        host) with ``gpu`` selected; the answer names the hosts, in the configured
        order. Pushes follow, the first with every host in full."""
        # A name this head does not watch (one a console kept from another head, or
        # from before hosts.yaml changed) is left out, not refused: the console would
        # only subscribe with it again.
        shown = None
        if detail is not None:
            shown = self._known(detail, gpu, "telemetry", strict=False)
            if gpu is not None and gpu[0] not in shown:
                gpu = None
        self._subs[conn] = _Subscriber(conn, request_id, shown, None if shown is None else gpu)
        self._event.set()
        return {"hosts": list(self._order)}

    def view(self, conn: Connection, hosts: Sequence[str], gpu: tuple[str, int] | None) -> None:
        """``conn`` now shows ``hosts`` and has ``gpu`` selected: those hosts in full from
        the next push, the others as summaries. A bad view (not subscribed, a host the
        head does not watch) raises ``wire.Refusal`` and changes nothing."""
        sub = self._subs.get(conn)
        if sub is None:
            raise wire.Refusal(
                "not-subscribed", say(N_("telemetry_view: no telemetry subscription here"))
            )
        shown = self._known(hosts, gpu, "telemetry_view")
        if shown != sub.detail or gpu != sub.gpu:
            # What comes into view or leaves it is sent at the next push (in full, or
            # back to its summary): every host, when it showed them all.
            moved = set(self._latest) if sub.detail is None else sub.detail ^ shown
            sub.owed.update(moved)
            sub.detail, sub.gpu, sub.moved = shown, gpu, True
            self._event.set()

    def _known(
        self, hosts: Sequence[str], gpu: tuple[str, int] | None, op: str, *, strict: bool = True
    ) -> frozenset[str]:
        """The hosts shown in full: ``hosts`` (at most ``MAX_VIEWED_HOSTS``) and the
        selected GPU's, which the cap does not count."""
        shown = frozenset(hosts)
        if len(shown) > MAX_VIEWED_HOSTS:
            raise wire.Refusal(
                "bad-args",
                say(N_("{op}: more than {most} hosts in view"), op=op, most=MAX_VIEWED_HOSTS),
            )
        if gpu is not None:
            shown |= {gpu[0]}
        unknown = shown - self._watched
        if unknown and not strict:
            return shown - unknown
        if unknown:
            name = clean(min(unknown), 64)
            raise wire.Refusal(
                "bad-args", say(N_("{op}: {name} is no host of this head"), op=op, name=repr(name))
            )
        return shown

    def viewers(self) -> list[tuple[frozenset[str] | None, tuple[str, int] | None]]:
        """Each subscriber's view: the hosts it gets in full (None: all), its GPU."""
        return [(sub.detail, sub.gpu) for sub in self._subs.values()]

    def drop(self, conn: Connection) -> None:
        self._subs.pop(conn, None)

    def stats(self) -> dict[str, Any]:
        """For ``ping``: the consoles subscribed, pushes sent, and the pusher's CPU."""
        return {"subscribers": len(self._subs), "pushed": self.pushed, "cpu_s": self.push_cpu_s}

    async def run(self) -> None:
        """The pusher: on news, every subscriber's deltas (those not held back), at most
        once an interval."""
        while True:
            # Summary turns and held summaries wake it, news or not.
            now = time.monotonic()
            wait = self._next_turn_in(now) if self._deferred else None
            if self._held_until is not None:
                held = max(self._held_until - now, 0.0) + _WAKE_LATE_S
                wait = held if wait is None else min(wait, held)
            with contextlib.suppress(TimeoutError):
                await within(self._event.wait(), wait)
            self._event.clear()
            start = time.thread_time()
            try:
                self.push()
            except Exception:  # one failed push must not end every console's stream
                log.exception("head: pushing telemetry failed; trying again on the next news")
            self.push_cpu_s += time.thread_time() - start
            self._progress()
            await asyncio.sleep(self._interval())

    def push(self) -> None:
        """One round: each subscriber that took what it had gets what changed since,
        unless it would get only summaries within ``SUMMARY_BATCH_S`` of its last round."""
        private = self._private()
        every, now, alarms = self.summary_every_s, time.monotonic(), self._alarms
        self._deferred, self._held_until = False, None
        shown: dict[tuple[str, bool, _Key], HostView] = {}
        diffs: dict[tuple[str, int, bool, int, bool, _Key], dict[str, Any] | None] = {}
        for conn, sub in list(self._subs.items()):
            if conn.closed:
                self._subs.pop(conn, None)
                continue
            if conn.unsent():
                if not sub.catching_up:
                    sub.catching_up = True
                    self._spawn(self._catch_up(sub))
                continue
            key: _Key = (conn.caller.uid, conn.caller.admin)
            detail = sub.detail
            if detail is not None:
                if sub.pushes and now - sub.pushed_at < SUMMARY_BATCH_S and not self._urgent(sub):
                    due_at = sub.pushed_at + SUMMARY_BATCH_S
                    if self._held_until is None or due_at < self._held_until:
                        self._held_until = due_at
                    continue  # only summaries (if anything): they wait for company
                self._deferred = True  # its summaries' turns wake the pusher
            deltas = []
            for name in self._due(sub, now):
                latest = self._latest.get(name)
                if latest is None:
                    continue
                version = latest[0]
                full = detail is None or name in detail
                had = sub.sent.get(name)
                turn, alarm = 0, alarms[name]
                if not full:
                    turn = int((now + self._phase[name]) // every)
                if _current(had, version, full):
                    if full or had[3] == turn:
                        sub.owed.discard(name)
                    else:
                        sub.owed.add(name)  # its turn came with nothing new yet
                    continue
                sub.owed.discard(name)
                if had is not None and not (full or had[1]) and had[3:] == (turn, alarm):
                    continue  # its summary was sent this turn
                # A summary has no command lines: nothing of it depends on the caller.
                who = key if full else (-1, False)
                view = shown.get((name, full, who))
                if view is None:
                    view = self._view(name, full)
                    if full:
                        view = privacy.hide_commands(view, conn.caller, private)
                    shown[(name, full, who)] = view
                # Consoles that were sent the same view get the same delta, made once.
                memo = (name, -1, False, version, full, who)
                if had is not None:
                    memo = (name, had[0], had[1], version, full, key if had[1] else who)
                if memo not in diffs:
                    diffs[memo] = diff(name, None if had is None else had[2], view)
                delta = diffs[memo]
                sub.sent[name] = (version, full, view, turn, alarm)
                if delta is not None:
                    deltas.append(delta)
            sub.pushed_at, sub.moved = now, False
            sub.alarms_seen = self._alarm_end
            if deltas or sub.pushes == 0:
                conn.send({"push": "telemetry", "n": sub.pushes, "hosts": deltas})
                sub.pushes += 1
                self.pushed += 1
        self._forget_alarms()

    @property
    def _alarm_end(self) -> int:
        """The number the next alarm will have (every alarm so far is below it)."""
        return self._alarm_base + len(self._alarm_log)

    def _urgent(self, sub: _Subscriber) -> bool:
        """Whether a push to ``sub`` (which shows ``sub.detail``) goes now: its view
        changed, an alarm came, or a host it shows has news for it."""
        if sub.moved or self._alarm_end > sub.alarms_seen:
            return True
        for name in sub.detail or ():
            latest, had = self._latest.get(name), sub.sent.get(name)
            if latest is not None and not _current(had, latest[0], True):
                return True
        return False

    def _due(self, sub: _Subscriber, now: float) -> Iterable[str]:
        """The hosts a push to ``sub`` looks at: every host at its first push, or when
        it shows them all; else those it shows, those whose summary turn came since its
        last push, those whose alarm changed since, and those it is owed. The few a
        push has news for, not the fleet: a console costs what it shows."""
        if sub.pushes == 0 or sub.detail is None:
            return list(self._latest)
        due = set(sub.detail)
        due.update(sub.owed)
        due.update(self._alarm_log[sub.alarms_seen - self._alarm_base :])
        due.update(self._turned(sub.pushed_at, now))
        return due

    def _turned(self, since: float, now: float) -> list[str]:
        """The hosts whose summary turn came in ``(since, now]`` (a hair wider: one
        more looked at costs nothing, one missed would wait a whole turn)."""
        every, turns, hair = self._every, self._turns, 1e-6
        if now - since >= every - 2 * hair:
            return [name for _, name in turns]
        start, end = since % every - hair, now % every + hair
        low = bisect.bisect_left(turns, (start, ""))
        high = bisect.bisect_right(turns, (end, "\U0010ffff"))
        if start <= end:
            return [name for _, name in turns[low:high]]
        return [name for _, name in turns[low:]] + [name for _, name in turns[:high]]

    def _next_turn_in(self, now: float) -> float:
        """Seconds until the next host's summary turn comes (a hair after it)."""
        every, turns = self._every, self._turns
        if not turns:
            return every
        at = now % every
        later = bisect.bisect_right(turns, (at, "\U0010ffff"))
        offset = turns[later][0] - at if later < len(turns) else every - at + turns[0][0]
        return max(offset, 0.0) + _WAKE_LATE_S

    def _forget_alarms(self) -> None:
        """Drop the alarms every subscriber has had, and bound the rest: a console too
        far behind is owed every host instead (a flapping fleet and a stalled reader
        must not grow the log without end)."""
        if not self._subs:
            self._alarm_base += len(self._alarm_log)
            self._alarm_log.clear()
            return
        seen = min(sub.alarms_seen for sub in self._subs.values())
        end = self._alarm_end
        if end - seen > ALARMS_KEPT + 2 * len(self._order):
            for sub in self._subs.values():
                if sub.alarms_seen < end:
                    sub.owed.update(self._latest)
                    sub.alarms_seen = end
            seen = end
        if seen > self._alarm_base:
            del self._alarm_log[: seen - self._alarm_base]
            self._alarm_base = seen

    def _view(self, name: str, full: bool) -> HostView:
        version, snap = self._latest[name]
        cached = self._views.get((name, full))
        if cached is not None and cached[0] == version:
            return cached[1]
        view = (
            host_view(snap)
            if full
            else summary_view(self._view(name, True), self._summary_wait_s())
        )
        self._views[(name, full)] = (version, view)
        return view

    def _summary_wait_s(self) -> float:
        """How much older than its host's last sample a summary may be when it comes:
        a turn, the wait for company, and a push interval."""
        return self.summary_every_s + SUMMARY_BATCH_S + self._interval()

    async def _catch_up(self, sub: _Subscriber) -> None:
        try:
            if await sub.conn.flushed():
                self._event.set()
        finally:
            sub.catching_up = False


def _current(had: _Sent | None, version: int, full: bool) -> TypeGuard[_Sent]:
    """Whether a console was last sent ``version`` of a host, in full or not as ``full``."""
    return had is not None and had[0] == version and had[1] == full
