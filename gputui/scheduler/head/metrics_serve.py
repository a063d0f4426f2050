"""``MetricsServer``: ``/metrics`` over HTTP, on threads of its own.

prometheus_client's threading WSGI server answers on its own threads, so a scrape
never holds the head's event loop up for longer than it takes the loop to hand out
a view (``FleetView``: frozen values and copies, made by a call the HTTP thread
schedules on the loop with ``call_soon_threadsafe``).

A scrape sends text already made. While anyone scrapes, a thread of the server's
own renders the text (``metrics.render_parts``, from what the last render kept,
joined into one ``bytes``, and gzipped too while a scraper asks for gzip, as
Prometheus does), as dcgm-exporter collects on an interval and serves what it
collected: every ``refresh_s`` while scrapes come that often, and when they come
further apart (Prometheus scrapes on a fixed interval, 15 s or more), once for each,
``LEAD_S`` (or twice the last rendering's time) before the next is due. So a scrape
costs what sending costs, however large the fleet, and its figures are about a
second old. A scrape that finds no text, or text older than twice the larger of
``refresh_s`` and the scrapers' interval (the first scrape, the first after
``IDLE_AFTER_S`` without one), renders it there and then. After ``IDLE_AFTER_S``
without a scrape the thread stops rendering and lets the text go, so a head that
nobody scrapes pays nothing. The server is bound when the head starts (a port in
use is an error then, not later) and shut down when it stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer

from gputui.common.listen import listen_text
from gputui.scheduler.head.metrics import ScrapeCache, render_parts
from gputui.scheduler.head.metrics_state import FleetView, MetricsFeed
from gputui.scheduler.head.settings import METRICS_REFRESH_S
from gputui.telemetry import HostSnapshot

log = logging.getLogger("gputui.scheduler.head.daemon")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text format ``render`` writes (prometheus_client's ``generate_latest``'s)."""
VIEW_TIMEOUT_S = 10.0
"""How long a scrape waits for the loop to hand out a view before it answers 503."""
IDLE_AFTER_S = 180.0
"""No scrape for this long: the text is no longer kept ready (nor its memory held)."""
LEAD_S = 1.0
"""The least time before a scrape is due that its text is made."""
GZIP_LEVEL = 1
"""zlib's fastest: the text is most of it the same labels again (about 19 to 1)."""

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class MetricsBindError(OSError):
    """``/metrics`` could not be served where asked (one line, for the user)."""


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Body:
    """One rendering of the text, as sent."""

    text: bytes
    gzipped: bytes | None
    """The same, gzipped (None: no scraper asked for gzip lately)."""
    made_at: float
    """When its view was taken (the server's clock)."""


def wants_gzip(accept: str) -> bool:
    """Whether an ``Accept-Encoding`` header takes gzip (``gzip;q=0`` refuses it)."""
    for item in accept.split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() not in ("gzip", "x-gzip"):
            continue
        q = params.strip().lower().removeprefix("q=").strip()
        try:
            return not params.strip() or float(q) > 0
        except ValueError:
            return False
    return False


