"""A head (``headkit.running_head``) served from a thread of its own, and a blocking
line client, for tests that talk to the head the way a CLI process does.

The head's loop runs in the background thread; the test thread uses plain sockets,
so hypothesis can drive many examples against one head. Everything the head logs
at WARNING or above, and anything its loop could not handle, is kept in
``problems`` for the test to assert on (no traceback may reach a log).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from headkit import FAST_TICK_S, ScriptedHosts, running_head

from gputui.scheduler.head.daemon import Head
from gputui.scheduler.server.wire import MUTATING


def poll(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Blocking ``wait_for``: poll until ``predicate`` is truthy (returned) or fail."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def said_something(sock: socket.socket) -> bool:
    """Whether the head has sent ``sock`` anything (or closed it), without reading it."""
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    return True


class _Keep(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.name}: {record.levelname} {record.getMessage()}"
        if record.exc_info:
            text += " [with traceback]"
        self.into.append(text)


class ThreadedHead:
    """``with ThreadedHead(tmp, {"gpu01": 4}) as th:`` a live head on ``th.sock``
    (``settings``: ``running_head``'s; its timer ticks every ``FAST_TICK_S`` unless
    ``tick_s`` is given)."""

    def __init__(self, tmp: Path, layout: dict[str, int], **settings: Any) -> None:
        self.tmp = tmp
        self.layout = layout
        self.settings = {"tick_s": FAST_TICK_S, **settings}
        self.db = tmp / "db" / "gputui.db"
        self.sock = tmp / "head.sock"
        self.problems: list[str] = []
        self.head: Head | None = None
        self.hosts: ScriptedHosts | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="test-head", daemon=True)
        self._handler = _Keep(self.problems)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # handed to the test thread
            self._failed = exc
            self._ready.set()

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(
            lambda _loop, context: self.problems.append(f"loop: {context.get('message')}")
        )
        async with running_head(self.tmp, self.layout, **self.settings) as (head, hosts, sock):
            assert sock == self.sock
            self.head, self.hosts, self._loop = head, hosts, loop
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> ThreadedHead:
        logging.getLogger().addHandler(self._handler)
        self._thread.start()
        self._ready.wait(30)
        if self._failed is not None:
            raise self._failed
        assert self.head is not None, "the head did not start in 30 s"
        total = sum(self.layout.values())
        with LineClient(self.sock) as client:
            poll(
                lambda: len(client.ok("cluster")["gpus"]) == total,
                what=f"the head to see {total} GPUs",
            )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._loop is not None and self._stop is not None:
                self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)
        finally:
            logging.getLogger().removeHandler(self._handler)

    def in_loop(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the head's loop (e.g. ``hosts.finish``), waiting until it ran."""
        assert self._loop is not None

        async def call() -> None:
            fn()

        asyncio.run_coroutine_threadsafe(call(), self._loop).result(10)

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of a read-only query on the head's database (WAL: the head keeps writing)."""
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            return list(conn.execute(sql, params).fetchall())
        finally:
            conn.close()

    def snapshot(self) -> dict[str, Any]:
        """What a refused request must leave untouched: jobs, claims, allocations, audit."""
        return {
            "jobs": self.rows("SELECT id, state, host, gpu_uuids, launches FROM job ORDER BY id"),
            "claims": self.rows("SELECT id, state, gpu_uuids FROM claim ORDER BY id"),
            "allocations": self.rows(
                "SELECT id, gpu_uuid, job_id, claim_id, end_at FROM allocation ORDER BY id"
            ),
            "audit": self.rows("SELECT id FROM audit ORDER BY id"),
            "notices": self.rows("SELECT id FROM notice ORDER BY id"),
        }


class LineClient:
    """A blocking connection speaking raw lines: for requests no real client would send."""

    def __init__(self, path: Path, timeout: float = 15.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self._file = self.sock.makefile("rb")
        self._ids = 1000

    def __enter__(self) -> LineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()
        self.sock.close()

    def send(self, line: bytes) -> None:
        self.sock.sendall(line if line.endswith(b"\n") else line + b"\n")

    def read(self) -> dict[str, Any]:
        """The next answer (pushes skipped)."""
        while True:
            raw = self._file.readline(64 * 1024 * 1024)
            assert raw, "the head closed the connection"
            assert raw.endswith(b"\n")
            message = json.loads(raw)
            assert isinstance(message, dict), raw[:200]
            if not message.get("push"):
                return message

    def ask(self, op: str, args: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
        """Send one request object (``top`` adds or replaces its fields); its answer."""
        self._ids += 1
        request: dict[str, Any] = {"id": self._ids, "op": op, "args": args or {}, **top}
        self.send(json.dumps(request).encode())
        answer = self.read()
        assert answer.get("id") == request.get("id"), (request, answer)
        return answer

    def ok(self, op: str, args: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
        """``ask``, and insist it was carried out: the result."""
        if op in MUTATING and "rid" not in top:
            top["rid"] = f"r{time.monotonic_ns()}"
        answer = self.ask(op, args, **top)
        assert answer["ok"] is True, answer
        result = answer["result"]
        assert isinstance(result, dict)
        return result


UNSHOWABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What a line shown to a person must not hold: controls, bidi, zero-width, surrogates."""


def refusal(answer: dict[str, Any]) -> tuple[str, str]:
    """(code, message) of a refused answer, checking it is one clean line."""
    assert answer.get("ok") is False, answer
    error = answer["error"]
    code, message = error["code"], error["message"]
    assert isinstance(code, str) and code, answer
    assert isinstance(message, str) and message, answer
    assert len(message) <= 500, message
    assert "Traceback" not in message, message
    assert not UNSHOWABLE.search(message), f"control characters in {message!r}"
    return code, message
