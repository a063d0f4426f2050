"""A local HTTP server that stands in for Slack, Feishu/Lark and DingTalk: it keeps
every request (path, query, body) and answers as the service does, or fails, or
hangs, as the test says.

Slack's incoming webhooks are ``POST /services/T/B/C`` (answer ``ok``), Feishu's bot
webhooks ``POST /open-apis/bot/v2/hook/TOKEN`` (answer ``{"code": 0}``), DingTalk's
robot ``POST /robot/send?access_token=…`` (answer ``{"errcode": 0}``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Heard:
    """One request as the server got it."""

    path: str
    query: dict[str, list[str]]
    body: Any
    at: float


class ChatServer:
    """``with ChatServer() as chat:`` on ``chat.base`` (``http://127.0.0.1:PORT``);
    ``chat.mode``: ``ok``, ``down`` (HTTP 500) or ``hang`` (no answer until
    ``release()``)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.hang_prefix: str | None = None
        """Requests whose path starts with this hang, whatever the mode."""
        self.heard: list[Heard] = []
        self.hanging = 0
        self._cond = threading.Condition()
        self._release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                parts = urlsplit(self.path)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                with server._cond:
                    server.heard.append(Heard(parts.path, parse_qs(parts.query), body, time.time()))
                    mode = server.mode
                    if server.hang_prefix and parts.path.startswith(server.hang_prefix):
                        mode = "hang"
                    if mode == "hang":
                        server.hanging += 1
                    server._cond.notify_all()
                if mode == "hang":
                    server._release.wait(60)
                    return  # closed without an answer
                if mode == "down":
                    self.send_response(500)
                    self.end_headers()
                    return
                if parts.path.startswith("/services/"):
                    answer = b"ok"
                elif parts.path.startswith("/open-apis/"):
                    answer = b'{"code": 0, "msg": "success"}'
                else:
                    answer = b'{"errcode": 0, "errmsg": "ok"}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.base = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._http.shutdown()
        self._http.server_close()

    def release(self) -> None:
        """Let every hung request end (and no later one hang)."""
        self.mode = "ok"
        self.hang_prefix = None
        self._release.set()

    def wait(self, predicate: Any, timeout: float = 20.0, what: str = "requests") -> list[Heard]:
        """Block until ``predicate(heard)`` holds (the list heard so far is returned)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.heard):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}: heard {self.heard!r}")
                self._cond.wait(left)
            return list(self.heard)

    def on(self, prefix: str) -> list[Heard]:
        with self._cond:
            return [h for h in self.heard if h.path.startswith(prefix)]
