"""Fan-out: N simulated hosts over real SSH, the Fleet beside gpustat-web's pattern.

A separate process serves N simulated hosts (one asyncssh server on loopback; every
connection runs the real helper as a real process, like sshd would). In this
process, side by side in one run:

* **gputui**: the headless ``Fleet`` — one connection and ONE long-lived helper per
  host, decoding a sample per host per second;
* **baseline** (the pattern gpustat-web uses): one connection per host and, every
  5 s, a NEW exec channel that starts a fresh process printing one sample.

Both are measured on the console side (CPU of this process per decoded sample) and
on the host side (CPU of the server's descendants per sample). Host keys are
verified in both. Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncssh

from gputui.config.models import Config, HostConfig, SshDefaults
from gputui.fleet.fleet import Fleet
from gputui.remote.bundle import helper_command, helper_payload
from gputui.telemetry import HostSnapshot, HostStatus

BASELINE_INTERVAL = 5.0


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root``'s descendants, live ones and those already reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        # utime + stime, plus cutime + cstime of children it has reaped
        times[pid] = sum(int(f) for f in fields[11:15]) / tick
    total = 0.0
    for pid, cpu in times.items():
        p = parents.get(pid)
        while p and p != root and p in parents:
            p = parents[p]
        if p == root:
            total += cpu
    # children the server reaped itself
    fields = Path(f"/proc/{root}/stat").read_text().rsplit(")", 1)[1].split()
    total += (int(fields[13]) + int(fields[14])) / tick
    return total


def serve(directory: Path) -> None:
    """The host side: one SimSshServer for every simulated host."""
    from gputui.demo.server import SimSshServer

    async def run() -> None:
        client = asyncssh.read_public_key(str(directory / "client.pub"))
        host_key = asyncssh.read_private_key(str(directory / "host_key"))
        server = SimSshServer(client, host_key=host_key)
        port = await server.start()
        print(port, flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        await server.stop()

    asyncio.run(run())


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure_fleet(config: Config, seconds: float, server_pid: int) -> dict[str, Any]:
    fleet = Fleet(config, connect_options=json.loads(os.environ.get("FANOUT_SSH_OPTIONS", "{}")))
    live: set[str] = set()
    dropped: set[str] = set()
    all_live = asyncio.Event()
    n = len(config.hosts)

    def on_snapshot(snap: HostSnapshot) -> None:
        if snap.status is HostStatus.LIVE:
            live.add(snap.name)
            if len(live) == n:
                all_live.set()
        elif snap.name in live and snap.status not in (HostStatus.STALE, HostStatus.STOPPED):
            dropped.add(snap.name)

    fleet.subscribe(on_snapshot)
    start = time.monotonic()
    await fleet.start()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(all_live.wait(), timeout=max(60.0, n * 0.2))
    connect_s = time.monotonic() - start
    await asyncio.sleep(2.0)  # let every helper settle into its steady rhythm

    samples0 = sum(fleet.samples_received().values())
    # Scanning /proc stays outside the console's measured window.
    host0 = tree_cpu(server_pid)
    cpu0 = cpu_self()
    ages: list[float] = []
    measuring = 0.0  # CPU the bench spends looking at ages: not the console's
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(0.25)
        look = time.process_time()
        now = time.time()
        for snap in fleet.snapshots().values():
            if snap.sample is not None:
                ages.append(max(0.0, now - snap.sample.time))
        measuring += time.process_time() - look
    cpu1 = cpu_self() - measuring
    host1 = tree_cpu(server_pid)
    samples = sum(fleet.samples_received().values()) - samples0
    not_live = {s.name for s in fleet.snapshots().values() if s.status is not HostStatus.LIVE}
    failures = len(not_live | dropped)
    fleet.subscribe(lambda snap: None)
    live.clear()  # closing reports every host as stopped: not a failure
    await fleet.close()
    return {
        "connect_s": round(connect_s, 2),
        "failures": failures,
        "samples": samples,
        "cpu_per_sample_us": round((cpu1 - cpu0) / max(samples, 1) * 1e6, 1),
        "console_cpu_fraction": round((cpu1 - cpu0) / seconds, 3),
        "host_cpu_per_sample_us": round((host1 - host0) / max(samples, 1) * 1e6, 1),
        "p99_staleness_s": round(percentile(ages, 0.99), 3),
    }


async def measure_baseline(
    hosts: list[str],
    port: int,
    key: Path,
    known_hosts: Path,
    rounds: int,
    server_pid: int,
    concurrency: int,
) -> dict[str, Any]:
    gate = asyncio.Semaphore(concurrency)
    command = helper_command(sys.executable)
    conns: list[asyncssh.SSHClientConnection] = []

    async def connect() -> asyncssh.SSHClientConnection:
        async with gate:
            return await asyncssh.connect(
                "127.0.0.1",
                port,
                username=getpass.getuser(),
                client_keys=[str(key)],
                known_hosts=str(known_hosts),
                config=None,
                agent_path=None,
            )

    results = await asyncio.gather(*(connect() for _ in hosts), return_exceptions=True)
    conns = [c for c in results if isinstance(c, asyncssh.SSHClientConnection)]
    failures = len(results) - len(conns)
    samples = 0

    async def poll(conn: asyncssh.SSHClientConnection, name: str) -> None:
        nonlocal samples, failures
        try:
            result = await conn.run(
                command,
                input=helper_payload(["--sim", f"8xa100-80gb,name={name}", "--once"]),
                encoding=None,
                check=False,
                timeout=60,
            )
            stdout = result.stdout if isinstance(result.stdout, bytes) else b""
            lines = stdout.splitlines()
            if len(lines) >= 2 and json.loads(lines[-1]).get("type") == "sample":
                samples += 1
            else:
                failures += 1
        except (OSError, asyncssh.Error, TimeoutError, ValueError):
            failures += 1

    # Scanning /proc stays outside the console's measured window.
    host0 = tree_cpu(server_pid)
    cpu0 = cpu_self()
    started = time.monotonic()
    for r in range(rounds):
        tick = started + r * BASELINE_INTERVAL
        await asyncio.sleep(max(0.0, tick - time.monotonic()))
        await asyncio.gather(*(poll(c, f"h{i:04d}") for i, c in enumerate(conns)))
    cpu1 = cpu_self()
    host1 = tree_cpu(server_pid)
    for conn in conns:
        conn.close()
    return {
        "baseline_samples": samples,
        "baseline_failures": failures,
        "baseline_cpu_per_sample_us": round((cpu1 - cpu0) / max(samples, 1) * 1e6, 1),
        "baseline_host_cpu_per_sample_us": round((host1 - host0) / max(samples, 1) * 1e6, 1),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gputui-fanout-") as tmp:
        d = Path(tmp)
        client = asyncssh.generate_private_key("ssh-ed25519")
        client.write_private_key(str(d / "client"))
        client.write_public_key(str(d / "client.pub"))
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        host_key.write_private_key(str(d / "host_key"))
        server = subprocess.Popen(  # noqa: ASYNC220 - started once, before measuring
            [sys.executable, __file__, "--serve", str(d)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            known = d / "known_hosts"
            public = host_key.export_public_key().decode().strip()
            known.write_text(f"[127.0.0.1]:{port} {public}\n")
            names = [f"h{i:04d}" for i in range(args.hosts)]
            config = Config(
                hosts=[
                    HostConfig(
                        name=n,
                        address="127.0.0.1",
                        port=port,
                        sim=f"{args.gpus}xa100-80gb,name={n}",
                    )
                    for n in names
                ],
                defaults=SshDefaults(
                    user=getpass.getuser(),
                    identity_file=str(d / "client"),
                    known_hosts=str(known),
                    ssh_config=None,
                    python=sys.executable,
                    keepalive_interval=0,
                ),
                refresh_interval=1.0,
                connect_concurrency=args.concurrency,
            )
            ours = await measure_fleet(config, args.seconds, server.pid)
            rounds = max(1, int(args.baseline_seconds // BASELINE_INTERVAL))
            base = await measure_baseline(
                names, port, d / "client", known, rounds, server.pid, args.concurrency
            )
        finally:
            if server.stdin:
                server.stdin.close()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
    report: dict[str, Any] = {"bench": "fanout", "hosts": args.hosts, "gpus_per_host": args.gpus}
    report.update(ours)
    report.update(base)
    report["console_ratio"] = round(
        base["baseline_cpu_per_sample_us"] / max(ours["cpu_per_sample_us"], 1e-9), 1
    )
    report["host_ratio"] = round(
        base["baseline_host_cpu_per_sample_us"] / max(ours["host_cpu_per_sample_us"], 1e-9), 1
    )
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per host")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window for gputui")
    parser.add_argument(
        "--baseline-seconds", type=float, default=10.0, help="window for the baseline"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="SSH handshakes in flight")
    parser.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve))
        return 0
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    report = asyncio.run(bench(args))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
