"""JSON lines in and out: one writer for stdout, one reader thread for stdin."""

from __future__ import annotations

import json
import queue
import threading
from typing import IO, Any, Callable

MAX_REQUEST_BYTES = 1 << 20


class OutputClosed(Exception):
    """stdout is gone (the SSH channel closed): stop quietly."""


class Output:
    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, obj: dict[str, Any]) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n"
        with self.lock:
            try:
                self.stream.write(data)
                self.stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                raise OutputClosed() from None


def read_requests(
    stream: IO[bytes],
    queue_: queue.Queue[tuple[str, Any]],
    on_eof: Callable[[], None] | None = None,
) -> None:
    try:
        while True:
            line = stream.readline(MAX_REQUEST_BYTES)
            if not line:
                break
            if not line.endswith(b"\n") and len(line) >= MAX_REQUEST_BYTES:
                while True:  # drop the rest of an oversized line
                    rest = stream.readline(MAX_REQUEST_BYTES)
                    if not rest or rest.endswith(b"\n"):
                        break
                queue_.put(("oversize", None))
                continue
            if line.strip():
                queue_.put(("line", line))
    except (OSError, ValueError):
        pass
    queue_.put(("eof", None))
    if on_eof is not None:
        on_eof()
