"""Constructed ``usage`` answers and a head that gives them over a real Unix socket.

``FakeUsageHead`` speaks the head's JSON-lines protocol on a real socket (a thread
per connection, so it serves the console whatever event loop the test runs in):
``subscribe`` gets a minimal state, ``usage`` the answer ``answer(args)`` builds
(or the error it raises), any other op the head's own unknown-op error. It stands
in for the accounting side of the head, which answers ``usage`` from its tables;
everything between it and the screen (the head link, the client, JSON) is real.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ui_fakes import NOW

DAY = 86_400.0
WEEK = 7 * DAY
PRESENT = 16.0
"""GPUs present every hour of the constructed week (so 16 GPU-hours an hour)."""
DAY_HOURS = range(8, 20)
"""Hours (UTC) of the working day: busy; the rest is a night of idle held cards."""

USERS = [
    # key, allocated GPU-h, busy GPU-h, kWh, cost
    ("alice", 200.0, 150.0, 60.0, 120.0),
    ("bob", 100.0, 20.0, 25.0, 60.0),
    ("carol", 50.0, 50.0, 20.0, 30.0),
]
GROUPS = [("ml", 250.0, 170.0, 80.0, 150.0), ("vision", 100.0, 50.0, 25.0, 60.0)]


def totals(rows: list[tuple[str, float, float, float, float]]) -> list[dict[str, Any]]:
    return [
        {"key": k, "alloc_gpu_h": a, "busy_gpu_h": b, "energy_kwh": e, "cost": c}
        for k, a, b, e, c in rows
    ]


def week_hours(until: float = NOW, days: float = 7) -> list[dict[str, Any]]:
    """Every hour of the range: busy days (80%), idle nights (5% busy, 60% held)."""
    first = int((until - days * DAY) // 3600) * 3600
    hours = []
    for start in range(first, int(until), 3600):
        day = time.gmtime(start).tm_hour in DAY_HOURS
        hours.append(
            {
                "hour": start,
                "gpu_h": PRESENT,
                "alloc_gpu_h": PRESENT * (0.9 if day else 0.6),
                "busy_gpu_h": PRESENT * (0.8 if day else 0.05),
            }
        )
    return hours


def usage_answer(args: dict[str, Any]) -> dict[str, Any]:
    """What the accounting side answers for ``args`` (the agreed shape)."""
    since = float(args.get("since") or NOW - WEEK)
    until = float(args.get("until") or NOW)
    by = args.get("by", "user")
    return {
        "since": since,
        "until": until,
        "by": by,
        "currency": "EUR",
        "rows": [],
        "totals": totals(USERS if by == "user" else GROUPS),
        "hours": week_hours(until, (until - since) / DAY) if args.get("hourly") else [],
    }


class HeadRefusal(Exception):
    """Raised by an ``answer`` function: the head answers with this error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class FakeUsageHead:
    """The head's socket, answering ``usage`` with ``answer`` (None: an older head)."""

    path: Path
    answer: Callable[[dict[str, Any]], dict[str, Any]] | None = usage_answer
    delay_s: float = 0.0
    """How long each ``usage`` answer takes (a slow head), not a synchronisation."""
    held: bool = False
    """Answer no ``usage`` request until ``hang_up`` (a head that stops mid-request)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """The ``usage`` requests' args, in the order they came."""
    events: list[tuple[str, int]] = field(default_factory=list)
    """("asked", n) / ("answered", n) for the n-th ``usage`` request, in order."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    connections: list[socket.socket] = field(default_factory=list)
    _release: threading.Event = field(default_factory=threading.Event)
    down = False

    def hang_up(self) -> None:
        """Drop every connection and take no more: the head is gone."""
        self._release.set()
        with self.lock:
            self.down = True
            for conn in self.connections:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

    def usage_args(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests)

    def respond(self, message: dict[str, Any]) -> dict[str, Any]:
        op, args, ident = message.get("op"), message.get("args") or {}, message.get("id")
        if op == "subscribe":
            state = {"me": {"uid": 1000, "user": "alice", "admin": False}}
            return {"id": ident, "ok": True, "result": {"state": state, "seq": 1}}
        if op != "usage" or self.answer is None:
            error = {"code": "unknown-op", "message": f"unknown op {str(op)[:40]!r}"}
            return {"id": ident, "ok": False, "error": error}
        with self.lock:
            self.requests.append(args)
            number = len(self.requests)
            self.events.append(("asked", number))
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.held:
            self._release.wait(timeout=30)
        try:
            reply = {"id": ident, "ok": True, "result": self.answer(args)}
        except HeadRefusal as refusal:
            reply = {
                "id": ident,
                "ok": False,
                "error": {"code": refusal.code, "message": refusal.message},
            }
        with self.lock:
            self.events.append(("answered", number))
        return reply


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        head: FakeUsageHead = self.server.head  # type: ignore[attr-defined]
        with head.lock:
            if head.down:
                return
            head.connections.append(self.connection)
        write_lock = threading.Lock()

        def answer(message: dict[str, Any]) -> None:
            reply = json.dumps(head.respond(message)).encode() + b"\n"
            with write_lock, contextlib.suppress(OSError):  # the console went away
                self.wfile.write(reply)
                self.wfile.flush()

        for line in self.rfile:
            # Each request answered in a thread of its own, as the head answers
            # them concurrently (a slow one does not hold up the next).
            threading.Thread(target=answer, args=(json.loads(line),), daemon=True).start()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextmanager
def fake_usage_head(path: Path, **options: Any) -> Iterator[FakeUsageHead]:
    """Serve ``FakeUsageHead(path, **options)`` on ``path`` until the block ends."""
    head = FakeUsageHead(path, **options)
    server = _Server(str(path), _Handler)
    server.head = head  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield head
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
