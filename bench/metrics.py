"""Scrape cost: ``/metrics`` at 1,000 hosts x 8 GPUs, rendered and served.

Builds the view a head hands its HTTP thread (``FleetView``: every host's latest
sample with every reading a helper sends, a health reading per GPU, an Xid on some,
half the GPUs held by jobs or claims), then:

- **served**: a real ``MetricsServer`` on this process's loop, scraped over HTTP
  (urllib, on loopback) while its own thread renders the text anew every 0.5 s from
  a view whose busy GPUs moved (``metrics_scrape_ms``: the median of ``--runs``
  scrapes, what a scrape costs; ``metrics_scrape_gzip_ms`` asking for gzip, as
  Prometheus does; ``metrics_first_scrape_ms``: the first, which renders for itself);
- **rendered**: what the server's thread does every refresh, timed alone
  (``metrics.render_parts`` with the ``ScrapeCache`` a running head keeps; fresh
  energy figures between renders: ``metrics_render_ms``; after every host sent a new
  sample with the busy GPUs' readings moved: ``metrics_render_new_samples_ms``;
  joined and gzipped as the server keeps it: ``metrics_render_kept_ms``, and after new
  samples, the server's thread's work each refresh: ``metrics_refresh_ms``; the first:
  ``metrics_render_cold_ms``), and once prometheus_client's own ``generate_latest``
  over the same collector (the baseline; the texts are checked equal). The loop's
  own share (handing out the view) is timed too.

    python bench/metrics.py [--hosts 1000] [--gpus 8] [--runs 7]

Importable: ``measure(hosts, gpus, runs)`` returns the figures (for bench/consoles.py).
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import time
import zlib
from dataclasses import replace
from typing import Any, cast

from prometheus_client import CollectorRegistry, generate_latest

from gputui.scheduler.head.gpufacts import GpuFacts
from gputui.scheduler.head.metrics import FleetCollector, ScrapeCache, render, render_parts
from gputui.scheduler.head.metrics_serve import GZIP_LEVEL, MetricsServer
from gputui.scheduler.head.metrics_state import (
    FleetView,
    Holding,
    HostView,
    MetricsFeed,
    QueueFacts,
    link_totals,
)
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy.meter import Metered
from gputui.scheduler.store.tables import Gpu
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.fields import unchecked
from gputui.wire.health import NvLinkSample
from gputui.wire.messages import GpuInfo, GpuSample, Hello, ProcessSample, Sample

TARGET_MS = 50.0


def _gpu(h: int, i: int, uuid: str) -> GpuSample:
    busy = (h + i) % 3 != 0
    return GpuSample(
        index=i,
        uuid=uuid,
        util_gpu=87 if busy else 0,
        util_mem=41 if busy else 0,
        mem_used_mib=61_440 if busy else 3,
        mem_total_mib=81_920,
        temp_c=64 if busy else 33,
        power_w=312.5 if busy else 61.25,
        power_limit_w=400.0,
        fan_pct=None,
        clock_sm_mhz=1410,
        clock_mem_mhz=1593,
        ecc_corrected=0,
        ecc_uncorrected=0,
        pcie_gen=4,
        pcie_width=16,
        processes=(ProcessSample(pid=4000 + i, uid=1000, user="alice", command="python train.py"),)
        if busy
        else (),
    )


def _health(uuid: str, i: int) -> GpuSample:
    links = tuple(
        NvLinkSample(link=n, active=True, replay_errors=0, recovery_errors=0,
                     crc_flit_errors=0, crc_data_errors=0)
        for n in range(12)
    )  # fmt: skip
    return GpuSample(
        index=i,
        uuid=uuid,
        health_read=True,
        remapped_correctable=0,
        remapped_uncorrectable=0,
        remap_pending=False,
        remap_failed=False,
        ecc_corrected_total=2,
        ecc_uncorrected_total=0,
        pcie_replays=0,
        nvlinks=links,
    )


def fleet_view(hosts: int = 1000, gpus: int = 8) -> FleetView:
    """A fleet of ``hosts`` x ``gpus`` as a head holds it, half the GPUs held."""
    views, facts, holders, xids, energy = [], {}, {}, {}, {}
    for h in range(hosts):
        name = f"gpu{h:04d}"
        uuids = [f"GPU-{h:08x}-{i:04x}-4c3b-9a3e-5d1f0e2b7a6c" for i in range(gpus)]
        sample = Sample(seq=1, time=1.0, gpus=tuple(_gpu(h, i, u) for i, u in enumerate(uuids)))
        readings = {u: _health(u, i) for i, u in enumerate(uuids)}
        views.append(HostView(name, f"{name}.example.org", True, sample, readings))
        for i, uuid in enumerate(uuids):
            facts[uuid] = GpuFacts(
                uuid=uuid, host=name, index=i, model="NVIDIA A100-SXM4-80GB", memory_mib=81_920,
                pool="a100", drained_by=None, drain_reason=None, drained_at=None,
                fence_code=None, fence_reason=None, fenced_at=None, fence_clears=None,
                fence_waived=None, fence_waived_at=None, present=True,
            )  # fmt: skip
            energy[uuid] = 1.25e9 + h * 1000.0 + i
            if (h + i) % 2 == 0:
                holders[uuid] = Holding("job", h * gpus + i, f"user{h % 40}")
        if h % 50 == 0:
            xids[uuids[0]] = 79
    queue = QueueFacts(
        at=1.0,
        waiting={("normal", "Resources"): 120, ("high", "Priority"): 7},
        running=len(holders),
        claims_active=0,
        claims_waiting=0,
        holders=holders,
        alloc_gpu_h=123456.5,
        busy_gpu_h=98765.25,
        energy_kwh=4321.125,
    )
    return FleetView(
        hosts=tuple(views),
        gpus=facts,
        drained_hosts=frozenset(),
        last_xid=xids,
        energy_mj=energy,
        queue=queue,
        pools={v.name: "a100" for v in views},
        links={u: link_totals(r) for v in views for u, r in v.readings.items()},
    )


def loop_view_ms(view: FleetView, runs: int) -> float:
    """The loop's share of a scrape: a head's ``HostWatch`` and ``MetricsFeed`` that took
    every host's snapshot hand out the view (median of ``runs``, in ms)."""
    pools = {h.name: "a100" for h in view.hosts}
    watch = HostWatch(pools, lambda _snap: None)
    watch.load(
        Gpu(uuid=g.uuid, host=g.host, index=g.index, model=g.model, pool=g.pool)
        for g in view.gpus.values()
    )
    feed = MetricsFeed(cast(Any, None), cast(Any, None), Metered, time.time)
    for host in view.hosts:
        assert host.sample is not None
        infos = tuple(GpuInfo(index=g.index, uuid=g.uuid, name="A100") for g in host.sample.gpus)
        hello = Hello(protocol=1, helper_version="x", hostname=host.hostname, gpus=infos)
        snap = HostSnapshot(
            name=host.name, address=host.name, status=HostStatus.LIVE, hello=hello,
            sample=host.sample, received_at=time.time(),
        )  # fmt: skip
        watch.observe(snap)
        feed.observe(snap)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        gpus, drained = watch.inventory()
        feed.view(watch.fleet(), gpus, drained, pools)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def resampled(view: FleetView, n: int) -> FleetView:
    """``view`` with a new sample from every host, as after 15 s of a live fleet: the
    busy GPUs' utilisation, power, temperature and memory moved, the rest did not."""
    hosts = []
    for host in view.hosts:
        assert host.sample is not None
        gpus = tuple(
            unchecked(g, util_gpu=80 + n % 20, power_w=300.0 + n,
                      temp_c=60 + n % 9, mem_used_mib=61_000 + n)
            if g.util_gpu else unchecked(g)
            for g in host.sample.gpus
        )  # fmt: skip
        hosts.append(replace(host, sample=Sample(seq=n, time=float(n), gpus=gpus)))
    energy = {u: e + 1e5 + n for u, e in view.energy_mj.items()}
    return replace(view, hosts=tuple(hosts), energy_mj=energy)


