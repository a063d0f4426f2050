"""``MetricsServer`` on its own, over real HTTP: a scrape sends the text made last,
the text is made anew every refresh while anyone scrapes and not at all once nobody
has for a while, gzip goes to a scraper that asks for it (the same text), and
``Accept-Encoding`` is read as RFC 9110 writes it.
"""

from __future__ import annotations

import asyncio
import gzip as gz
import time
import urllib.request
from collections.abc import AsyncIterator, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from gputui.scheduler.head.metrics import render
from gputui.scheduler.head.metrics_serve import MetricsServer, wants_gzip
from gputui.scheduler.head.metrics_state import FleetView, HostView
from gputui.wire.messages import GpuSample, Sample


def fleet(util: int) -> FleetView:
    gpus = tuple(GpuSample(index=i, uuid=f"GPU-{i}", util_gpu=util, power_w=99.5) for i in range(4))
    host = HostView("gpu01", "gpu01", True, Sample(seq=util, gpus=gpus), {})
    return FleetView(hosts=(host,), gpus={}, drained_hosts=frozenset(), last_xid={}, energy_mj={})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Served:
    """A server on this loop whose view is ``self.view`` (changed by the test)."""

    def __init__(self, refresh_s: float, idle_after_s: float = 60.0) -> None:
        self.view = fleet(1)
        self.views = 0
        self.clock = Clock()
        self.server = MetricsServer(
            "127.0.0.1", 0, self.make_view, refresh_s=refresh_s,
            idle_after_s=idle_after_s, clock=self.clock,
        )  # fmt: skip

    def make_view(self) -> FleetView:
        self.views += 1
        return self.view

    async def scrape(self, gzip: bool = False) -> tuple[bytes, str | None]:
        """The body as sent, and its ``Content-Encoding``."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.server.port}/metrics")
        if gzip:
            request.add_header("Accept-Encoding", "gzip, deflate")

        def get() -> tuple[bytes, str | None]:
            with urllib.request.urlopen(request, timeout=15) as answer:
                raw = answer.read()
                assert int(answer.headers["Content-Length"]) == len(raw)
                return raw, answer.headers["Content-Encoding"]

        return await asyncio.to_thread(get)

    async def util(self, gzip: bool = False) -> float:
        raw, coding = await self.scrape(gzip)
        text = (gz.decompress(raw) if coding == "gzip" else raw).decode()
        families = {f.name: f.samples for f in text_string_to_metric_families(text)}
        return families["DCGM_FI_DEV_GPU_UTIL"][0].value


@pytest.fixture
async def slow() -> AsyncIterator[Served]:
    """Refreshed every hour: only a scrape that finds no text renders."""
    served = Served(refresh_s=3600.0)
    served.server.start()
    yield served
    await asyncio.to_thread(served.server.close)


async def test_a_scrape_sends_the_text_made_last(slow: Served) -> None:
    assert await slow.util() == 1
    slow.view = fleet(2)
    for _ in range(3):  # the same text: no view taken, nothing rendered
        assert await slow.util() == 1
    assert (slow.server.renders, slow.views, slow.server.scrapes) == (1, 1, 4)
    slow.clock.now += 2 * 3600 + 1  # too old to send: rendered there and then
    assert await slow.util() == 2
    assert slow.server.renders == 2
    slow.view = fleet(3)
    slow.server.forget()
    assert await slow.util() == 3


async def test_gzip_for_a_scraper_that_asks_is_the_same_text(slow: Served) -> None:
    plain, coding = await slow.scrape()
    assert coding is None
    # Nobody asked for gzip when it was made: plain text, and gzip from the next one.
    assert await slow.scrape(gzip=True) == (plain, None)
    slow.server.forget()
    packed, coding = await slow.scrape(gzip=True)
    assert coding == "gzip"
    assert gz.decompress(packed) == plain == render(slow.view)
    assert len(packed) < len(plain)
    assert await slow.scrape() == (plain, None)  # the same rendering, as asked


async def until(check: Callable[[], bool], what: str) -> None:
    """Polls ``check`` (the server's thread runs on real time) for at most 20 s."""
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.005)


async def test_the_text_is_kept_fresh_while_anyone_scrapes_and_let_go_after() -> None:
    # The server's clock is the test's: its thread renders when that clock says so.
    served = Served(refresh_s=0.01, idle_after_s=30.0)
    server = served.server
    assert server.idle  # never scraped: nothing held, nothing rendered
    server.start()
    try:
        assert await served.util() == 1
        assert server.renders == 1
        served.view = fleet(7)
        served.clock.now += 0.01
        await until(lambda: server.renders == 2, "the server's own rendering")
        assert await served.util() == 7
        assert (server.renders, server.scrapes) == (2, 2)  # sent as made
        assert not server.idle
        served.clock.now += 31.0  # nobody scrapes: the text goes, nothing is rendered
        await until(lambda: server.idle, "the text to be let go")
        assert server.renders == 2
        served.view = fleet(8)
        assert await served.util() == 8  # the first scrape after: rendered for it
        assert server.renders == 3 and not server.idle
    finally:
        await asyncio.to_thread(server.close)


async def test_scraped_every_15_s_the_text_is_made_once_a_scrape_just_before_it() -> None:
    served = Served(refresh_s=0.05, idle_after_s=60.0)
    server, clock = served.server, served.clock
    server.start()

    async def settled() -> None:  # the server's thread has made what was due
        await until(lambda: (server.next_render_in() or 0) > 0, "nothing due")

    try:
        await served.scrape()
        clock.now += 15.0
        await settled()
        await served.scrape()  # 15 s after the first: the scrapers' interval
        assert (server.renders, server.interval()) == (2, 15.0)
        # Not every refresh (0.05 s) now, but once, a second before the next scrape.
        assert server.next_render_in() == pytest.approx(14.0)
        clock.now += 13.9
        assert server.next_render_in() == pytest.approx(0.1)
        assert server.renders == 2
        clock.now += 0.1
        await until(lambda: server.renders == 3, "the rendering before the scrape")
        await settled()
        clock.now += 1.0
        served.view = fleet(9)  # (after the rendering: the scrape sends what it made)
        assert await served.util() == 1 and server.renders == 3
        assert server.next_render_in() == pytest.approx(14.0)
    finally:
        await asyncio.to_thread(server.close)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["gzip", "GZIP", "x-gzip", "deflate", "br", "*", "identity", "gzipx"]),
            st.none() | st.sampled_from(["0", "0.0", "0.5", "1", "bogus", ""]),
        ),
        max_size=4,
    )
)
def test_accept_encoding_as_written(codings: list[tuple[str, str | None]]) -> None:
    header = ", ".join(c if q is None else f"{c};q={q}" for c, q in codings)
    first = next((q for c, q in codings if c.lower() in ("gzip", "x-gzip")), "absent")
    want = first is None or (first not in ("absent", "bogus", "") and float(first) > 0)
    assert wants_gzip(header) is want
    assert wants_gzip("x" * 5000 + ", " + header) is want  # (a long header is read whole)
