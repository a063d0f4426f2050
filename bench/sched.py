"""Head benchmark: durable submissions per second, group commit against one commit each.

    python bench/sched.py [--clients 16] [--seconds 5] [--cli-runs 20] [--fsync-seconds 2]
                          [--database postgresql]

Starts a real ``gputui head`` subprocess (its own SQLite file, WAL, synchronous=FULL)
twice: once as shipped, once with ``--commit-per-request`` (the baseline), and drives
each with N concurrent clients over the Unix socket, each sending one ``submit`` at a
time and waiting for its durable answer. Its one host is unreachable, so every job stays
queued: this measures the request path and the commit, not launches. Then times whole
``gputui submit`` processes, and one scheduling pass over 10,000 waiting jobs against
the plain reference pass (``policy_pass.py``); one 1,000-task array submitted and
acknowledged (``array_submit_s``), and a whole pass over 10,000 tasks in 20 arrays
against one over as many single jobs, in the same run (``array_pass.py``). Beside the
two heads, the head's own CPU time per acknowledged submission
(``head_cpu_us_per_submission``: user + system time of the head process from
``/proc``, the least of three rounds; steady where rates move with the machine's other
load). Beside the two heads, the same disk's own rate of single-row durable commits
(``fsync_commits_per_s``: WAL, ``synchronous=FULL``, like the head), which bounds any
server that commits each request alone; the target is at least twice it. With
``--database postgresql``, the same head (group commit) once more on a PostgreSQL server
the benchmark starts for itself (the test suite's ``pgserver``: Debian's ``postgresql``
package, fsync and synchronous commit on, a Unix socket), beside SQLite's in the same
run. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import array_pass
import policy_pass

ROOT = Path(__file__).resolve().parent.parent
GPUTUI = [sys.executable, "-m", "gputui.entry"]


def _config(tmp: Path, database: str | None = None) -> Path:
    path = tmp / "hosts.yaml"
    path.write_text(
        "head:\n"
        f"  socket: {tmp}/run/head.sock\n"
        f"  database: {database or f'{tmp}/db/gputui.db'}\n"
        "hosts:\n"
        "  - name: gpu01\n"
        "    address: 127.0.0.1\n"
        "    port: 1\n"
        "    pool: a100\n",
        encoding="utf-8",
    )
    return path


def start_head(tmp: Path, *extra: str, database: str | None = None) -> subprocess.Popen[bytes]:
    config = _config(tmp, database)
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
    run = os.urandom(4).hex()  # request ids never repeat: a repeat is a cheap replay
    n = 0
    while time.monotonic() < stop_at:
        n += 1
        request = {
            "id": n,
            "op": "submit",
            "rid": f"b{index}-{n}-{run}",
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


def submit_rate(clients: int, seconds: float, *extra: str, database: str | None = None) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    proc = start_head(tmp, *extra, database=database)
    try:
        return asyncio.run(_drive(str(tmp / "run" / "head.sock"), clients, seconds))
    finally:
        stop_head(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) the process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _submit_n(sock: str, clients: int, each: int) -> None:
    """``clients`` connections, each sending ``each`` submissions one at a time."""

    async def one(index: int) -> None:
        reader, writer = await asyncio.open_unix_connection(sock)
        run = os.urandom(4).hex()
        for n in range(each):
            request = {
                "id": n,
                "op": "submit",
                "rid": f"c{index}-{n}-{run}",
                "args": {"argv": ["python", "train.py", "--seed", str(n)], "gpus": 1},
            }
            writer.write(json.dumps(request).encode() + b"\n")
            answer = json.loads(await reader.readline())
            if not answer.get("ok"):
                raise SystemExit(f"submit refused: {answer}")
        writer.close()

    await asyncio.gather(*(one(i) for i in range(clients)))


def head_cpu_us_per_submission(clients: int, submissions: int, repeats: int) -> float:
    """The head's own CPU time (``/proc/PID/stat``: user + system, every thread) per
    acknowledged submission, ``submissions`` of them from ``clients`` clients at a time;
    the least of ``repeats`` rounds on one head. CPU time, not wall time: other load on
    the machine barely moves it, where it moves a rate a lot."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    proc = start_head(tmp)
    sock = str(tmp / "run" / "head.sock")
    each = max(1, submissions // clients)
    try:
        asyncio.run(_submit_n(sock, clients, max(1, 500 // clients)))  # warm up
        best = float("inf")
        for _ in range(repeats):
            before = _cpu_s(proc.pid)
            asyncio.run(_submit_n(sock, clients, each))
            best = min(best, (_cpu_s(proc.pid) - before) / (each * clients))
    finally:
        stop_head(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return best * 1e6


async def _submit_arrays(sock: str, tasks: int, times: int) -> list[float]:
    reader, writer = await asyncio.open_unix_connection(sock, limit=1 << 24)
    ids = [0]
    took: list[float] = []
    for n in range(times):
        args = {"argv": ["python", "sweep.py", str(n)], "gpus": 1, "array": f"0-{tasks - 1}%8"}
        start = time.perf_counter()
        answer = await _call(reader, writer, ids, "submit", args)
        took.append(time.perf_counter() - start)
        if answer.get("array", {}).get("tasks") != tasks:
            raise SystemExit(f"the array was not acknowledged whole: {answer}")
    writer.close()
    return took


def array_submit_s(tasks: int, times: int) -> float:
    """Seconds from sending one ``tasks``-task array to its durable answer (the median
    of ``times``), on the shipped head (its one host unreachable: nothing launches)."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    proc = start_head(tmp)
    try:
        took = asyncio.run(_submit_arrays(str(tmp / "run" / "head.sock"), tasks, times))
    finally:
        stop_head(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return statistics.median(took)


def postgres_rate(clients: int, seconds: float) -> float:
    """``submit_rate`` of the head (group commit) on a PostgreSQL server of its own."""
    sys.path.insert(0, str(ROOT / "tests"))
    from pgserver import PgServer, server_bin

    bindir = server_bin()
    if bindir is None:
        raise SystemExit(
            "--database postgresql: no PostgreSQL server installed (apt install postgresql)"
        )
    server = PgServer(bindir)
    try:
        server.start()
        return submit_rate(clients, seconds, database=server.database())
    finally:
        server.stop()


def fsync_commits_per_s(seconds: float) -> float:
    """The disk's own durable-commit rate, where the heads keep their files: one
    single-row ``INSERT`` and its commit at a time, WAL and ``synchronous=FULL`` as the
    head sets them (``gputui.scheduler.store.engine``). Nothing can go faster per commit, so
    the head's submissions are judged against it, not against a fixed number."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    db = sqlite3.connect(tmp / "fsync.db", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, argv TEXT NOT NULL)")
        row = json.dumps(["python", "train.py", "--seed", "1"])
        n = 0
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < seconds:
            db.execute("BEGIN")
            db.execute("INSERT INTO t (argv) VALUES (?)", (row,))
            db.execute("COMMIT")
            n += 1
        return n / elapsed
    finally:
        db.close()
        shutil.rmtree(tmp, ignore_errors=True)


def cli_submit_ms(runs: int) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    proc = start_head(tmp)
    exe = shutil.which("gputui", path=str(Path(sys.executable).parent)) or "gputui"
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(tmp / "run" / "head.sock"))
    # An installed gputui runs from bytecode pip compiled: let the first run write it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
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


def _sim_config(tmp: Path, hosts: int) -> Path:
    lines = [
        "head:",
        f"  socket: {tmp}/run/head.sock",
        f"  database: {tmp}/db/gputui.db",
        "  kill_grace_s: 5",
        "hosts:",
    ]
    for i in range(hosts):
        lines += [
            f"  - name: sim{i:02d}",
            "    local: true",
            "    pool: sim",
            f"    sim: 8xa100-80gb,name=sim{i:02d}",
        ]
    path = tmp / "hosts.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _start_sim_head(tmp: Path, hosts: int) -> subprocess.Popen[bytes]:
    config = _sim_config(tmp, hosts)
    env = dict(os.environ, GPUTUI_JOBS_ROOT=str(tmp / "jobs"))
    proc = subprocess.Popen(
        [*GPUTUI, "head", "--hosts", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sock = tmp / "run" / "head.sock"
    deadline = time.monotonic() + 30
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("head did not start")
        time.sleep(0.02)
    return proc


async def _call(reader: Any, writer: Any, ids: list[int], op: str, args: dict[str, Any]) -> Any:
    ids[0] += 1
    request = {"id": ids[0], "op": op, "args": args, "rid": f"{op}-{ids[0]}-{time.time_ns()}"}
    writer.write(json.dumps(request).encode() + b"\n")
    await writer.drain()
    while True:
        answer = json.loads(await reader.readline())
        if answer.get("id") == ids[0]:
            if not answer.get("ok"):
                raise SystemExit(f"{op} refused: {answer}")
            return answer["result"]


async def _wait_gpus(sock: str, want: int) -> None:
    reader, writer = await asyncio.open_unix_connection(sock, limit=1 << 26)
    ids = [0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = await _call(reader, writer, ids, "cluster", {})
        live = [h for h, v in state["hosts"].items() if v["live"]]
        if len(state["gpus"]) >= want and len(live) * 8 >= want:
            writer.close()
            return
        await asyncio.sleep(0.1)
    raise SystemExit("the simulated hosts did not come up")


async def _start_latency(sock: str, jobs: int, rate: float, tmp: Path) -> list[float]:
    """Submit ``jobs`` short jobs at ``rate``/s; seconds from each submission until the
    head has the helper's report that its process runs (seen on a subscription)."""
    await _wait_gpus(sock, 64)
    sub_r, sub_w = await asyncio.open_unix_connection(sock, limit=1 << 26)
    sids = [0]
    await _call(sub_r, sub_w, sids, "subscribe", {})
    sent: dict[int, float] = {}
    running: dict[int, float] = {}

    async def watch() -> None:
        while len(running) < jobs:
            message = json.loads(await sub_r.readline())
            if message.get("push") != "state":
                continue
            now = time.monotonic()
            for job in message["state"]["jobs"]:
                if job["state"] in ("running", "completed", "failed") and job["id"] in sent:
                    running.setdefault(job["id"], now)

    watcher = asyncio.get_running_loop().create_task(watch())
    reader, writer = await asyncio.open_unix_connection(sock)
    ids = [0]
    argv = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    for _ in range(jobs):
        start = time.monotonic()
        result = await _call(reader, writer, ids, "submit", {"argv": argv, "gpus": 1, "cwd": "/"})
        sent[result["job"]["id"]] = start
        await asyncio.sleep(max(0.0, 1 / rate - (time.monotonic() - start)))
    await asyncio.wait_for(watcher, 120)
    return sorted(running[j] - sent[j] for j in sent)


async def _preempt_latency(sock: str, rounds: int, tmp: Path) -> list[float]:
    """Seconds from a preempt request leaving the client until the victim's SIGTERM
    handler runs (it writes time.time() to a file; the clocks are the same machine's)."""
    reader, writer = await asyncio.open_unix_connection(sock, limit=1 << 26)
    ids = [0]
    out: list[float] = []
    code = (
        "import signal, sys, time, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "def on_term(*_):\n"
        "    p.write_text(repr(time.time())); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "pathlib.Path(sys.argv[1] + '.ready').touch()\n"
        "time.sleep(600)\n"
    )
    for n in range(rounds):
        mark = tmp / f"term-{n}"
        argv = [sys.executable, "-c", code, str(mark)]
        job = await _call(reader, writer, ids, "submit", {"argv": argv, "gpus": 1, "cwd": "/"})
        job_id = job["job"]["id"]
        ready = Path(str(mark) + ".ready")
        deadline = time.monotonic() + 30
        while not ready.exists():  # noqa: ASYNC240 (a benchmark's own poll)
            if time.monotonic() > deadline:
                raise SystemExit("victim did not start")
            await asyncio.sleep(0.01)
        view = await _call(reader, writer, ids, "show", {"job_id": job_id})
        while view["job"]["state"] != "running":
            await asyncio.sleep(0.01)
            view = await _call(reader, writer, ids, "show", {"job_id": job_id})
        sent = time.time()
        await _call(reader, writer, ids, "preempt", {"job_id": job_id})
        while not mark.exists() or not mark.read_text():
            if time.time() - sent > 30:
                raise SystemExit("SIGTERM never came")
            await asyncio.sleep(0.002)
        out.append(float(mark.read_text()) - sent)
        # It is requeued and starts again; kill it for good.
        view = await _call(reader, writer, ids, "show", {"job_id": job_id})
        while view["job"]["state"] in ("preempting",):
            await asyncio.sleep(0.01)
            view = await _call(reader, writer, ids, "show", {"job_id": job_id})
        if view["job"]["state"] == "queued":
            await _call(reader, writer, ids, "cancel", {"job_id": job_id})
        elif view["job"]["state"] in ("running", "starting"):
            await _call(reader, writer, ids, "kill", {"job_id": job_id})
    writer.close()
    return sorted(out)


def _p99(values: list[float]) -> float:
    return values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]


def sim_latencies(jobs: int, rate: float, rounds: int) -> tuple[list[float], list[float]]:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-"))
    proc = _start_sim_head(tmp, 8)
    sock = str(tmp / "run" / "head.sock")
    try:
        starts = asyncio.run(_start_latency(sock, jobs, rate, tmp))
        preempts = asyncio.run(_preempt_latency(sock, rounds, tmp))
    finally:
        stop_head(proc)
        subprocess.run(["pkill", "-f", str(tmp)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    return starts, preempts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--cli-runs", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0, help="submissions/s for the start test")
    parser.add_argument("--preempts", type=int, default=20)
    parser.add_argument("--pass-jobs", type=int, default=10_000)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--array-submits", type=int, default=3, help="1,000-task arrays sent")
    parser.add_argument(
        "--array-passes", type=int, default=7, help="passes over arrays and over singles"
    )
    parser.add_argument(
        "--fsync-seconds", type=float, default=2.0, help="each of the two disk measurements"
    )
    parser.add_argument(
        "--cpu-submissions",
        type=int,
        default=8000,
        help="submissions per round of the head CPU measurement (3 rounds, the least kept)",
    )
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="postgresql: also measure the head on a PostgreSQL server started for the run",
    )
    args = parser.parse_args()
    passes = policy_pass.pass_figures(args.pass_jobs, 128, args.passes, naive_passes=1)
    print(
        f"scheduling pass:    {passes['pass_ms']:8.1f} ms median of {args.passes}"
        f" ({args.pass_jobs} waiting on 1,024 GPUs); naive {passes['naive_pass_ms']:.0f} ms"
        f" ({passes['pass_ratio']}x), same decisions"
    )
    starts, preempts = sim_latencies(args.jobs, args.rate, args.preempts)
    print(
        f"submit -> running:  p50 {statistics.median(starts):.3f} s, p99 {_p99(starts):.3f} s"
        f" ({args.jobs} jobs on 64 simulated GPUs)"
    )
    print(
        f"preempt -> SIGTERM: p50 {statistics.median(preempts) * 1000:.1f} ms,"
        f" p99 {_p99(preempts) * 1000:.1f} ms ({args.preempts} victims)"
    )
    # The disk's own rate is taken before and after the two heads (it moves on a shared
    # machine), and the submissions are judged against the mean of the two.
    disk = [fsync_commits_per_s(args.fsync_seconds)]
    grouped = submit_rate(args.clients, args.seconds)
    print(f"group commit:       {grouped:8.0f} durable submissions/s ({args.clients} clients)")
    baseline = submit_rate(args.clients, args.seconds, "--commit-per-request")
    print(f"commit per request: {baseline:8.0f} durable submissions/s (baseline)")
    postgres = postgres_rate(args.clients, args.seconds) if args.database == "postgresql" else None
    if postgres is not None:
        print(
            f"on PostgreSQL:      {postgres:8.0f} durable submissions/s"
            f" ({postgres / grouped:.2f}x SQLite's group commit)"
        )
    disk.append(fsync_commits_per_s(args.fsync_seconds))
    fsync = statistics.mean(disk)
    print(
        f"the disk:           {fsync:8.0f} single-row durable commits/s"
        f" ({disk[0]:.0f} before, {disk[1]:.0f} after); submissions {grouped / fsync:.2f}x that"
    )
    cpu_us = head_cpu_us_per_submission(args.clients, args.cpu_submissions, 3)
    print(
        f"head CPU:           {cpu_us:8.1f} us per durable submission"
        f" ({args.clients} clients, least of 3 rounds of {args.cpu_submissions})"
    )
    cli = cli_submit_ms(args.cli_runs)
    print(f"gputui submit:      {cli:8.1f} ms median over {args.cli_runs} runs")
    arrays = array_submit_s(1000, args.array_submits)
    print(f"array submit:       {arrays:8.3f} s for 1,000 tasks, acknowledged (median of"
          f" {args.array_submits})")  # fmt: skip
    swept = array_pass.pass_figures(10_000, 20, 128, args.array_passes)
    print(
        f"pass over arrays:   {swept['pass_ms_with_arrays']:8.1f} ms (10,000 waiting in 20"
        f" arrays); as single jobs {swept['pass_ms_same_singles']:.1f} ms"
        f" ({swept['pass_arrays_ratio']}x)"
    )
    result = {
        "clients": args.clients,
        "submit_per_s": round(grouped, 1),
        "baseline_submit_per_s": round(baseline, 1),
        "ratio": round(grouped / baseline, 2) if baseline else None,
        "fsync_commits_per_s": round(fsync, 1),
        "ratio_vs_fsync": round(grouped / fsync, 2) if fsync else None,
        "head_cpu_us_per_submission": round(cpu_us, 1),
        "cli_submit_ms": round(cli, 1),
        "submit_to_running_p99_s": round(_p99(starts), 3),
        "preempt_to_sigterm_p99_s": round(_p99(preempts), 4),
        "jobs": args.jobs,
        **passes,
        "array_submit_s": round(arrays, 3),
        **swept,
    }
    if postgres is not None:
        result["postgres_submit_per_s"] = round(postgres, 1)
        result["postgres_ratio_vs_sqlite"] = round(postgres / grouped, 2) if grouped else None
    print(json.dumps(result))


if __name__ == "__main__":
    main()