def fresh_ms(view: FleetView, runs: int) -> tuple[float, float]:
    """Medians, when every host sent a new sample since the last rendering: of
    ``render_parts``, and of what the server's thread does each refresh (that, joined
    into one body and gzipped)."""
    cache = ScrapeCache()
    render_parts(view, cache)
    times, kept = [], []
    for n in range(1, runs + 1):
        later = resampled(view, n)
        start = time.perf_counter()
        parts = render_parts(later, cache)
        times.append((time.perf_counter() - start) * 1000)
        packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        packer.compress(b"".join(parts)) + packer.flush()
        kept.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), statistics.median(kept)


def scrape(port: int, gzip: bool, host: str = "127.0.0.1") -> tuple[float, int, bool]:
    """One scrape of ``/metrics`` as a scraper makes it (HTTP/1.0, read into a buffer
    kept between scrapes, as Prometheus's Go client does; urllib's own reading of 48 MB
    costs more than the server's answer): milliseconds, bytes of the body as sent,
    whether it came gzipped."""
    start = time.perf_counter()
    with socket.create_connection((host, port), timeout=60) as conn:
        ask = "Accept-Encoding: gzip\r\n" if gzip else ""
        conn.sendall(f"GET /metrics HTTP/1.0\r\nHost: {host}\r\n{ask}\r\n".encode())
        got = 0
        view = memoryview(_BUFFER)
        while True:
            if got == len(_BUFFER):
                _BUFFER.extend(bytes(len(_BUFFER)))
                view = memoryview(_BUFFER)
            n = conn.recv_into(view[got:])
            if not n:
                break
            got += n
        view.release()
    took = (time.perf_counter() - start) * 1000
    head, _, _ = bytes(_BUFFER[: min(got, 4096)]).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].split()[1] == "200", lines[0]
    fields = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    size = int(fields["content-length"])
    assert got == len(head) + 4 + size, "a short answer"
    return took, size, fields.get("content-encoding") == "gzip"


