"""``HeadChannel``: a console's one connection to the head, shared by its parts.

A console on a head has two parts that talk to it: the scheduler side (requests, and
the ``subscribe`` stream of state and notices) and the telemetry source (the
``telemetry`` stream). Both ride one connection (``reach.open_head``: the socket
here, or SSH to ``head.host``); the wire tells their answers apart by request id and
their pushes by kind (``aio.stream_of``).

One loop keeps it: open, run each attached part's ``follow`` on it, and when it ends
(the head closed it, it dropped, or a part failed: the connection is dropped for
all), tell every part why (``away``) and open it again after a growing wait, which
starts over once a part got going on a connection (its ``ready``). A part attached
while connected starts on the connection there is; one that leaves (``serve``
cancelled) stops, and the connection stays for the others. The loop stops when the
last part leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from gputui.common.i18n import _
from gputui.common.tasks import within
from gputui.common.text import clean, error_line
from gputui.config.models import Config
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.errors import HeadError

BACKOFF_FIRST_S = 0.5
BACKOFF_CAP_S = 30.0


class Carrier(Protocol):
    """What a channel keeps open: the head's client (or what stands in for it)."""

    @property
    def closed_reason(self) -> str | None: ...

    async def close(self) -> None: ...


C = TypeVar("C", bound=Carrier)
C_contra = TypeVar("C_contra", contravariant=True)


class ChannelPart(Protocol[C_contra]):
    """One user of the connection."""

    async def follow(self, conn: C_contra, ready: Callable[[], None]) -> None:
        """Subscribe on ``conn`` and take its pushes until it ends (return) or this
        part cannot go on (raise: the connection is dropped, for every part, and
        opened again). ``ready()`` once subscribed: the next wait starts over."""
        ...

    def away(self, why: str) -> None:
        """The connection is gone (or could not be had), for the reason ``why``."""
        ...


def describe(exc: BaseException) -> str:
    """One line for what a transport or a part raised."""
    return exc.shown if isinstance(exc, HeadError) else error_line(exc, 300)


class HeadChannel(Generic[C]):
    """One connection, opened by ``opener``, kept for the parts it serves."""

    def __init__(
        self,
        opener: Callable[[], Awaitable[C]],
        *,
        backoff_first: float = BACKOFF_FIRST_S,
        backoff_cap: float = BACKOFF_CAP_S,
    ) -> None:
        self._opener = opener
        self.backoff = (backoff_first, backoff_cap)
        self._parts: dict[ChannelPart[C], asyncio.Task[None] | None] = {}
        self._loop: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._ended = asyncio.Event()
        self._why: str | None = None
        self._ready = False
        self.conn: C | None = None
        """The connection now (None while away)."""
        self.problem: str | None = None
        """Why there is none (None while connected, or before the first try)."""
        self.opened = 0
        """Connections opened (for tests and the benchmark)."""

    @classmethod
    def to_head(
        cls,
        config: Config,
        *,
        backoff_first: float = BACKOFF_FIRST_S,
        backoff_cap: float = BACKOFF_CAP_S,
    ) -> HeadChannel[AsyncHeadClient]:
        """The channel to hosts.yaml's head (``reach.open_head``)."""
        from gputui.scheduler.client.reach import open_head

        async def opener() -> AsyncHeadClient:
            return await open_head(config)

        return HeadChannel(opener, backoff_first=backoff_first, backoff_cap=backoff_cap)

    @property
    def parts(self) -> int:
        return len(self._parts)

    async def serve(self, part: ChannelPart[C]) -> None:
        """Run ``part`` on the connection, kept open (and opened again) until this is
        cancelled; the last part to leave ends the loop and closes the connection."""
        if part in self._parts:
            raise RuntimeError("this part is already served")
        self._parts[part] = None
        if self.conn is not None:
            self._start(part, self.conn)
        elif self.problem is not None:
            part.away(self.problem)
        if self._loop is None or self._loop.done():
            self._loop = asyncio.get_running_loop().create_task(self._run())
        try:
            await asyncio.shield(self._loop)  # ends only by a bug: raised to the caller
        finally:
            task = self._parts.pop(part, None)
            if task is not None:
                await _cancel(task)
            if not self._parts and self._loop is not None:
                await _cancel(self._loop)
                self._loop = None

    def retry_now(self) -> None:
        """Skip the rest of the wait before the next attempt."""
        self._wake.set()

    def _start(self, part: ChannelPart[C], conn: C) -> None:
        self._parts[part] = asyncio.get_running_loop().create_task(self._follow(part, conn))

    def _mark_ready(self) -> None:
        self._ready = True

    async def _follow(self, part: ChannelPart[C], conn: C) -> None:
        try:
            await part.follow(conn, self._mark_ready)
        except asyncio.CancelledError:
            raise  # the part left (or the connection ended): not an end of its own
        except Exception as exc:  # one line, then the connection is opened again
            if self._why is None:
                self._why = describe(exc)
        self._ended.set()

    async def _run(self) -> None:
        first, cap = self.backoff
        delay = first
        while True:
            self._ready = False
            try:
                conn = await self._opener()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # anything the transport raised: one line, retried
                why = describe(exc)
            else:
                why = await self._hold(conn)
            self.problem = why = clean(why, 300)
            for part in list(self._parts):
                part.away(why)
            if self._ready:
                delay = first
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self._wake.wait(), random.uniform(delay / 2, delay))
            delay = min(cap, delay * 2)

    async def _hold(self, conn: C) -> str:
        """Run every part on ``conn`` until one of them ends; why it ended."""
        self.opened += 1
        self._ended.clear()
        self._why = None
        self.conn, self.problem = conn, None
        try:
            for part in list(self._parts):
                self._start(part, conn)
            await self._ended.wait()
        finally:
            self.conn = None
            for part, task in list(self._parts.items()):
                if task is not None:
                    if self._parts.get(part) is task:
                        self._parts[part] = None
                    await _cancel(task)
            with contextlib.suppress(Exception):
                await conn.close()
        return self._why or conn.closed_reason or _("the head closed the connection")


async def _cancel(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait until it has ended, whatever it raised."""
    task.cancel()
    await asyncio.wait({task})
