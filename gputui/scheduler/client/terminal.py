"""``TerminalLink``: one connection to the head, attached to an interactive job's terminal.

Blocking and stdlib only (a CLI process): the caller waits on ``fileno`` with
``select`` and then calls ``messages``, which reads what is there without blocking.
Output comes as ``pty`` pushes; each is acknowledged once it has been written out
(``ack``), which is what lets the job's supervisor send more (its window): a
terminal that cannot keep up slows the stream, never the job.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.framing import answer_of, message_of, request_line
from gputui.wire.words import say

LINE_MAX = 1 << 20
"""The longest line from the head kept (a pty push is under 100 KiB)."""
INPUT_CHUNK = 8192
"""Bytes of input one ``pty_in`` carries: its line stays under the head's 16 KiB
line buffer (a longer one would wait for one of its few large-line slots)."""
ATTACH_WITHIN_S = 30.0


class TerminalLink:
    """The attach protocol over ``sock`` (connected, nothing read from it yet)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()
        self._ids = 0
        self._pending: list[dict[str, Any]] = []
        self.host = ""
        """The job's host, once attached."""

    def fileno(self) -> int:
        return self.sock.fileno()

    def _post(self, op: str, args: dict[str, Any]) -> int:
        self._ids += 1
        self.sock.sendall(request_line(self._ids, op, args, None))
        return self._ids

    def attach(self, job_id: int, rows: int, cols: int) -> dict[str, Any]:
        """Attach; the head's answer (``HeadError`` when it refuses)."""
        self.sock.settimeout(ATTACH_WITHIN_S)
        ident = self._post("attach", {"job_id": job_id, "rows": rows, "cols": cols})
        try:
            while True:
                for message in self._lines(block=True):
                    if message.get("push"):
                        self._pending.append(message)
                    elif message.get("id") == ident:
                        answer = answer_of(message)
                        self.host = str(answer.get("host", ""))[:128]
                        return answer
        except TimeoutError:
            raise HeadError.of(
                "timeout", say(N_("the head did not answer the attach in time"))
            ) from None
        finally:
            self.sock.settimeout(None)

    def send_input(self, data: bytes) -> None:
        for start in range(0, len(data), INPUT_CHUNK):
            chunk = base64.b64encode(data[start : start + INPUT_CHUNK]).decode()
            self._post("pty_in", {"data": chunk})

    def resize(self, rows: int, cols: int) -> None:
        self._post("pty_in", {"rows": rows, "cols": cols})

    def ack(self, at: int) -> None:
        self._post("pty_in", {"ack": at})

    def detach(self) -> None:
        self._post("detach", {})

    def messages(self) -> Iterator[dict[str, Any]]:
        """What has come (pushes, and refusals of ``pty_in``), without blocking;
        ``HeadError`` ``unreachable`` once the connection is gone."""
        pending, self._pending = self._pending, []
        yield from pending
        yield from self._lines(block=False)

    def _lines(self, *, block: bool) -> Iterator[dict[str, Any]]:
        """The whole lines held already, then those of one read (``block``: waiting for
        it). A caller may stop at any message (``attach`` at its answer): what came in
        the same read after it stays held for the next call, which takes it first,
        since the socket will not show it as readable again."""
        yield from self._held()
        try:
            data = self.sock.recv(1 << 16) if block else self._recv_ready()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            raise HeadError.of(
                "unreachable", say(N_("lost the head: {exc}"), exc=str(exc))
            ) from None
        if data is None:
            return
        if not data:
            raise HeadError.of("unreachable", say(N_("lost the head: it closed the connection")))
        self._buf += data
        yield from self._held()

    def _held(self) -> Iterator[dict[str, Any]]:
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                if len(self._buf) > LINE_MAX:
                    raise HeadError.of("protocol", say(N_("the head sent a line over 1 MiB")))
                return
            line = bytes(self._buf[:end])
            del self._buf[: end + 1]
            yield message_of(line)

    def _recv_ready(self) -> bytes | None:
        self.sock.setblocking(False)
        try:
            return self.sock.recv(1 << 16)
        except BlockingIOError:
            return None
        finally:
            self.sock.setblocking(True)


def output_of(push: dict[str, Any]) -> tuple[int, bytes]:
    """(offset after it, bytes) of an ``out`` push; ``HeadError`` for a bad one."""
    try:
        data = base64.b64decode(str(push.get("data", "")), validate=True)
        at = int(push["at"])
    except (KeyError, TypeError, ValueError) as exc:
        raise HeadError.of(
            "protocol", say(N_("the head sent a bad terminal push: {exc}"), exc=str(exc))
        ) from None
    return at + len(data), data