_BUFFER = bytearray(1 << 26)


def served(view: FleetView, runs: int) -> dict[str, Any]:
    """A real server on this loop, scraped ``runs`` times (plain, then gzip) 0.6 s
    apart while its thread renders every 0.5 s from a view with moving readings (the
    scraper on a thread of this process: it shares the interpreter with the loop and
    the renderer, as a live head's HTTP thread does)."""

    async def run() -> dict[str, Any]:
        now = {"view": view}
        server = MetricsServer("127.0.0.1", 0, lambda: now["view"], refresh_s=0.5)
        server.start()
        try:
            first_ms, _, _ = await asyncio.to_thread(scrape, server.port, True)
            plain, packed, sizes = [], [], (0, 0)
            for n in range(1, runs + 1):
                now["view"] = resampled(view, n)
                await asyncio.sleep(0.6)  # (pacing, as a scraper's interval)
                ms, size, _ = await asyncio.to_thread(scrape, server.port, False)
                gz_ms, gz_size, was_gzip = await asyncio.to_thread(scrape, server.port, True)
                assert was_gzip, "asked for gzip, sent plain"
                plain.append(ms)
                packed.append(gz_ms)
                sizes = (size, gz_size)
        finally:
            await asyncio.to_thread(server.close)
        return {
            "metrics_scrape_ms": round(statistics.median(plain), 2),
            "metrics_scrape_max_ms": round(max(plain), 2),
            "metrics_scrape_gzip_ms": round(statistics.median(packed), 2),
            "metrics_first_scrape_ms": round(first_ms, 2),
            "bytes_sent": sizes[0],
            "gzip_bytes": sizes[1],
            "renders": server.renders,
            "scrapes": server.scrapes,
        }

    return asyncio.run(run())


def measure(hosts: int = 1000, gpus: int = 8, runs: int = 7) -> dict[str, Any]:
    """The figures at ``hosts`` x ``gpus`` (``metrics_scrape_ms``: median, served)."""
    view = fleet_view(hosts, gpus)
    cache = ScrapeCache()
    render_parts(view, cache)  # the first render writes every line
    first_ms = 0.0
    times, kept = [], []
    for n in range(runs + 1):
        # Between two renders every GPU has counted more energy (a fresh value each).
        view = replace(view, energy_mj={u: e + 1e5 + n for u, e in view.energy_mj.items()})
        start = time.perf_counter()
        parts = render_parts(view, cache)
        took = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        body = b"".join(parts)
        packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        packer.compress(body) + packer.flush()
        keep_ms = (time.perf_counter() - start) * 1000
        if n == 0:
            first_ms = took
        else:
            times.append(took)
            kept.append(took + keep_ms)
    cold = time.perf_counter()
    render(view, ScrapeCache())
    cold_ms = (time.perf_counter() - cold) * 1000
    registry = CollectorRegistry()
    registry.register(FleetCollector(lambda: view))
    start = time.perf_counter()
    baseline = generate_latest(registry)
    baseline_ms = (time.perf_counter() - start) * 1000
    series = sum(1 for line in body.splitlines() if not line.startswith(b"#"))
    loop_ms = loop_view_ms(view, runs)
    new_samples_ms, refresh_ms = fresh_ms(view, runs)
    return {
        "hosts": hosts,
        "gpus": hosts * gpus,
        "runs": runs,
        **served(view, runs),
        "metrics_render_ms": round(statistics.median(times), 2),
        "metrics_render_max_ms": round(max(times), 2),
        "metrics_render_new_samples_ms": round(new_samples_ms, 2),
        "metrics_render_kept_ms": round(statistics.median(kept), 2),
        "metrics_refresh_ms": round(refresh_ms, 2),
        "metrics_render_cold_ms": round(cold_ms, 2),
        "metrics_render_warm_first_ms": round(first_ms, 2),
        "loop_view_ms": round(loop_ms, 2),
        "generate_latest_ms": round(baseline_ms, 1),
        "same_text_as_generate_latest": baseline == body,
        "series": series,
        "bytes": len(body),
        "target_ms": TARGET_MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    report = measure(args.hosts, args.gpus, args.runs)
    print(
        f"/metrics at {report['hosts']} hosts x {args.gpus} GPUs: {report['series']:,} series,"
        f" {report['bytes'] / 1e6:.1f} MB ({report['gzip_bytes'] / 1e6:.1f} MB gzipped);"
        f" scrape {report['metrics_scrape_ms']} ms (median of {args.runs};"
        f" {report['metrics_scrape_gzip_ms']} ms gzipped; the first"
        f" {report['metrics_first_scrape_ms']} ms); rendered every refresh in"
        f" {report['metrics_render_ms']} ms ({report['metrics_render_new_samples_ms']} ms"
        f" after new samples; joined and gzipped {report['metrics_refresh_ms']} ms);"
        f" generate_latest {report['generate_latest_ms']} ms; the loop's share"
        f" (the view) {report['loop_view_ms']} ms"
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
