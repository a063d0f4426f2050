"""``MetricsServer``: ``/metrics`` over HTTP, on threads of its own.

prometheus_client's threading WSGI server answers on its own threads, so a scrape
never holds the head's event loop up for longer than it takes the loop to hand out
a view (``FleetView``: frozen values and copies, made by a call the HTTP thread
schedules on the loop with ``call_soon_threadsafe``). The text is rendered on the
HTTP thread (``metrics.render_parts``, from what the last scrape kept), one scrape
at a time, and sent in pieces with its length. The server is bound when the
head starts (a port in use is an error then, not later) and shut down when it stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer

from gputui.common.listen import listen_text
from gputui.scheduler.head.metrics import ScrapeCache, render_parts
from gputui.scheduler.head.metrics_state import FleetView, MetricsFeed
from gputui.telemetry import HostSnapshot

log = logging.getLogger("gputui.scheduler.head.daemon")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text format ``render`` writes (prometheus_client's ``generate_latest``'s)."""
VIEW_TIMEOUT_S = 10.0
"""How long a scrape waits for the loop to hand out a view before it answers 503."""

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class MetricsBindError(OSError):
    """``/metrics`` could not be served where asked (one line, for the user)."""


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


class MetricsServer:
    def __init__(self, addr: str, port: int, view: Callable[[], FleetView]) -> None:
        """``view``: builds the fleet's view; it is called on the loop that ``start``
        runs on, never on the HTTP thread."""
        self.addr, self.port = addr, port
        self._view = view
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: ThreadingWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._render_lock = threading.Lock()
        self._cache = ScrapeCache()
        self.scrapes = 0

    def start(self) -> None:
        """Bind and serve (on the running loop's behalf); ``MetricsBindError`` when the
        address cannot be bound."""
        self._loop = asyncio.get_running_loop()
        where = listen_text(self.addr, self.port)
        try:
            family = socket.getaddrinfo(
                self.addr, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0][0]
        except (OSError, UnicodeError) as exc:
            raise MetricsBindError(f"cannot serve metrics on {where}: {_why(exc)}") from None

        class Server(ThreadingWSGIServer):
            address_family = family

        try:
            server = make_server(self.addr, self.port, self._app, Server, handler_class=_Quiet)
        except OSError as exc:
            raise MetricsBindError(f"cannot serve metrics on {where}: {_why(exc)}") from None
        self._server = server
        self.port = server.server_port
        self._thread = threading.Thread(
            target=server.serve_forever, name="gputui-head-metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop answering and release the port (a scrape in progress is let finish)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(VIEW_TIMEOUT_S)

    # -- on the HTTP threads -------------------------------------------------------------

    def fetch_view(self) -> FleetView:
        """The fleet's view, made on the head's loop (``TimeoutError``, ``RuntimeError``
        when the loop does not make it: stopped, or stuck)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("not started")
        done: concurrent.futures.Future[FleetView] = concurrent.futures.Future()

        def build() -> None:
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(self._view())
                except BaseException as exc:  # handed to the HTTP thread
                    done.set_exception(exc)

        loop.call_soon_threadsafe(build)
        try:
            return done.result(VIEW_TIMEOUT_S)
        finally:
            done.cancel()

    def body(self) -> list[bytes]:
        """The text, in pieces (one per family: sent one after the other, not joined)."""
        view = self.fetch_view()
        with self._render_lock:
            self.scrapes += 1
            return render_parts(view, self._cache)

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: ask /metrics\n"]
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        try:
            parts = [p for p in self.body() if p]
        except (RuntimeError, TimeoutError, concurrent.futures.TimeoutError) as exc:
            log.warning("head: /metrics not answered: %s", _why(exc))
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"the head is not answering\n"]
        except Exception:  # a bug: logged here, never a traceback on the HTTP thread's stderr
            log.exception("head: /metrics failed")
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
            return [b"internal error\n"]
        size = sum(map(len, parts))
        headers = [("Content-Type", CONTENT_TYPE), ("Content-Length", str(size))]
        start_response("200 OK", headers)
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else parts


def _why(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return str(text).splitlines()[0][:200] if str(text) else type(exc).__name__


class HeadMetrics:
    """The head's ``/metrics``, whole: its feed on the loop and its server (nothing
    at all when ``listen`` is None)."""

    def __init__(
        self,
        listen: tuple[str, int] | None,
        feed: MetricsFeed,
        view: Callable[[], FleetView],
        refresh_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.feed = feed
        self.server = None if listen is None else MetricsServer(*listen, view)
        self._refresh_s = refresh_s
        self._clock = clock
        self._read_at = -math.inf

    def start(self) -> None:
        if self.server is not None:
            self.server.start()
            self.feed.changed()
            self._read_at = self._clock()

    def observe(self, snap: HostSnapshot) -> None:
        if self.server is not None:
            self.feed.observe(snap)

    def changed(self) -> None:
        if self.server is not None:
            self.feed.changed()

    def tick(self) -> None:
        """The timer: the hours grow while jobs run, so the figures are read again."""
        if self.server is not None and self._clock() - self._read_at >= self._refresh_s:
            self._read_at = self._clock()
            self.feed.changed()

    async def close(self) -> None:
        if self.server is not None:  # (its shutdown waits up to half a second: not here)
            await asyncio.to_thread(self.server.close)
        await self.feed.close()