class MetricsServer:
    def __init__(
        self,
        addr: str,
        port: int,
        view: Callable[[], FleetView],
        *,
        refresh_s: float = METRICS_REFRESH_S,
        idle_after_s: float = IDLE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``view``: builds the fleet's view; it is called on the loop that ``start``
        runs on, never on the HTTP thread. ``refresh_s``: how often the text is made
        anew while anyone scrapes."""
        self.addr, self.port = addr, port
        self._view = view
        self._refresh_s = refresh_s
        self._idle_after_s = idle_after_s
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: ThreadingWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._renderer: threading.Thread | None = None
        self._render_lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._cache = ScrapeCache()
        self._body: Body | None = None
        self._scraped_at = -math.inf
        self._gaps: deque[float] = deque(maxlen=3)
        """The last gaps between two scrapes (the scrapers' interval: their least)."""
        self._render_s = 0.0
        """How long the last rendering took."""
        self._gzip_at = -math.inf
        self.scrapes = 0
        self.renders = 0

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
        self._renderer = threading.Thread(
            target=self._keep_fresh, name="gputui-head-metrics-render", daemon=True
        )
        self._renderer.start()

    def close(self) -> None:
        """Stop answering and release the port (a scrape in progress is let finish)."""
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        self._wake.set()
        server.shutdown()
        server.server_close()
        for thread in (self._thread, self._renderer):
            if thread is not None:
                thread.join(VIEW_TIMEOUT_S)
        self._body = None

    @property
    def idle(self) -> bool:
        """Whether the text is no longer kept ready (nobody scraped for a while)."""
        return self._body is None and self.next_render_in() is None

    def forget(self) -> None:
        """Let the text go: the next scrape renders it anew."""
        self._body = None

    # -- on the server's threads ---------------------------------------------------------

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

    def _render(self) -> Body:
        """A new rendering (the caller holds the render lock)."""
        made_at = self._clock()
        view = self.fetch_view()
        text = b"".join(render_parts(view, self._cache))
        gzipped = None
        if self._clock() - self._gzip_at <= self._idle_after_s:
            packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            gzipped = packer.compress(text) + packer.flush()
        self.renders += 1
        self._render_s = self._clock() - made_at
        return Body(text, gzipped, made_at)

    def body(self, gzip: bool = False) -> Body:
        """What a scrape sends: the text kept ready, or, when there is none fresh
        enough, a rendering made now."""
        now = self._clock()
        if 0 < now - self._scraped_at <= self._idle_after_s:
            self._gaps.append(now - self._scraped_at)
        self._scraped_at = now
        if gzip:
            self._gzip_at = now
        body = self._body
        if body is None or now - body.made_at > self._keep_for():
            with self._render_lock:  # (a rendering under way may be the one wanted)
                body = self._body
                if body is None or self._clock() - body.made_at > self._keep_for():
                    body = self._body = self._render()
        self.scrapes += 1
        self._wake.set()
        return body

    def interval(self) -> float | None:
        """The scrapers' interval, as far as seen (None: not yet two scrapes)."""
        return min(self._gaps) if self._gaps else None

    def _keep_for(self) -> float:
        """How old a text a scrape is sent (older: it renders its own)."""
        return 2 * max(self._refresh_s, self.interval() or 0.0)

    def next_render_in(self) -> float | None:
        """Seconds until the text is to be made anew; None: nobody scrapes. At most
        every ``refresh_s``; when scrapes come further apart than that (Prometheus
        scrapes every 15 s or more, on a fixed interval), once for each, just before
        the next is due (the last rendering's time twice, at least ``LEAD_S``)."""
        now = self._clock()
        if now - self._scraped_at > self._idle_after_s:
            return None
        body = self._body
        if body is None:
            return 0.0
        due = body.made_at + self._refresh_s
        interval = self.interval()
        if interval is not None and interval > self._refresh_s:
            due = max(due, self._scraped_at + interval - max(LEAD_S, 2 * self._render_s))
        return due - now

    def _keep_fresh(self) -> None:
        """The renderer's thread: the text made anew every ``refresh_s`` while anyone
        scrapes, let go when nobody has for ``idle_after_s``."""
        while not self._closing:
            wait = self.next_render_in()
            if wait is None:
                self._body = None
                self._wake.wait()
            elif wait > 0:
                self._wake.wait(min(wait, self._refresh_s))
            else:
                try:
                    with self._render_lock:
                        self._body = self._render()
                except (RuntimeError, TimeoutError, concurrent.futures.TimeoutError) as exc:
                    log.warning("head: /metrics not rendered: %s", _why(exc))
                    self._wake.wait(self._refresh_s)
                except Exception:  # a bug: logged, and tried again a refresh later
                    log.exception("head: /metrics failed to render")
                    self._wake.wait(self._refresh_s)
            self._wake.clear()

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: ask /metrics\n"]
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        gzip = wants_gzip(str(environ.get("HTTP_ACCEPT_ENCODING", "")))
        try:
            body = self.body(gzip)
        except (RuntimeError, TimeoutError, concurrent.futures.TimeoutError) as exc:
            log.warning("head: /metrics not answered: %s", _why(exc))
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"the head is not answering\n"]
        except Exception:  # a bug: logged here, never a traceback on the HTTP thread's stderr
            log.exception("head: /metrics failed")
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
            return [b"internal error\n"]
        headers = [("Content-Type", CONTENT_TYPE), ("Vary", "Accept-Encoding")]
        data = body.text
        if gzip and body.gzipped is not None:
            data = body.gzipped
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(data))))
        start_response("200 OK", headers)
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [data]


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
        self.server = None if listen is None else MetricsServer(*listen, view, refresh_s=refresh_s)
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
