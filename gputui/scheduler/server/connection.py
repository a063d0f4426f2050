"""What one client is to the head, and what it may cost: ``Limits`` and ``Connection``.

A connection's unsent bytes are the transport's write buffer; the transport is paused
from the first unsent byte and resumed once all has gone out, so ``flushed`` waits for
exactly that, and a client that leaves it unread for ``send_stall_s`` is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import encode

log = logging.getLogger(__name__)
_LIFETIME = secrets.token_hex(4)

MAX_CONNECTIONS = 4096
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client may cost the head (hosts.yaml's ``head:`` section sets the
    first three)."""

    max_connections: int = MAX_CONNECTIONS
    """Connections the head serves at once, everyone's together."""
    per_user: int = 64
    """Connections one user (by uid) holds at once."""
    request_timeout_s: float = 30.0
    """A connection's first request, and any request begun, must be complete (its
    newline read) within this; otherwise the connection is closed."""
    send_stall_s: float = 60.0
    """A client that leaves what it was sent unread this long is dropped."""
    max_unsent: int = 1 << 20
    """While more than this is unsent to a connection, its next request waits."""
    max_inflight: int = 64
    """A connection's requests worked on at once (the next waits)."""
    line_buffer: int = 16384
    """A partial line beyond this needs a large-line slot."""
    large_lines: int = 8
    """Connections (at most one per user) that may buffer a request over ``line_buffer``."""


DEFAULT_LIMITS = Limits()


class Connection:
    """One client: its identity, its writer, whether it subscribed, and what it costs."""

    def __init__(
        self,
        caller: Caller,
        writer: asyncio.StreamWriter,
        number: int,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.caller = caller
        self.writer = writer
        self.number = number
        self.limits = limits
        self.session = f"c{os.getpid()}-{_LIFETIME}-{number}"
        """Unique across head lifetimes (a restarted head may get the same pid)."""
        self.subscribed = False
        self.closed = False
        self.last_notice = 0
        self.pushed_seq = -1
        """The state seq last pushed to this subscriber."""
        self.catching_up = False
        """A push was held back until what this subscriber was sent has gone out."""
        self.inflight = 0
        """Requests of this connection being worked on (in the inbox or a task)."""
        self._room = asyncio.Event()
        self._room.set()
        with contextlib.suppress(Exception):
            # Paused from the first unsent byte, resumed once all has gone out, so
            # drain() waits for exactly that (see ``flushed``).
            writer.transport.set_write_buffer_limits(high=0, low=0)

    def send(self, obj: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self.writer.write(encode(obj))
        except (OSError, RuntimeError):
            self.closed = True

    def unsent(self) -> int:
        """Bytes written to this connection that the client has not taken yet."""
        try:
            return int(self.writer.transport.get_write_buffer_size())
        except (OSError, RuntimeError, AttributeError):
            return 0

    async def flushed(self) -> bool:
        """Wait until everything sent has gone out; False (and the client dropped)
        when it does not within ``send_stall_s``, or the connection is gone."""
        if self.closed:
            return False
        try:
            async with asyncio.timeout(self.limits.send_stall_s):
                await self.writer.drain()
        except TimeoutError:
            log.warning(
                "head: dropping %s's connection %d: %d bytes unread for %g s",
                self.caller.user,
                self.number,
                self.unsent(),
                self.limits.send_stall_s,
            )
            self.abort()
            return False
        except (OSError, RuntimeError, ConnectionError):
            self.closed = True
            return False
        return not self.closed

    async def drain(self) -> None:
        await self.flushed()

    def abort(self) -> None:
        """Drop the client now, with whatever was not sent to it."""
        self.closed = True
        with contextlib.suppress(Exception):
            self.writer.transport.abort()

    def counted(self, work: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        """``work`` (a request of this connection run as a task), counted in flight
        from now until it ends."""
        self.begin()

        async def run() -> T:
            try:
                return await work
            finally:
                self.end()

        return run()

    def begin(self) -> None:
        self.inflight += 1
        if self.inflight >= self.limits.max_inflight:
            self._room.clear()

    def end(self) -> None:
        self.inflight -= 1
        if self.inflight < self.limits.max_inflight:
            self._room.set()

    async def room(self) -> None:
        """Wait until this connection's next request may be read."""
        if self.unsent() > self.limits.max_unsent:
            await self.flushed()
        while not self.closed and self.inflight >= self.limits.max_inflight:
            await self._room.wait()
