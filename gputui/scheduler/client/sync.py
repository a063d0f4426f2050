"""Talking to the head: a blocking client for the CLI (the console's asyncio one is
``gputui.scheduler.client.aio``, kept apart so a CLI call never imports asyncio).

Both speak the JSON lines of the head's wire (``gputui.scheduler.server.wire``) and
import nothing heavy (no pydantic, no SQL, no SSH), so a ``gputui submit`` starts in
a few tens of milliseconds. A mutating call carries a fresh request id; when the
connection drops or the head does not answer in time, the call is sent again once,
on a new connection, with the same id, and the head applies it once (its request log
answers the retry with the first result). A timeout is never read as a refusal: a
request not answered may still be applied, and the message says so.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.client.backend import Call
from gputui.scheduler.client.errors import HeadError, may_still_apply, unreachable
from gputui.scheduler.client.framing import (
    MAX_LINE,
    answer_of,
    message_of,
    new_request_id,
    request_line,
)
from gputui.scheduler.client.ops import MUTATING
from gputui.wire.words import say


class HeadClient:
    """A blocking connection to the head's socket (for one CLI process)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        timeout: float | None = 30.0,
        *,
        opener: Callable[[], socket.socket] | None = None,
    ) -> None:
        """``opener``: makes the connection instead of ``path`` (the head over SSH,
        ``ssh.ssh_socket``); called again for a retry after a drop."""
        self.path = os.fspath(path)
        self.timeout = timeout
        self.opener = opener
        self._sock: socket.socket | None = None
        self._file: Any = None
        self._ids = 0

    def __enter__(self) -> HeadClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        if self.opener is not None:
            sock = self.opener()
            sock.settimeout(self.timeout)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.path)
            except OSError as exc:
                sock.close()
                raise unreachable(self.path, exc) from None
        self._sock = sock
        self._file = sock.makefile("rb")

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = self._file = None

    def send(self, call: Call) -> dict[str, Any]:
        """``call`` as a ``backend.Transport`` sends it (a bound call is not retried)."""
        return self.call(
            call.op, call.args, timeout=call.timeout, retry=not call.bound, on_push=call.on_push
        )

    def call(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        *,
        timeout: float | None = -1.0,
        retry: bool = True,
        on_push: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Send one request; its result, or ``HeadError``. Retries a dropped mutating
        request once, with the same request id; ``retry=False`` for a request bound to
        this connection (a ``gputui run`` claim: it ends with the connection).
        ``on_push``: gets each progress push of this request (``force_free``'s steps)."""
        rid = new_request_id() if op in MUTATING else None
        attempts = 2 if rid is not None and retry else 1
        for attempt in range(attempts):
            try:
                return self._call_once(op, args or {}, rid, timeout, on_push)
            except (ConnectionError, BrokenPipeError, EOFError) as exc:
                self.close()
                if attempt + 1 >= attempts:
                    raise HeadError.of(
                        "unreachable",
                        say(N_("lost the head while asking {op}: {exc}"), op=str(op), exc=str(exc)),
                    ) from None
            except HeadError as exc:
                if exc.code != "timeout" or rid is None:
                    raise
                self.close()  # its answer, late, must not be read as the retry's
                if attempt + 1 >= attempts:
                    raise may_still_apply(op, rid) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _call_once(
        self,
        op: str,
        args: dict[str, Any],
        rid: str | None,
        timeout: float | None,
        on_push: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        if timeout != -1.0:
            self._sock.settimeout(timeout)
        self._ids += 1
        try:
            self._sock.sendall(request_line(self._ids, op, args, rid))
        except (BrokenPipeError, ConnectionResetError):
            # The head may have answered before it read a word (a refusal of the
            # connection itself, "busy") and closed it: that answer is what to say.
            said = self._left_said()
            if said is None:
                raise
            return answer_of(said)
        while True:
            message = self._read()
            if message.get("push"):
                if on_push is not None and message.get("id") == self._ids:
                    on_push(message)
                continue
            if message.get("id") not in (self._ids, None):
                continue
            return answer_of(message)

    def _left_said(self) -> dict[str, Any] | None:
        """What the head sent on a connection it has closed, if anything."""
        try:
            return self._read()
        except (ConnectionError, EOFError, HeadError):
            return None

    def _read(self) -> dict[str, Any]:
        try:
            line = self._file.readline(MAX_LINE)
        except TimeoutError:
            raise HeadError.of("timeout", say(N_("the head did not answer in time"))) from None
        except OSError as exc:
            raise ConnectionError(str(exc)) from None
        if not line:
            raise EOFError("the head closed the connection")
        return message_of(line)

    @property
    def sock(self) -> socket.socket | None:
        """The open connection (None: not connected)."""
        return self._sock

    def message(self) -> dict[str, Any]:
        """The next message, whatever it is (``HeadError`` ``unreachable``: the
        connection is gone)."""
        try:
            return self._read()
        except (ConnectionError, EOFError) as exc:
            raise HeadError.of(
                "unreachable", say(N_("lost the head: {exc}"), exc=str(exc))
            ) from None

    def pushes(self) -> Iterator[dict[str, Any]]:
        """After ``subscribe``: every pushed message, as it comes. However long the
        head has nothing to push (a quiet night while ``gputui run`` waits for GPUs):
        no deadline, as the head is not late with an answer; a head that goes away
        closes the connection, which ends the wait."""
        if self._sock is not None:
            self._sock.settimeout(None)
        while True:
            try:
                message = self._read()
            except (ConnectionError, EOFError) as exc:
                raise HeadError.of(
                    "unreachable", say(N_("lost the head: {exc}"), exc=str(exc))
                ) from None
            if message.get("push"):
                yield message
