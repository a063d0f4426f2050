"""The console's asyncio connection to the head (local socket, or a stream through SSH)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

from gputui.scheduler.client.backend import Call
from gputui.scheduler.client.errors import HeadError, may_still_apply, unreachable
from gputui.scheduler.client.framing import MAX_LINE, answer_of, new_request_id, request_line
from gputui.scheduler.client.ops import MUTATING


class AsyncHeadClient:
    """An asyncio connection to the head (local socket, or a stream through SSH)."""

    def __init__(
        self, reader: asyncio.StreamReader | Any, writer: asyncio.StreamWriter | Any
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._watchers: dict[int, Callable[[dict[str, Any]], None]] = {}
        self._pushes: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(1000)
        self._task: asyncio.Task[None] | None = None
        self.closed_reason: str | None = None

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
        reason = "the head closed the connection"
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
                    if self._pushes.full():
                        with contextlib.suppress(asyncio.QueueEmpty):
                            self._pushes.get_nowait()  # a slow reader keeps the newest
                    self._pushes.put_nowait(message)
                    continue
                future = self._pending.pop(message.get("id", -1), None)
                if future is not None and not future.done():
                    future.set_result(message)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            reason = f"connection to the head lost: {exc}"
        except asyncio.CancelledError:
            reason = "closed"
            raise
        finally:
            self.closed_reason = reason
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(HeadError("unreachable", reason))
            self._pending.clear()
            with contextlib.suppress(asyncio.QueueFull):
                self._pushes.put_nowait(None)

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
        if self.closed_reason is not None:
            raise HeadError("unreachable", self.closed_reason)
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
            message = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            waited = f"{timeout:g} s" if timeout is not None else "time"
            raise HeadError("timeout", f"the head did not answer {op} in {waited}") from None
        except (OSError, ConnectionError) as exc:
            raise HeadError("unreachable", f"connection to the head lost: {exc}") from None
        finally:
            self._pending.pop(ident, None)
            self._watchers.pop(ident, None)
        return answer_of(message)

    async def pushes(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            message = await self._pushes.get()
            if message is None:
                return
            yield message

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        with contextlib.suppress(Exception):
            self._writer.close()
