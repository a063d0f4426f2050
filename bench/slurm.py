"""Slurm: gputui in front of a real single-node Slurm loaded with N jobs.

    python bench/slurm.py [--jobs 2000] [--runs 7] [--seconds 20] [--vs CHECKOUT]

Starts the tests' single-node Slurm (Debian's slurm-wlm and munge, as root; see
tests/slurmcluster.py), submits ``--jobs`` held jobs plus a few running ones, then
measures, side by side in one run:

* ``queue_ms``: ``gputui queue`` (the CLI, a new process each run, from bytecode as
  an installed gputui runs: the warm-up run writes it) against
  ``squeue_ms``, ``squeue`` alone printing the same queue (median of ``--runs``,
  the two alternating; with ``--vs CHECKOUT``, the ``gputui queue`` of another
  checkout of gputui, a before or an after, alternates with them: ``queue_vs_ms``);
* ``console_refresh_ms``: one console refresh (one ``squeue``, one ``sinfo``, one
  ``scontrol show job -d``, and the join with the host's GPUs), median;
* ``ctld_rpc_per_min_1``: slurmctld's RPCs a minute (``sdiag``, its own statistics
  requests left out) with one console polling every 2 s (``slurm.refresh_s`` at its
  least), and ``ctld_rpc_per_min_10``: with ten consoles reading through a real
  ``gputui head`` that relays Slurm (``head:`` and ``slurm:`` both in hosts.yaml).

Targets: ``gputui queue`` ≤ ``squeue`` + 100 ms; ten consoles through a head cost
the controller ≤ 1.5 times one console. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from slurmcluster import SlurmCluster, installed  # noqa: E402

from gputui.config.models import Config, HeadConfig, SlurmConfig  # noqa: E402
from gputui.ui.head.slurm import HeadRelay, SlurmConsole  # noqa: E402

GPUTUI = [sys.executable, "-c", "import sys; from gputui.entry import entry; sys.exit(entry())"]
"""How an installed ``gputui`` starts (its console script: no ``runpy``), run from a
checkout: ``-c`` puts the working directory first on the path, so ``--vs CHECKOUT``
times that checkout's package."""


def rpc_total(cluster: SlurmCluster) -> int:
    """slurmctld's RPCs so far, by message type, its statistics requests left out."""
    out = cluster.cmd("sdiag").stdout
    part = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    part = part.split("Remote Procedure Call statistics by user", 1)[0]
    total = 0
    for line in part.splitlines():
        m = re.search(r"^\s*(\S+)\s+\(\s*\d+\)\s+count:(\d+)", line)
        if m and m.group(1) != "REQUEST_STATS_INFO":
            total += int(m.group(2))
    return total


def load(cluster: SlurmCluster, jobs: int) -> None:
    """``jobs`` held jobs (they stay pending) and two running ones."""
    for gpus in (1, 2):
        cluster.cmd("sbatch", f"--gres=gpu:{gpus}", "-J", f"run{gpus}", "--wrap", "sleep 3600")

    def submit(i: int) -> None:
        cluster.cmd("sbatch", "-H", "--gres=gpu:1", "-J", f"held-{i}", "--wrap", "true")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(submit, range(jobs)))


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False, cwd=cwd)
    spent = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]}: {done.stderr.decode()[-300:]}")
    return spent * 1000


def cli_ms(
    cluster: SlurmCluster, hosts: Path, runs: int, vs: Path | None = None
) -> tuple[float, float, float | None]:
    """Median ms of ``gputui queue``, of ``squeue``, and of ``--vs``'s ``gputui queue``
    (started as ``GPUTUI`` in that checkout: its own package comes first on the path)."""
    env = {**os.environ, **cluster.env, "COLUMNS": "120"}
    # An installed gputui runs from bytecode pip compiled: the warm-up run writes it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    gputui = [*GPUTUI, "--hosts", str(hosts), "queue"]
    squeue = ["squeue"]
    timed(gputui, env, ROOT), timed(squeue, env)  # warm both (page cache, imports)
    if vs is not None:
        timed(gputui, env, vs)
    ours, theirs, other = [], [], []
    for _ in range(runs):
        ours.append(timed(gputui, env, ROOT))
        theirs.append(timed(squeue, env))
        if vs is not None:
            other.append(timed(gputui, env, vs))
    return (
        statistics.median(ours),
        statistics.median(theirs),
        statistics.median(other) if other else None,
    )


async def refresh_ms(runs: int) -> float:
    console = SlurmConsole.of(SlurmConfig(refresh_s=2), dict)
    await console.subscribe()
    spent = []
    for _ in range(runs):
        start = time.perf_counter()
        await console.subscribe()
        spent.append((time.perf_counter() - start) * 1000)
    return statistics.median(spent)


