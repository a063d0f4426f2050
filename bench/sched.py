"""Head benchmark: durable submissions per second, group commit against one commit each.

    python bench/sched.py [--clients 16] [--seconds 5] [--cli-runs 20]

Starts a real ``gputui head`` subprocess (its own SQLite file, WAL, synchronous=FULL)
twice: once as shipped, once with ``--commit-per-request`` (the baseline), and
drives each with N concurrent clients over the Unix socket, each sending one
``submit`` at a time and waiting for its durable answer. Its one host is
unreachable, so every job stays queued: this measures the request path and the
commit, not launches. Then times whole ``gputui submit`` processes. The last line
printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPUTUI = [sys.executable, "-m", "gputui.entry"]


def _config(tmp: Path) -> Path:
    path = tmp / "hosts.yaml"
    path.write_text(
        "head:\n"
        f"  socket: {tmp}/run/head.sock\n"
        f"  database: {tmp}/db/gputui.db\n"
        "hosts:\n"
        "  - name: gpu01\n"
        "    address: 127.0.0.1\n"
        "    port: 1\n"
        "    pool: a100\n",
        encoding="utf-8",
    )
    return path


def start_head(tmp: Path, *extra: str) -> subprocess.Popen[bytes]:
    config = _config(tmp)
    proc = subprocess.Popen(
        [*GPUTUI, "head", "--hosts", str(config), *extra],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    sock = tmp / "run" / "head.sock"
    deadline = time.monotonic() + 30
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise SystemExit(f"head did not start: {err.strip()[:300]}")
        time.sleep(0.02)
    return proc


def stop_head(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _client(sock: str, stop_at: float, counts: list[int], index: int) -> None:
    reader, writer = await asyncio.open_unix_connection(sock)
    n = 0
    while time.monotonic() < stop_at:
        n += 1
        request = {
            "id": n,
            "op": "submit",
            "rid": f"b{index}-{n}-{os.getpid()}",
            "args": {"argv": ["python", "train.py", "--seed", str(n)], "gpus": 1},
        }
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        answer = json.loads(await reader.readline())
        if not answer.get("ok"):
            raise SystemExit(f"submit refused: {answer}")
        counts[index] += 1
    writer.close()


async def _drive(sock: str, clients: int, seconds: float) -> float:
    counts = [0] * clients
    # Warm up (connections, first pages of the file), then measure.
    await asyncio.gather(
        *(_client(sock, time.monotonic() + 0.5, [0] * clients, i) for i in range(clients))
    )
    start = time.monotonic()
    await asyncio.gather(*(_client(sock, start + seconds, counts, i) for i in range(clients)))
    return sum(counts) / (time.monotonic() - start)


def submit_rate(clients: int, seconds: float, *extra: str) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    proc = start_head(tmp, *extra)
    try:
        return asyncio.run(_drive(str(tmp / "run" / "head.sock"), clients, seconds))
    finally:
        stop_head(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def cli_submit_ms(runs: int) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    proc = start_head(tmp)
    exe = shutil.which("gputui", path=str(Path(sys.executable).parent)) or "gputui"
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(tmp / "run" / "head.sock"))
    times = []
    try:
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(
                [exe, "submit", "-g", "1", "--", "true"], env=env, check=True, capture_output=True
            )
            times.append((time.perf_counter() - start) * 1000)
    finally:
        stop_head(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--cli-runs", type=int, default=20)
    args = parser.parse_args()
    grouped = submit_rate(args.clients, args.seconds)
    print(f"group commit:       {grouped:8.0f} durable submissions/s ({args.clients} clients)")
    baseline = submit_rate(args.clients, args.seconds, "--commit-per-request")
    print(f"commit per request: {baseline:8.0f} durable submissions/s (baseline)")
    cli = cli_submit_ms(args.cli_runs)
    print(f"gputui submit:      {cli:8.1f} ms median over {args.cli_runs} runs")
    result = {
        "clients": args.clients,
        "submit_per_s": round(grouped, 1),
        "baseline_submit_per_s": round(baseline, 1),
        "ratio": round(grouped / baseline, 2) if baseline else None,
        "cli_submit_ms": round(cli, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
