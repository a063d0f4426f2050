"""Ingest: the head's CPU per host sample, in one process, without SSH or timers.

What ``bench/consoles.py`` measures as ``head_cpu_per_sample_us`` (a real head over
the replay's hosts, wall-clock paced, on a shared machine), taken apart: a real
``Head`` over a SQLite file, its hosts' lines made by ``bench/replay.py``'s
``Templates`` (the real helper's hello and samples, busy and idle GPUs, processes,
health readings every tenth sample). Per simulated second, for each of ``--hosts``
hosts: the host's next sample line through its ``HostFeed`` (the fleet's decode and
snapshot), the head's ``_on_snapshot`` (host watch, health board, meter, telemetry,
``/metrics``' feed), each item it posts applied by the writer as the real one does
(a batch per sample: a head at 1 Hz over a thousand hosts wakes its writer once a
sample); then the timer's round (tick, ownership, health) and its batch. The clock
is the simulated one, so a run is the same every time; ``time.process_time`` is
read around every round, and the figure is the fastest of ``--repeats`` runs of
``--seconds`` rounds each, after ``--warmup`` rounds (connects, inventory).

    python bench/ingest.py [--hosts 200] [--seconds 10] [--repeats 5]

The last line is JSON: ``us_per_sample`` (the fastest repeat), every repeat's,
the same split into the snapshot path and the writer's batches, and the baseline:
``json.loads`` of the same lines (``ratio_vs_json_loads``: the head's CPU per sample
over it, what ``make bench-check`` holds to a ceiling).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay import Templates, host_uuid

from gputui.cli.head import _settings
from gputui.common.collector import pace_collector
from gputui.config.models import Config
from gputui.fleet.feed import HostFeed
from gputui.scheduler.head.batch import Item
from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.fleet_hostops import FleetHosts
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.telemetry import HostSnapshot, HostStatus

GPUS = 8


class _Clock:
    """The head's clock: simulated seconds from a fixed start."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class _NoSession:
    pending: dict[int, Any] = {}


def _config(d: Path, count: int) -> Config:
    hosts = [{"name": f"h{i:04d}", "address": "127.0.0.1", "sim": f"{GPUS}xa100-80gb,name=h{i:04d}"}
             for i in range(count)]  # fmt: skip
    return Config.model_validate(
        {
            "head": {
                "socket": str(d / "head.sock"),
                "database": str(d / "gputui.db"),
                "metrics": "127.0.0.1:9",  # the feed is kept; no server is started
            },
            "refresh_interval": 1.0,
            "hosts": hosts,
        }
    )