async def poll(consoles: list[SlurmConsole], seconds: float) -> None:
    async def one(console: SlurmConsole) -> None:
        await console.subscribe()
        async for _ in console.pushes():
            pass

    tasks = [asyncio.create_task(one(c)) for c in consoles]
    await asyncio.sleep(seconds)
    for c in consoles:
        await c.close()
    await asyncio.gather(*tasks, return_exceptions=True)


def rpc_per_min(cluster: SlurmCluster, run: object, seconds: float) -> float:
    before = rpc_total(cluster)
    start = time.monotonic()
    asyncio.run(run)  # type: ignore[arg-type]
    return (rpc_total(cluster) - before) * 60 / (time.monotonic() - start)


def start_head(tmp: Path, cluster: SlurmCluster) -> tuple[subprocess.Popen[bytes], Path]:
    sock = tmp / "run" / "head.sock"
    config = tmp / "hosts-head.yaml"
    config.write_text(
        f"head:\n  socket: {sock}\n  database: {tmp}/db/gputui.db\n"
        "slurm:\n  refresh_s: 2\n"
        f"hosts:\n  - name: {cluster.node}\n    address: 127.0.0.1\n    port: 1\n",
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [*GPUTUI, "head", "--hosts", str(config)],
        env={**os.environ, **cluster.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise SystemExit(f"head did not start: {err.strip()[-300:]}")
        time.sleep(0.05)
    return proc, sock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--vs",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout of gputui whose `gputui queue` alternates with this one's",
    )
    args = parser.parse_args()
    if not installed():
        raise SystemExit("bench/slurm.py: needs Debian's slurm-wlm and munge (apt install)")
    if os.geteuid() != 0:
        raise SystemExit("bench/slurm.py: slurmctld and slurmd run as root: run it as root")
    cluster = SlurmCluster()
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-slurm-"))
    head = None
    try:
        cluster.start()
        os.environ.update(cluster.env)
        started = time.monotonic()
        load(cluster, args.jobs)
        print(f"loaded {args.jobs} held jobs in {time.monotonic() - started:.1f} s")
        hosts = tmp / "hosts.yaml"
        hosts.write_text("slurm:\n  refresh_s: 2\n", encoding="utf-8")
        queue, squeue, queue_vs = cli_ms(cluster, hosts, args.runs, args.vs)
        print(f"gputui queue:       {queue:8.1f} ms   squeue alone: {squeue:.1f} ms")
        if queue_vs is not None:
            print(f"gputui queue (--vs): {queue_vs:7.1f} ms   ({args.vs})")
        refresh = asyncio.run(refresh_ms(args.runs))
        print(f"console refresh:    {refresh:8.1f} ms (squeue, sinfo, scontrol -d, the join)")
        one = rpc_per_min(
            cluster, poll([SlurmConsole.of(SlurmConfig(refresh_s=2), dict)], args.seconds), 0
        )
        print(f"1 console:          {one:8.1f} slurmctld RPCs/min")
        head, sock = start_head(tmp, cluster)
        config = Config(head=HeadConfig(socket=str(sock)), slurm=SlurmConfig(refresh_s=2))

        async def ten() -> None:
            relays = [HeadRelay(config) for _ in range(10)]
            consoles = [SlurmConsole.of(config.slurm, dict, relay=r.ask) for r in relays]  # type: ignore[arg-type]
            await poll(consoles, args.seconds)
            for r in relays:
                await r.close()
            fell_back = sum(c.calls for c in consoles)
            if fell_back > 10:
                print(f"(consoles asked Slurm themselves {fell_back} times)")

        time.sleep(3)  # the head's first poll (once, before measuring)
        tenfold = rpc_per_min(cluster, ten(), 0)
        print(f"10 consoles (head): {tenfold:8.1f} slurmctld RPCs/min ({tenfold / one:.2f}x one)")
        result = {
            "jobs": args.jobs,
            "queue_ms": round(queue, 1),
            "squeue_ms": round(squeue, 1),
            "queue_over_squeue_ms": round(queue - squeue, 1),
            "console_refresh_ms": round(refresh, 1),
            "ctld_rpc_per_min_1": round(one, 1),
            "ctld_rpc_per_min_10": round(tenfold, 1),
            "ctld_ratio_10_vs_1": round(tenfold / one, 2) if one else None,
            "queue_ok": queue <= squeue + 100,
            "ctld_ok": tenfold <= 1.5 * one,
        }
        if queue_vs is not None:
            result["queue_vs_ms"] = round(queue_vs, 1)
        print(json.dumps(result))
    finally:
        if head is not None:
            head.send_signal(signal.SIGTERM)
            try:
                head.wait(10)
            except subprocess.TimeoutExpired:
                head.kill()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
