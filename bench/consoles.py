"""Consoles: the head ingesting N hosts x 8 GPUs, consoles on its stream, and the
direct-SSH console beside them, in one run.

The host side is one replay process (``bench/replay.py``: one SSH listener serving
every simulated host's helper session from pre-made samples at 1 Hz), so what is
measured is gputui, not a thousand helper processes. Both kinds of console run with
the collector paced as ``gputui``'s console runs it (``pace_collector``). In order:

1. **direct**: the console's own ``Fleet`` (SSH to every host, no head) at
   ``--direct-hosts`` (200; a list runs each), in this process: its CPU in cores.
2. **ingest**: a real ``gputui head`` process (SQLite in a temp dir, ``/metrics`` on
   loopback) connects to ``--hosts`` hosts: ``connect_s`` from its socket answering
   to every host live (seen through a telemetry probe, which then leaves),
   ``failures`` (hosts not live at the end, or dropped once live), the head's CPU
   with no console once it holds steady after the connection burst (``settle_s``:
   at least the ten seconds in which every host sends a health reading, at most
   ``--settle-max``; ``head_cpu_cores``, per sample
   ``head_cpu_per_sample_us``: over ``--head-windows`` windows of ``--seconds`` in a
   row, each of them in ``head_cpu_windows``).
3. **consoles**: 1 console, then ``--consoles`` (50) at once, each a separate process
   running ``HeadTelemetry`` (the console's own source, decoding the deltas into
   snapshots) that shows ``--view`` hosts (as a screen does; the rest come as
   summaries): each console's CPU, the head's CPU, the head's CPU per console, the
   p99 from a sample's time at the host to the console holding it, and each host's
   staleness as the console sees it (``p99_staleness_s``, from the 1-console phase).
   What more consoles cost the head (``head_extra_cpu_cores_50_consoles``) is its
   telemetry pusher's CPU with many over with one, as the head counts it on its own
   thread (``ping``): the pushes' rounds, which are most of it but not all (a write
   the kernel did not take at once, a slow console's catch-up, the consoles'
   requests). The whole process's difference is beside it (``…_whole``).
4. **scrape**: ``/metrics`` scraped over HTTP a second apart (``metrics_scrape_ms``,
   median, and gzipped as Prometheus asks, ``metrics_scrape_gzip_ms``; the first
   scrape, which renders the text for itself, ``metrics_first_scrape_ms``), last:
   while anyone scrapes, the head makes the text ahead, at a cost of its own.

The last line is one JSON object with the figures and, under ``targets``, each
target's value, limit and ``ok``.

    python bench/consoles.py [--hosts 1000] [--consoles 50] [--seconds 15]
        [--direct-hosts 200 [1000]] [--view 5] [--head-windows 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncssh
import yaml
from metrics import scrape
from replay import HEALTH_EVERY

from gputui.common.collector import pace_collector
from gputui.config.models import Config, HostConfig, SshDefaults
from gputui.fleet.fleet import Fleet
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.telemetry import HeadTelemetry
from gputui.telemetry import HostSnapshot, HostStatus

BENCH = Path(__file__).resolve().parent
GPUS = 8
CONNECT_CONCURRENCY = 128
READY_WAIT_S = 90.0
"""A console starts measuring once every host has a sample, or after this long."""
TARGETS = {
    "connect_s": ("<=", 10.0),
    "failures": ("<=", 0),
    "p99_staleness_s": ("<=", 1.5),
    "head_cpu_cores": ("<=", 0.5),
    "console_cpu_cores": ("<=", 0.05),
    "direct_over_console": (">=", 5.0),
    "head_extra_cpu_cores_50_consoles": ("<=", 0.25),
    "metrics_scrape_ms": ("<=", 50.0),
}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_of(pid: int) -> float:
    """CPU seconds of process ``pid`` (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def names(count: int, prefix: str = "h") -> list[str]:
    return [f"{prefix}{i:04d}" for i in range(count)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the pieces --------------------------------------------------------------------


class Replay:
    """The replay process (every simulated host), started once."""

    def __init__(self, d: Path) -> None:
        client = asyncssh.generate_private_key("ssh-ed25519")
        client.write_private_key(str(d / "client"))
        client.write_public_key(str(d / "client.pub"))
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        host_key.write_private_key(str(d / "host_key"))
        self.dir = d
        self.process = subprocess.Popen(
            [sys.executable, str(BENCH / "replay.py"), "--serve", str(d), "--gpus", str(GPUS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        port, unchanged = self.process.stdout.readline().split()
        self.port = int(port)
        self.unchanged = float(unchanged)
        self.known = d / "known_hosts"
        public = host_key.export_public_key().decode().strip()
        self.known.write_text(f"[127.0.0.1]:{self.port} {public}\n")

    def hosts(self, count: int, prefix: str = "h") -> list[dict[str, Any]]:
        return [
            {
                "name": n,
                "address": "127.0.0.1",
                "port": self.port,
                "sim": f"{GPUS}xa100-80gb,name={n}",
            }
            for n in names(count, prefix)
        ]

    def defaults(self) -> dict[str, Any]:
        return {
            "user": getpass.getuser(),
            "identity_file": str(self.dir / "client"),
            "known_hosts": str(self.known),
            "ssh_config": None,
            "python": sys.executable,
            "keepalive_interval": 0,
        }

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


async def measure_direct(replay: Replay, count: int, seconds: float) -> dict[str, Any]:
    """The console's own Fleet (SSH to every host): its CPU at ``count`` hosts."""
    config = Config(
        hosts=[HostConfig(**h) for h in replay.hosts(count, prefix="d")],
        defaults=SshDefaults(**replay.defaults()),
        refresh_interval=1.0,
        connect_concurrency=CONNECT_CONCURRENCY,
    )
    fleet = Fleet(config)
    live: set[str] = set()
    everyone = asyncio.Event()

    def seen(snap: HostSnapshot) -> None:
        if snap.status is HostStatus.LIVE and snap.sample is not None:
            live.add(snap.name)
            if len(live) == count:
                everyone.set()

    fleet.subscribe(seen)
    start = time.monotonic()
    await fleet.start()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(everyone.wait(), timeout=max(60.0, count * 0.2))
    connect_s = time.monotonic() - start
    await asyncio.sleep(2.0)
    samples0 = sum(fleet.samples_received().values())
    cpu0 = cpu_self()
    await asyncio.sleep(seconds)
    cpu = cpu_self() - cpu0
    samples = sum(fleet.samples_received().values()) - samples0
    failures = sum(1 for s in fleet.snapshots().values() if s.status is not HostStatus.LIVE)
    fleet.subscribe(lambda snap: None)
    await fleet.close()
    return {
        "hosts": count,
        "connect_s": round(connect_s, 2),
        "failures": failures,
        "cpu_cores": round(cpu / seconds, 4),
        "cpu_per_sample_us": round(cpu / max(samples, 1) * 1e6, 1),
    }


class Head:
    """A real ``gputui head`` process over the replay's hosts."""

    def __init__(self, d: Path, replay: Replay, count: int, checkout: Path | None = None) -> None:
        """``checkout``: run that checkout's gputui (``bench/heads.py --vs``), not this one."""
        self.sock = d / "head.sock"
        (d / "db").mkdir()
        self.metrics_port = _free_port()
        config = {
            "head": {
                "socket": str(self.sock),
                "database": str(d / "db" / "gputui.db"),
                "metrics": f"127.0.0.1:{self.metrics_port}",
            },
            "defaults": replay.defaults(),
            "refresh_interval": 1.0,
            "connect_concurrency": CONNECT_CONCURRENCY,
            "hosts": replay.hosts(count),
        }
        self.config_path = d / "hosts.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log = d / "head.log"
        with self.log.open("ab") as log:
            env = None if checkout is None else {**os.environ, "PYTHONPATH": str(checkout)}
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gputui.entry", "head", "--hosts", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=checkout,
            )
        self.started = time.monotonic()

    async def ready(self) -> float:
        """Wait until the socket answers; seconds since the process started."""
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"gputui head exited: {self.log.read_text()[-1500:]}")
            try:
                await self.ping(timeout=5)
                return time.monotonic() - self.started
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    def cpu(self) -> float:
        return cpu_of(self.process.pid)

    async def ping(self, timeout: float = 10) -> dict[str, Any]:
        """The head's ``ping`` answer, on a connection of its own."""
        client = await AsyncHeadClient.open_local(self.sock)
        try:
            return await client.call("ping", {}, timeout=timeout)
        finally:
            await client.close()

    async def push_cpu(self) -> float:
        """CPU seconds the head's telemetry pusher has taken (``ping`` tells it),
        counted on the head's own thread: most of what the consoles cost it."""
        return float((await self.ping())["telemetry"]["cpu_s"])

    def scrape_ms(self, runs: int) -> dict[str, Any]:
        """The first scrape (it renders the text for itself), then ``runs`` scrapes a
        second apart, plain and gzipped (the head's own thread renders between them)."""
        first, _, _ = scrape(self.metrics_port, True)
        plain, packed, size, packed_size = [], [], 0, 0
        for _ in range(runs):
            time.sleep(1.0)  # (pacing, as a scraper's interval)
            ms, size, _ = scrape(self.metrics_port, False)
            plain.append(ms)
            ms, packed_size, _ = scrape(self.metrics_port, True)
            packed.append(ms)
        return {
            "metrics_scrape_ms": round(statistics.median(plain), 1),
            "metrics_scrape_gzip_ms": round(statistics.median(packed), 1),
            "metrics_first_scrape_ms": round(first, 1),
            "metrics_bytes": size,
            "metrics_gzip_bytes": packed_size,
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()


async def settle(
    head: Head, most_s: float, window_s: float = 2.0, least_s: float = HEALTH_EVERY * 1.0
) -> float:
    """Seconds until the head's CPU holds steady (two windows in a row within 10 %,
    and not pinned at a whole core), at most ``most_s``; at least ``least_s``: every
    host has sent one sample of each kind by then (a health reading every tenth, at
    1 Hz), so the head has made each kind's first answers (the first readings' checks
    and fences), which a steady head no longer makes."""
    start = time.monotonic()
    last: float | None = None
    while True:
        cpu0, wall0 = head.cpu(), time.monotonic()
        await asyncio.sleep(window_s)
        now = (head.cpu() - cpu0) / (time.monotonic() - wall0)
        steady = last is not None and abs(now - last) <= 0.1 * max(now, last, 1e-9)
        done = time.monotonic() - start
        if (steady and now < 0.95 and done >= least_s) or done >= most_s:
            return done
        last = now


async def probe_connect(head: Head, count: int) -> tuple[float, set[str]]:
    """Subscribe (no host in full) until every host has a live sample; the seconds
    from the head answering, and the hosts live at the end."""
    client = await AsyncHeadClient.open_local(head.sock)
    start = time.monotonic()
    live: set[str] = set()
    try:
        await client.call("telemetry", {"detail": []}, timeout=30)
        deadline = start + max(60.0, count * 0.1)
        pushes = client.pushes("telemetry").__aiter__()
        status: dict[str, str] = {}
        sampled: set[str] = set()
        while len(live) < count and time.monotonic() < deadline:
            try:
                push = await asyncio.wait_for(pushes.__anext__(), deadline - time.monotonic())
            except (TimeoutError, StopAsyncIteration):
                break
            for delta in push.get("hosts") or ():
                name, top = delta["host"], delta.get("top") or {}
                status[name] = top.get("status", status.get(name, ""))
                if top.get("sample"):
                    sampled.add(name)
                if status[name] == "live" and name in sampled:
                    live.add(name)
                else:
                    live.discard(name)
    finally:
        await client.close()
    return time.monotonic() - start, live


async def probe_staleness(head: Head, seconds: float) -> tuple[float | None, int]:
    """A client that takes every host in full (it names no view) for ``seconds``: the
    p99 age of each host's newest sample as the head serves it, looked at 4 times a
    second, and how many hosts had a sample."""
    client = await AsyncHeadClient.open_local(head.sock)
    newest: dict[str, float] = {}
    ages: list[float] = []

    async def follow() -> None:
        async for push in client.pushes("telemetry"):
            for delta in push.get("hosts") or ():
                sample = (delta.get("top") or {}).get("sample")
                if isinstance(sample, dict) and isinstance(sample.get("time"), float):
                    newest[delta["host"]] = sample["time"]

    try:
        await client.call("telemetry", {}, timeout=30)
        reader = asyncio.ensure_future(follow())
        await asyncio.sleep(2.0)  # the first push (everything) is in
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(0.25)
            now = time.time()
            ages.extend(now - t for t in newest.values())
        reader.cancel()
    finally:
        await client.close()
    return percentile(ages, 0.99), len(newest)


# -- one console (a child process) -----------------------------------------------------


Span = tuple[float, float, float]
"""(from, to, taken): from ``from`` to ``to`` (wall clock) a console held a host's
sample taken at ``taken``, so its age rose from ``from - taken`` to ``to - taken``."""


def age_quantile(spans: list[Span], q: float) -> float | None:
    """The ``q`` quantile over time of the age of what a console held: the age it was
    at or below for a share ``q`` of the time (each span weighs its length). Exact,
    from when samples arrived, with no clock polled meanwhile."""
    parts = [(start - taken, end - taken) for start, end, taken in spans if end > start]
    if not parts:
        return None
    above = (1.0 - q) * sum(hi - lo for lo, hi in parts)
    low, high = min(lo for lo, _ in parts), max(hi for _, hi in parts)
    for _ in range(64):  # bisection: the time spent older than ``mid`` falls as it grows
        mid = (low + high) / 2
        if sum(hi - max(lo, mid) for lo, hi in parts if hi > mid) > above:
            low = mid
        else:
            high = mid
    return high


async def console_main(config_path: Path, view: int) -> None:
    """A headless console: ``HeadTelemetry`` as the console runs it, showing ``view``
    hosts. Prints ``ready`` once every host has a sample (or after ``READY_WAIT_S``);
    on ``go`` (stdin) measures until ``stop``, then prints its figures as JSON: its
    CPU, and for the hosts on its screen the time from a sample's taking to the
    console holding it and their staleness (every host's too: the summaries').

    Staleness comes from when each sample arrived (``age_quantile``), not from looking
    at every host a few times a second: that look woke the console, and its wakeups
    counted in its CPU, while the direct console it is compared with just runs."""
    config = Config.model_validate(yaml.safe_load(config_path.read_bytes()))  # noqa: ASYNC240
    source = HeadTelemetry(config)
    all_names = [h.name for h in config.hosts]
    shown = set(all_names[:view])
    latencies: list[float] = []
    last_seq: dict[str, int] = {}
    held: dict[str, tuple[float, float]] = {}
    """host -> (since when, taken when): the sample the console holds."""
    on_screen: list[Span] = []
    every_host: list[Span] = []
    everyone = asyncio.Event()
    measuring = False

    def heard(snap: HostSnapshot) -> None:
        sample = snap.sample
        if sample is None or last_seq.get(snap.name) == sample.seq:
            return
        last_seq[snap.name] = sample.seq
        if sample.time is not None:
            now = time.time()
            if measuring:
                before = held.get(snap.name)
                if before is not None:
                    span = (before[0], now, before[1])
                    every_host.append(span)
                    if snap.name in shown:
                        on_screen.append(span)
                if snap.name in shown:
                    latencies.append(now - sample.time)
            held[snap.name] = (now, sample.time)
        if len(last_seq) == len(all_names):
            everyone.set()

    source.subscribe(heard)
    await source.start()
    source.view(all_names[:view], (all_names[0], 0))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(everyone.wait(), READY_WAIT_S)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    await reader.readline()  # go
    start = time.time()
    held = {name: (start, taken) for name, (_, taken) in held.items()}
    measuring = True
    cpu0, wall0, pushes0 = cpu_self(), time.monotonic(), source.pushes
    await reader.readline()  # stop
    wall = time.monotonic() - wall0
    cpu = cpu_self() - cpu0
    measuring = False
    end = time.time()
    for name, (since, taken) in held.items():
        every_host.append((since, end, taken))
        if name in shown:
            on_screen.append((since, end, taken))
    full = sum(1 for snap in source.snapshots().values() if _in_full(snap))
    await source.close()
    report = {
        "cpu_cores": cpu / wall,
        "latency_p99_s": percentile(latencies, 0.99),
        "latency_p50_s": percentile(latencies, 0.5),
        "staleness_p99_s": age_quantile(on_screen, 0.99),
        "summary_staleness_p99_s": age_quantile(every_host, 0.99),
        "hosts_sampled": len(last_seq),
        "samples": len(latencies),
        "pushes": source.pushes - pushes0,
        "hosts_with_detail": full,
    }
    print(json.dumps(report), flush=True)


def _in_full(snap: HostSnapshot) -> bool:
    """Whether the console holds ``snap`` in full (a process's command is there)."""
    gpus = snap.sample.gpus if snap.sample is not None else ()
    return any(p.command for g in gpus for p in g.processes)


class Consoles:
    """``count`` console processes on the head's stream."""

    def __init__(self, head: Head, count: int, view: int) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--console", str(head.config_path), "--view", str(view)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(count)
        ]

    def ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            assert proc.stdout is not None
            while True:
                if time.monotonic() > deadline:
                    raise RuntimeError("a console did not get every host in time")
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError("a console ended before it was ready")
                if line.strip() == "ready":
                    break

    def say(self, word: str) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(word + "\n")
            proc.stdin.flush()

    def reports(self) -> list[dict[str, Any]]:
        out = []
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            out.append(json.loads(line))
            proc.wait(30)
        return out


async def measure_consoles(head: Head, count: int, view: int, seconds: float) -> dict[str, Any]:
    consoles = Consoles(head, count, view)
    try:
        await asyncio.to_thread(consoles.ready, READY_WAIT_S + max(60.0, 2.0 * count))
        await asyncio.sleep(2.0)  # the first full pushes are behind them
        push0 = await head.push_cpu()
        cpu0, wall0 = head.cpu(), time.monotonic()
        consoles.say("go")
        await asyncio.sleep(seconds)
        wall = time.monotonic() - wall0
        head_cpu = (head.cpu() - cpu0) / wall
        # Asked before the consoles stop: each then works out its figures at once, and
        # fifty of them doing so leave the head no CPU to answer in time.
        push_cpu = (await head.push_cpu() - push0) / wall
        consoles.say("stop")
        reports = await asyncio.to_thread(consoles.reports)
    finally:
        for proc in consoles.procs:
            if proc.poll() is None:
                proc.kill()
    cpus = [r["cpu_cores"] for r in reports]
    latencies = [r["latency_p99_s"] for r in reports if r["latency_p99_s"] is not None]
    stale = [r["staleness_p99_s"] for r in reports if r["staleness_p99_s"] is not None]
    return {
        "consoles": count,
        "head_cpu_cores": round(head_cpu, 4),
        "head_push_cpu_cores": round(push_cpu, 5),
        "console_cpu_cores_max": round(max(cpus), 4),
        "console_cpu_cores_median": round(statistics.median(cpus), 4),
        "latency_p99_s": round(max(latencies), 3) if latencies else None,
        "staleness_p99_s": round(max(stale), 3) if stale else None,
        "summary_staleness_p99_s": max(r["summary_staleness_p99_s"] or 0 for r in reports),
        "hosts_sampled_min": min(r["hosts_sampled"] for r in reports),
        "hosts_with_detail": reports[0]["hosts_with_detail"],
    }


# -- the run ---------------------------------------------------------------------------


def _progress(report: dict[str, Any]) -> None:
    """What is measured so far, on stderr (a long run shows where it is)."""
    print(json.dumps(report), file=sys.stderr, flush=True)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"bench": "consoles", "hosts": args.hosts, "gpus_per_host": GPUS}
    with tempfile.TemporaryDirectory(prefix="gputui-consoles-") as tmp:
        d = Path(tmp)
        replay = Replay(d)
        report["replay_unchanged_fraction"] = replay.unchanged
        head: Head | None = None
        try:
            direct = {}
            for count in args.direct_hosts:
                direct[str(count)] = await measure_direct(replay, count, args.seconds)
                report["direct"] = direct
                _progress(report)
            head = Head(d, replay, args.hosts)
            report["head_start_s"] = round(await head.ready(), 2)
            connect_s, live = await probe_connect(head, args.hosts)
            report["connect_s"] = round(connect_s, 2)
            # Past the connection burst: the head catches up on what came while it was
            # connecting (every host's first samples, their inventories) before its
            # steady cost is taken; connect_s above is the burst's own figure.
            report["settle_s"] = round(await settle(head, args.settle_max), 1)
            # Its steady cost is an average over some windows in a row: the head's
            # own rounds (a sweep of the hosts every two seconds at 1,000 hosts, a
            # readings flush every half minute, a young collection about once a
            # minute) each fall into one window or the next, so one window alone
            # read 0.41 to 0.56 cores at the same code. Each window is reported too.
            cpu0, wall0 = head.cpu(), time.monotonic()
            windows = []
            for _ in range(args.head_windows):
                cpu1, wall1 = head.cpu(), time.monotonic()
                await asyncio.sleep(args.seconds)
                windows.append((head.cpu() - cpu1) / (time.monotonic() - wall1))
            head_cpu = (head.cpu() - cpu0) / (time.monotonic() - wall0)
            report["head_cpu_cores"] = round(head_cpu, 4)
            report["head_cpu_windows"] = [round(w, 4) for w in windows]
            report["head_cpu_per_sample_us"] = round(head_cpu / args.hosts * 1e6, 1)
            stale, sampled = await probe_staleness(head, args.seconds)
            report["p99_staleness_s"] = None if stale is None else round(stale, 3)
            report["hosts_sampled"] = sampled
            _progress(report)
            one = await measure_consoles(head, 1, args.view, args.seconds)
            report["one_console"] = one
            _progress(report)
            many = await measure_consoles(head, args.consoles, args.view, args.seconds)
            report["many_consoles"] = many
            _progress(report)
            # Scraped last: while anyone scrapes, the head's metrics thread makes the
            # text ahead (its own cost, measured by bench/metrics.py), which would
            # count in the consoles' figures above.
            report.update(await asyncio.to_thread(head.scrape_ms, args.scrapes))
            _progress(report)
            try:
                _, live_end = await probe_connect(head, args.hosts)
            except HeadError as exc:
                live_end = set()
                report["head_lost"] = exc.message
            report["failures"] = args.hosts - len(live & live_end)
            if head.process.poll() is not None:
                report["head_exit"] = head.process.returncode
                report["head_log"] = head.log.read_text()[-800:]
        finally:
            if head is not None:
                head.stop()
            replay.stop()
    one, many = report["one_console"], report["many_consoles"]
    report["p99_on_screen_staleness_s"] = max(
        (v for v in (one["staleness_p99_s"], many["staleness_p99_s"]) if v is not None),
        default=None,
    )
    report["p99_sample_to_console_s"] = max(
        (v for v in (one["latency_p99_s"], many["latency_p99_s"]) if v is not None), default=None
    )
    report["console_cpu_cores"] = max(
        one["console_cpu_cores_max"], many["console_cpu_cores_median"]
    )
    report["head_cpu_per_console_cores"] = round(
        (many["head_cpu_cores"] - report["head_cpu_cores"]) / args.consoles, 5
    )
    # Scaled to 50 when fewer were run (bench-check's small run): per console, times 49.
    scale = 1.0 if args.consoles == 50 else 49 / max(args.consoles - 1, 1)
    # What the consoles cost the head's pusher, as it counts it on its own thread (most
    # of their cost, not all): the whole process's CPU holds the fleet's ingest too,
    # which moves by a tenth of a core between two windows here, and times 49/9 that
    # swamps the consoles' share. The whole-process difference is reported beside it.
    extra = many["head_push_cpu_cores"] - one["head_push_cpu_cores"]
    report["head_extra_cpu_cores_50_consoles"] = round(extra * scale, 4)
    whole = many["head_cpu_cores"] - one["head_cpu_cores"]
    report["head_extra_cpu_cores_50_consoles_whole"] = round(whole * scale, 4)
    d200 = report["direct"].get("200") or next(iter(report["direct"].values()))
    report["direct_console_cpu_cores_200"] = d200["cpu_cores"]
    report["direct_over_console"] = round(
        d200["cpu_cores"] / max(report["console_cpu_cores"], 1e-9), 2
    )
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    ops = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}
    report["targets"] = {
        key: {
            "value": report.get(key),
            "limit": f"{op} {limit}",
            "ok": report.get(key) is not None and ops[op](report[key], limit),
        }
        for key, (op, limit) in TARGETS.items()
    }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--consoles", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0, help="each measured window")
    parser.add_argument("--direct-hosts", type=int, nargs="+", default=[200])
    parser.add_argument("--view", type=int, default=5, help="hosts each console shows")
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument(
        "--head-windows",
        type=int,
        default=3,
        help="windows of --seconds in a row that the head's own CPU is averaged over",
    )
    parser.add_argument(
        "--settle-max", type=float, default=60.0,
        help="seconds at most, after connecting, for the head's CPU to hold steady",
    )  # fmt: skip
    parser.add_argument("--console", metavar="HOSTS_YAML", help=argparse.SUPPRESS)
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    pace_collector()  # both consoles (the direct one runs in this process) as gputui runs
    if args.console:
        asyncio.run(console_main(Path(args.console), args.view))
        return 0
    report = asyncio.run(bench(args))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
