"""The console's asyncio connection to the head (local socket, or a stream through SSH).

One connection carries every request of a console and both of its subscriptions:
answers are paired with their request by ``id``; pushes carry ``push`` and go to a
stream of their own by kind (``pushes("telemetry")`` for the telemetry deltas,
``pushes()`` for everything else: state, notices, force-free steps), so one reader
falling behind never drops the other's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import orjson

from gputui.common.i18n import N_
from gputui.common.tasks import cancel_and_wait, within
from gputui.scheduler.client.backend import Call
from gputui.scheduler.client.errors import HeadError, may_still_apply, unreachable
from gputui.scheduler.client.framing import MAX_LINE, answer_of, new_request_id, request_line
from gputui.scheduler.client.ops import MUTATING
from gputui.wire.words import Words, say, shown

Stream = Literal["state", "telemetry"]
"""Which of a connection's push streams a push goes to (``stream_of``)."""
PUSH_QUEUE = 1000
"""Pushes a stream keeps unread; past that the oldest goes (a slow reader keeps the newest)."""


def stream_of(push: dict[str, Any]) -> Stream:
    """The stream a push belongs to: the telemetry deltas, or the rest."""
    return "telemetry" if push.get("push") == "telemetry" else "state"


class AsyncHeadClient:
    """An asyncio connection to the head (local socket, or a stream through SSH)."""

    def __init__(
        self,
        reader: asyncio.StreamReader | Any,
        writer: asyncio.StreamWriter | Any,
        *,
        closer: Callable[[], Awaitable[None]] | None = None,
        local: bool = True,
    ) -> None:
        """``closer`` ends what carries the stream (an SSH connection) after it;
        ``local``: the head's socket on this machine (not through SSH)."""
        self._reader = reader
        self._writer = writer
        self._closer = closer
        self.local = local
        self._ids = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._watchers: dict[int, Callable[[dict[str, Any]], None]] = {}
        self._streams: dict[Stream, asyncio.Queue[dict[str, Any] | None]] = {
            "state": asyncio.Queue(PUSH_QUEUE),
            "telemetry": asyncio.Queue(PUSH_QUEUE),
        }
        self._task: asyncio.Task[None] | None = None
        self.closed_reason: str | None = None
        """Why the connection ended, in the reader's language (None while open)."""
        self.closed_words: Words | None = None
        """The same in words (what a request made after that is refused with)."""

    @classmethod
    async def open_local(cls, path: str | os.PathLike[str]) -> AsyncHeadClient:
        try:
            reader, writer = await asyncio.open_unix_connection(os.fspath(path), limit=MAX_LINE)
        except OSError as exc:
            raise unreachable(path, exc) from None
        client = cls(reader, writer)
        client.start()
        return client

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    async def _read_loop(self) -> None:
        reason = say(N_("the head closed the connection"))
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    message = orjson.loads(line)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if message.get("push"):
                    self._watch(message)
                    queue = self._streams[stream_of(message)]
                    if queue.full():
                        with contextlib.suppress(asyncio.QueueEmpty):
                            queue.get_nowait()  # a slow reader keeps the newest
                    queue.put_nowait(message)
                    continue
                future = self._pending.pop(message.get("id", -1), None)
                if future is not None and not future.done():
                    future.set_result(message)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            reason = say(N_("connection to the head lost: {why}"), why=str(exc))
        except asyncio.CancelledError:
            reason = say(N_("closed"))
            raise
        finally:
            self.closed_words = reason
            self.closed_reason = shown(reason.english(), reason.msg, reason.wire()["args"])
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(HeadError.of("unreachable", reason))
            self._pending.clear()
            for queue in self._streams.values():
                if queue.full():
                    with contextlib.suppress(asyncio.QueueEmpty):
                        queue.get_nowait()  # room for the end: it must reach the reader
                queue.put_nowait(None)

    def _watch(self, push: dict[str, Any]) -> None:
        """Hand a push to the request it belongs to (its ``on_push``); what that
        raises ends that request, not the connection."""
        ident = push.get("id", -1)
        watcher = self._watchers.get(ident)
        if watcher is None:
            return
        try:
            watcher(push)
        except Exception as exc:
            future = self._pending.pop(ident, None)
            if future is not None and not future.done():
                future.set_exception(exc)

    def send(self, call: Call) -> Awaitable[dict[str, Any]]:
        """``call`` as a ``backend.Transport`` sends it. A bound call needs nothing
        more here: this client never sends a request again on another connection."""
        return self.call(call.op, call.args, timeout=call.timeout, on_push=call.on_push)

    async def call(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        *,
        timeout: float | None = 30.0,
        on_push: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Its result, or ``HeadError``. A mutating request the head does not answer
        in ``timeout`` is sent once more with the same request id (the head applies
        it once); a second timeout says it may still be applied. ``on_push``: gets
        each push of this request (``force_free``'s steps), which still also come
        through ``pushes``."""
        rid = new_request_id() if op in MUTATING else None
        try:
            return await self._call_once(op, args, rid, timeout, on_push)
        except HeadError as exc:
            if exc.code != "timeout" or rid is None:
                raise
        try:
            return await self._call_once(op, args, rid, timeout, on_push)
        except HeadError as exc:
            if exc.code != "timeout":
                raise
            raise may_still_apply(op, rid) from None

    async def _call_once(
        self,
        op: str,
        args: dict[str, Any] | None,
        rid: str | None,
        timeout: float | None,
        on_push: Callable[[dict[str, Any]], None] | None,
    ) -> dict[str, Any]:
        if self.closed_words is not None:
            raise HeadError.of("unreachable", self.closed_words)
        # This request's own id: ``self._ids`` moves on while it waits, when other
        # requests are sent over the same connection meanwhile.
        self._ids += 1
        ident = self._ids
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        if on_push is not None:
            self._watchers[ident] = on_push
        try:
            self._writer.write(request_line(ident, op, args or {}, rid))
            await self._writer.drain()
            message = await within(future, timeout)
        except asyncio.TimeoutError:
            waited = f"{timeout:g} s" if timeout is not None else "time"
            raise HeadError.of(
                "timeout",
                say(N_("the head did not answer {op} in {waited}"), op=str(op), waited=str(waited)),
            ) from None
        except (OSError, ConnectionError) as exc:
            raise HeadError.of(
                "unreachable", say(N_("connection to the head lost: {exc}"), exc=str(exc))
            ) from None
        finally:
            self._pending.pop(ident, None)
            self._watchers.pop(ident, None)
        return answer_of(message)

    async def pushes(self, stream: Stream = "state") -> AsyncIterator[dict[str, Any]]:
        """The pushes of ``stream`` until the connection ends (each read by one reader)."""
        queue = self._streams[stream]
        while True:
            message = await queue.get()
            if message is None:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)  # a later reader of this stream ends too
                return
            yield message

    def queued(self, stream: Stream) -> int:
        """Pushes of ``stream`` received and not read yet."""
        return self._streams[stream].qsize()

    async def close(self) -> None:
        await cancel_and_wait([self._task])
        with contextlib.suppress(Exception):
            self._writer.close()
        closer, self._closer = self._closer, None
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()
