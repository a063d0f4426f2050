"""``HostFeed``: what one host's helper says, made into the snapshot the console shows.

A ``HostLink`` keeps the host connected; its feed turns each message of the session
into a new immutable ``HostSnapshot`` handed to ``publish``, and keeps what a snapshot
is built from: the recent events, the notes about the session, when the last line and
the last sample came. The per-sample path (``line_handler``) is one decode, one
snapshot replace and the publish call, nothing more.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gputui.fleet.failures import HelperFailure
from gputui.fleet.session import HelperSession, check_versions
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import (
    MAX_NOTES,
    Event,
    Hello,
    HelperError,
    Jobs,
    Pty,
    Result,
    Sample,
    UnknownMessage,
)

__all__ = ["EVENTS_KEPT", "UNKNOWN_TYPES_NOTED", "HostFeed", "noted"]

EVENTS_KEPT = 200
UNKNOWN_TYPES_NOTED = 8
"""Unknown message types noted per session (each once); more are ignored unnoted."""


def noted(notes: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    """``notes`` with ``new`` added, each once, the newest ``MAX_NOTES`` kept."""
    merged = tuple(dict.fromkeys((*notes, *new)))
    return merged[-MAX_NOTES:]


class HostFeed:
    """One host's snapshot, kept current from its helper's messages."""

    def __init__(
        self,
        snapshot: HostSnapshot,
        publish: Callable[[HostSnapshot], None],
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``wall_clock``: what a snapshot's ``received_at`` and ``jobs_seen_at`` are
        read from (the wall clock; a simulated one where a benchmark drives the head's
        clock, so that its samples are not all stale to the head)."""
        self.snapshot = snapshot
        self._publish = publish
        self._wall_clock = wall_clock
        self.samples_received = 0
        self.last_rx = 0.0
        """Loop time of the last line from the helper: silence this long is a hang."""
        self.last_sample = 0.0
        """Loop time of the last sample (or the hello): staleness counts from here."""
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self._unknown_types: set[str] = set()
        self.terminals: dict[int, Callable[[Pty], None]] = {}
        """Attached terminals' listeners by attachment id (``fleet.terminal``)."""

    def set(self, **changes: Any) -> None:
        """A new snapshot with ``changes``, published."""
        self.snapshot = new = replace(self.snapshot, **changes)
        self._publish(new)

    def hello(self, hello: Hello) -> None:
        """A new session's ``hello``: what is about one session starts again. Raises
        ``HelperFailure`` when the helper could not start NVML."""
        self.last_rx = self.last_sample = asyncio.get_running_loop().time()
        # A new helper sends the whole kernel-log history again: drop the copy kept
        # from the last session (NVML events happened once each and are kept).
        kept = [e for e in self._events if e.source != "kernel-log"]
        if len(kept) != len(self._events):
            self._events = deque(kept, maxlen=EVENTS_KEPT)
            self.set(events=tuple(kept))
        # Notes are about one session: a new helper may well know what the old did not.
        self._unknown_types.clear()
        if self.snapshot.notes:
            self.set(notes=())
        nvml_error = hello.errors.get("nvml")
        if nvml_error:
            message = f"NVML: {nvml_error}"
            self.set(hello=hello, status=HostStatus.NVML_ERROR, message=message)
            raise HelperFailure(HostStatus.NVML_ERROR, message)
        self.set(hello=hello, status=HostStatus.LIVE, message="", next_retry_at=None)

    # -- the hot path -----------------------------------------------------------------

    def line_handler(self, session: HelperSession) -> Callable[[bytes], None]:
        """The per-line callback, run inside asyncssh's ``data_received``."""
        loop_time = asyncio.get_running_loop().time
        wall_time = self._wall_clock
        live = HostStatus.LIVE
        publish = self._publish

        def on_line(line: bytes) -> None:
            if not line or line.isspace():
                return
            message = decode_helper_line(line)
            self.last_rx = loop_time()
            if type(message) is Sample:  # exact type checks: cheapest dispatch
                self.last_sample = self.last_rx
                self.samples_received += 1
                snap = self.snapshot
                if snap.status is live:
                    self.snapshot = new = replace(snap, sample=message, received_at=wall_time())
                    publish(new)
                else:
                    self.set(sample=message, received_at=wall_time(), status=live, message="")
            elif type(message) is Result:
                future = session.pending.get(message.id)
                if future is not None and not future.done():
                    future.set_result(message)
            elif type(message) is Event:
                self._events.append(message)
                self.set(events=tuple(self._events))
            elif type(message) is Jobs:
                # The full list each time: the latest replaces the last (it coalesces).
                if message.notes:
                    notes = noted(self.snapshot.notes, message.notes)
                    self.set(jobs=message.jobs, jobs_seen_at=wall_time(), notes=notes)
                else:
                    self.set(jobs=message.jobs, jobs_seen_at=wall_time())
            elif type(message) is Pty:
                listener = self.terminals.get(message.aid)
                if listener is not None:
                    if message.kind != "out":
                        del self.terminals[message.aid]  # its last message
                    listener(message)
            elif type(message) is HelperError:
                if message.fatal:
                    raise HelperFailure(HostStatus.NVML_ERROR, message.message, slow=True)
                self.set(message=message.message)
            elif type(message) is UnknownMessage:
                self._on_unknown(message.type)
            elif type(message) is Hello:
                check_versions(message)
                self.set(hello=message)

        return on_line

    def terminals_lost(self, why: str) -> None:
        """The session ended: every terminal attached through it is closed."""
        listeners, self.terminals = self.terminals, {}
        for aid, listener in listeners.items():
            listener(Pty(aid=aid, kind="closed", why=why))

    def _on_unknown(self, kind: str) -> None:
        """A newer helper's message type: ignored, and said once per type per session."""
        if kind in self._unknown_types or len(self._unknown_types) >= UNKNOWN_TYPES_NOTED:
            return
        self._unknown_types.add(kind)
        note = f"ignored messages of unknown type {kind!r} (a newer helper?)"
        self.set(notes=noted(self.snapshot.notes, (note,)))
