"""Rendering: the real console with G GPUs updating at 1 Hz, beside a stock DataTable.

Each variant runs as its own process on a real pseudo-terminal (200x50), fed by the
same synthetic source: G GPUs in hosts of 8, six fields of every GPU changing every
second (utilisation, memory, temperature, power, fan, SM clock). Measured per
variant: the process's CPU over the window as a fraction of one core, and for the
console the latency of a key: a cursor key written to the pty until the first bytes
of the repaint come back. Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pty
import random
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping
from fcntl import ioctl
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

COLS, ROWS = 200, 50
GPUS_PER_HOST = 8
VARIANTS = 5


def synthetic_hosts(gpus: int) -> list[tuple[str, int]]:
    hosts = []
    left = gpus
    i = 0
    while left > 0:
        n = min(GPUS_PER_HOST, left)
        hosts.append((f"node{i:04d}", n))
        left -= n
        i += 1
    return hosts


class SyntheticSource:
    """A ``TelemetrySource`` whose GPUs all change six fields every tick."""

    def __init__(self, gpus: int, interval: float = 1.0) -> None:
        from gputui.telemetry import HostSnapshot, HostStatus
        from gputui.wire.messages import GpuInfo, Hello

        self.interval = interval
        self.rng = random.Random(7)
        self.listeners: list[Callable[[Any], None]] = []
        self.snaps: dict[str, Any] = {}
        self.task: asyncio.Task[None] | None = None
        self.seq = 0
        for name, n in synthetic_hosts(gpus):
            hello = Hello(
                protocol=1,
                helper_version="0.1.0",
                hostname=name,
                driver="550.127.05",
                gpus=tuple(
                    GpuInfo(
                        index=i,
                        uuid=f"GPU-{name}-{i}",
                        name="NVIDIA A100-SXM4-80GB",
                        memory_total_mib=81920,
                        power_limit_w=400.0,
                    )
                    for i in range(n)
                ),
            )
            self.snaps[name] = HostSnapshot(
                name=name, address=name, status=HostStatus.LIVE, hello=hello
            )
        # Samples are made up front, so the source costs next to nothing per tick and
        # both variants are measured on rendering alone.
        self.variants = {name: [self._sample(name) for _ in range(VARIANTS)] for name in self.snaps}

    def snapshots(self) -> Mapping[str, Any]:
        return self.snaps

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    async def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def close(self) -> None:
        if self.task:
            self.task.cancel()

    def _sample(self, name: str) -> Any:
        from gputui.wire.messages import GpuSample, Sample

        snap = self.snaps[name]
        r = self.rng
        gpus = tuple(
            GpuSample(
                index=g.index,
                uuid=g.uuid,
                util_gpu=r.randint(0, 100),
                mem_used_mib=r.randint(0, 81920),
                mem_total_mib=81920,
                temp_c=r.randint(30, 85),
                power_w=round(r.uniform(50, 400), 1),
                power_limit_w=400.0,
                fan_pct=r.randint(30, 100),
                clock_sm_mhz=r.randint(210, 1410),
            )
            for g in snap.hello.gpus
        )
        return Sample(seq=self.seq, time=time.time(), gpus=gpus)

    async def _run(self) -> None:
        from gputui.telemetry import HostStatus

        while True:
            self.seq += 1
            now = time.time()
            for name in list(self.snaps):
                sample = self.variants[name][self.seq % VARIANTS]
                snap = self.snaps[name].with_changes(
                    sample=sample, received_at=now, status=HostStatus.LIVE
                )
                self.snaps[name] = snap
                for listener in self.listeners:
                    listener(snap)
            await asyncio.sleep(self.interval)


def run_console(gpus: int) -> None:
    from gputui.config.models import Config
    from gputui.ui.app import GpuTuiApp

    GpuTuiApp(SyntheticSource(gpus), Config()).run()


def run_baseline(gpus: int) -> None:
    """A stock DataTable, one row per GPU, updated cell by cell."""
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    source = SyntheticSource(gpus)
    columns = ["host", "gpu", "model", "util", "mem", "temp", "power", "fan", "sm"]

    class Baseline(App[None]):
        BINDINGS = [("q", "quit", "Quit")]

        def compose(self) -> ComposeResult:
            yield DataTable(cursor_type="row")

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            for c in columns:
                table.add_column(c, key=c)
            for name, snap in source.snaps.items():
                for g in snap.hello.gpus:
                    table.add_row(name, str(g.index), g.name, "", "", "", "", "", "", key=g.uuid)
            source.subscribe(self.on_snapshot)
            self.run_worker(source.start())

        def on_snapshot(self, snap: Any) -> None:
            table = self.query_one(DataTable)
            for g in snap.sample.gpus:
                table.update_cell(g.uuid, "util", f"{g.util_gpu}%")
                table.update_cell(g.uuid, "mem", f"{g.mem_used_mib / 1024:.1f}G")
                table.update_cell(g.uuid, "temp", f"{g.temp_c}C")
                table.update_cell(g.uuid, "power", f"{g.power_w:.0f}W")
                table.update_cell(g.uuid, "fan", f"{g.fan_pct}%")
                table.update_cell(g.uuid, "sm", f"{g.clock_sm_mhz}")

    Baseline().run()


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PtyChild:
    def __init__(self, variant: str, gpus: int) -> None:
        self.master, slave = pty.openpty()
        ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", variant, "--gpus", str(gpus)],
            stdin=slave,
            stdout=slave,
            stderr=slave,  # Textual draws on stderr
            env=env,
            start_new_session=True,
        )
        os.close(slave)

    def drain(self, seconds: float) -> int:
        """Read whatever the app writes for ``seconds``; return the byte count."""
        end = time.monotonic() + seconds
        total = 0
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    total += len(os.read(self.master, 65536))
                except OSError:
                    break
        return total

    def key_latency(self, key: bytes, timeout: float = 2.0) -> float:
        self.drain(0.0)
        start = time.perf_counter()
        os.write(self.master, key)
        while True:
            ready, _, _ = select.select([self.master], [], [], timeout)
            if not ready:
                return timeout
            if os.read(self.master, 65536):
                return time.perf_counter() - start

    def stop(self) -> None:
        try:
            os.write(self.master, b"q")
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def measure(variant: str, gpus: int, seconds: float, keys: int) -> dict[str, float]:
    child = PtyChild(variant, gpus)
    try:
        child.drain(6.0)  # start-up, first full paint, a few ticks
        cpu0 = proc_cpu(child.proc.pid)
        t0 = time.monotonic()
        child.drain(seconds)
        cpu = (proc_cpu(child.proc.pid) - cpu0) / (time.monotonic() - t0)
        latencies = []
        for i in range(keys):
            latencies.append(child.key_latency(b"\x1b[B" if i % 2 == 0 else b"\x1b[A"))
            child.drain(0.1)
    finally:
        child.stop()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else 0.0
    return {
        "cpu_fraction": round(cpu, 4),
        "key_p99_ms": round(p99 * 1000, 1),
        "key_p50_ms": round(latencies[len(latencies) // 2] * 1000, 1) if latencies else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--keys", type=int, default=60)
    parser.add_argument("--child", choices=["console", "baseline"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "console":
        run_console(args.gpus)
        return 0
    if args.child == "baseline":
        run_baseline(args.gpus)
        return 0
    ours = measure("console", args.gpus, args.seconds, args.keys)
    base = measure("baseline", args.gpus, args.seconds, args.keys)
    report = {
        "bench": "render",
        "gpus": args.gpus,
        "ui_cpu_fraction": ours["cpu_fraction"],
        "baseline_ui_cpu_fraction": base["cpu_fraction"],
        "ratio": round(base["cpu_fraction"] / max(ours["cpu_fraction"], 1e-9), 1),
        "key_p99_ms": ours["key_p99_ms"],
        "key_p50_ms": ours["key_p50_ms"],
        "baseline_key_p99_ms": base["key_p99_ms"],
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
