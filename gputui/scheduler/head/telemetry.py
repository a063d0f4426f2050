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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.scheduler.client.deltas import HostView, diff, host_view
from gputui.scheduler.head import privacy
from gputui.scheduler.server.listener import Connection
from gputui.telemetry import HostSnapshot

log = logging.getLogger(__name__)

_Key = tuple[int, bool]
"""Whose view: (uid, admin) — the privacy rule depends on nothing else."""


@dataclass(slots=True)
class _Subscriber:
    conn: Connection
    request_id: int
    detail: frozenset[str] | None
    """The hosts this console shows in full (None: all); kept for the viewers to come."""
    sent: dict[str, tuple[int, HostView]] = field(default_factory=dict)
    """host -> (its version, the view) last pushed to this console."""
    pushes: int = 0
    catching_up: bool = False


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
        self._private = private
        self._interval = min_interval_s
        self._spawn = spawn
        self._progress = progress
        self._latest: dict[str, tuple[int, HostSnapshot]] = {}
        self._views: dict[str, tuple[int, HostView]] = {}
        """host -> (version, its view), encoded once per version, on demand."""
        self._subs: dict[Connection, _Subscriber] = {}
        self._event = asyncio.Event()
        self.pushed = 0
        """Pushes sent (for tests and the benchmark)."""

    # -- the head's side ---------------------------------------------------------

    def observe(self, snap: HostSnapshot) -> None:
        """The fleet's newest snapshot of a host (kept: encoded only when pushed)."""
        if snap.name not in self._latest and snap.name not in self._order:
            return
        version = self._latest.get(snap.name, (0, snap))[0] + 1
        self._latest[snap.name] = (version, snap)
        if self._subs:
            self._event.set()

    def latest(self, host: str) -> HostSnapshot | None:
        """The last snapshot of ``host`` the fleet brought (None: none yet)."""
        got = self._latest.get(host)
        return None if got is None else got[1]

    # -- the consoles' side --------------------------------------------------------

    def subscribe(
        self, conn: Connection, request_id: int, detail: Sequence[str] | None
    ) -> dict[str, Any]:
        """``conn`` subscribes (again: from nothing); the answer names the hosts, in
        the configured order. Pushes follow, the first with every host in full."""
        self._subs[conn] = _Subscriber(
            conn, request_id, None if detail is None else frozenset(detail)
        )
        self._event.set()
        return {"hosts": list(self._order)}

    def drop(self, conn: Connection) -> None:
        self._subs.pop(conn, None)

    async def run(self) -> None:
        """The pusher: on news, every subscriber's deltas, at most once an interval."""
        while True:
            await self._event.wait()
            self._event.clear()
            try:
                self.push()
            except Exception:  # one failed push must not end every console's stream
                log.exception("head: pushing telemetry failed; trying again on the next news")
            self._progress()
            await asyncio.sleep(self._interval())

    def push(self) -> None:
        """One round: each subscriber that took what it had gets what changed since."""
        private = self._private()
        shown: dict[tuple[str, _Key], HostView] = {}
        diffs: dict[tuple[str, int, int, _Key], dict[str, Any] | None] = {}
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
            deltas = []
            for name, (version, _) in self._latest.items():
                had = sub.sent.get(name)
                if had is not None and had[0] == version:
                    continue
                view = shown.get((name, key))
                if view is None:
                    view = privacy.hide_commands(self._view(name), conn.caller, private)
                    shown[(name, key)] = view
                # Consoles that were sent the same view get the same delta, made once.
                memo = (name, -1 if had is None else had[0], version, key)
                if memo not in diffs:
                    diffs[memo] = diff(name, None if had is None else had[1], view)
                delta = diffs[memo]
                sub.sent[name] = (version, view)
                if delta is not None:
                    deltas.append(delta)
            if deltas or sub.pushes == 0:
                conn.send({"push": "telemetry", "n": sub.pushes, "hosts": deltas})
                sub.pushes += 1
                self.pushed += 1

    def _view(self, name: str) -> HostView:
        version, snap = self._latest[name]
        cached = self._views.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        view = host_view(snap)
        self._views[name] = (version, view)
        return view

    async def _catch_up(self, sub: _Subscriber) -> None:
        try:
            if await sub.conn.flushed():
                self._event.set()
        finally:
            sub.catching_up = False