class Rig:
    """A head over ``count`` replayed hosts, driven round by round."""

    def __init__(self, d: Path, count: int, templates: Templates) -> None:
        config = _config(d, count)
        args = argparse.Namespace(
            socket=None, database=None, metrics=None, commit_per_request=False
        )
        _, database, settings = _settings(config, args)
        self.store = SqlStore.open(Path(str(database)))
        self.clock = _Clock()
        hosts = FleetHosts(config, self.store.jobs_namespace())
        pools = {h.name: h.pool for h in config.resolved()}
        self.head = Head(self.store, hosts, settings, host_pools=pools, clock=self.clock)  # type: ignore[arg-type]
        self.head._load()
        self.templates = templates
        self.names = list(pools)
        self.tags = {n: host_uuid(n, 0)[4:12].encode() for n in self.names}
        self.feeds: dict[str, Any] = {}
        self.seq = 0
        self.snapshot_s = 0.0
        self.writer_s = 0.0
        for name in self.names:
            feed = HostFeed(
                HostSnapshot(name=name, address="127.0.0.1", pool=pools[name]),
                self._on_snapshot,
                wall_clock=self.clock,  # (the head's: a sample arrives when the head says)
            )
            self.feeds[name] = feed
            feed.hello(_decoded_hello(templates, name, self.tags[name]))
            on_line = feed.line_handler(_NoSession())  # type: ignore[arg-type]
            on_line(b'{"type":"jobs","jobs":[]}\n')
            self.feeds[name] = on_line
        self.flush()

    def _on_snapshot(self, snap: HostSnapshot) -> None:
        start = time.process_time()
        self.head._on_snapshot(snap)
        middle = time.process_time()
        self.flush()
        end = time.process_time()
        self.snapshot_s += middle - start
        self.writer_s += end - middle

    def flush(self) -> None:
        """The writer: every item posted so far, as one batch (as it takes them)."""
        items: list[Item] = self.head._inbox.drain()
        if items:
            self.head.write(items)

    async def round(self) -> float:
        """One simulated second: every host's next sample, then the timer's round and
        the background work they started (reads for ``/metrics``, the meter's and the
        readings' flushes) to its end; the CPU seconds it took (the lines are made
        first, outside it)."""
        self.seq += 1
        self.clock.now += 1.0
        now = self.clock.now
        tpl, feeds = self.templates, self.feeds
        lines = [
            (feeds[name], tpl.line(k + self.seq, name, self.tags[name], self.seq, now))
            for k, name in enumerate(self.names)
        ]
        start = time.process_time()
        for on_line, line in lines:
            on_line(line)
        middle = time.process_time()
        self.head.tick(self.clock.now - 3600)
        self.flush()
        # The background work to its end. Some of it waits for the writer (a readings
        # flush that a big fleet starts before its minute, once FLUSH_READINGS wait:
        # ``call_tx``), which is this loop's ``flush``: so it runs whenever something
        # ended or a moment passed, never only once all has ended.
        while others := [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
            await asyncio.wait(others, timeout=0.005, return_when=asyncio.FIRST_COMPLETED)
            self.flush()
        end = time.process_time()
        self.writer_s += end - middle
        return end - start

    def close(self) -> None:
        self.head._reader.shutdown(wait=True)
        self.store.close()


def _decoded_hello(templates: Templates, name: str, tag: bytes) -> Any:
    from gputui.wire.decode import decode_helper_line

    return decode_helper_line(templates.hello_line(name, tag))


def _json_loads_us(templates: Templates, count: int) -> float:
    """The baseline: ``json.loads`` of the same lines, microseconds a line (the machine's
    speed now, for a ratio that a busy machine moves less)."""
    lines = [templates.line(k, f"h{k:04d}", b"00000000", k, 1e9 + k) for k in range(count)]
    start = time.process_time()
    for line in lines:
        json.loads(line)
    return (time.process_time() - start) / count * 1e6


def _profiler(path: str | None) -> Any:
    """A running cProfile of the measured rounds (``--profile``), else None."""
    if path is None:
        return None
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    templates = Templates(GPUS, variants=60)
    pace_collector(args.hosts)  # as gputui head does
    runs, snap_runs, writer_runs, baseline = [], [], [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="gputui-ingest-") as tmp:
            rig = Rig(Path(tmp), args.hosts, templates)
            try:
                for _ in range(args.warmup):
                    await rig.round()
                latest = [rig.head.telemetry.latest(n) for n in rig.names]
                assert all(s is not None and s.status is HostStatus.LIVE for s in latest)
                rig.snapshot_s = rig.writer_s = 0.0
                profiler = _profiler(args.profile)
                took = sum([await rig.round() for _ in range(args.seconds)])
                if profiler is not None:
                    profiler.disable()
                    profiler.dump_stats(args.profile)
            finally:
                rig.close()
        samples = args.hosts * args.seconds
        baseline.append(_json_loads_us(templates, args.hosts))
        runs.append(took / samples * 1e6)
        snap_runs.append(rig.snapshot_s / samples * 1e6)
        writer_runs.append(rig.writer_s / samples * 1e6)
    return {
        "bench": "ingest",
        "hosts": args.hosts,
        "gpus_per_host": GPUS,
        "seconds": args.seconds,
        "us_per_sample": round(min(runs), 1),
        "us_per_sample_runs": [round(r, 1) for r in runs],
        "snapshot_us_per_sample": round(min(snap_runs), 1),
        "writer_us_per_sample": round(min(writer_runs), 1),
        "unchanged_fraction": round(templates.unchanged_fraction, 3),
        "json_loads_us": round(min(baseline), 1),
        "ratio_vs_json_loads": round(min(runs) / min(baseline), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=10, help="simulated seconds measured")
    parser.add_argument("--warmup", type=int, default=3, help="simulated seconds first")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", metavar="FILE", help="cProfile one run's measured rounds")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.profile:
        args.repeats = 1
    report = asyncio.run(measure(args))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
