"""Decoding: what a helper line costs the console, beside a bare ``json.loads``.

Every sample from every host goes through ``decode_helper_line``: JSON parsing,
range checks on every number, the sanitiser on every string. The baseline parses the
same line with the standard library and checks nothing, so the ratio is the price of
the checks. A hostile line (bad values to repair, lists to cut) is timed too: it must
stay within a small multiple of a good one, so a broken helper cannot buy the
console's CPU cheaply.

The sample is a busy host's, as the helper's simulator writes it: ``--jobs`` real
launcher processes here (as torchrun would be), each with one worker on every GPU, so
every GPU runs ``--jobs`` processes, each with its command line, owner, start time and
parent, and the sample names the processes up their chains (the tree view's).

    python bench/decode.py [--gpus 8] [--jobs 4] [--seconds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gputui.wire.decode import decode_helper_line

# A launcher (one job): one worker per GPU, each named as a training script and
# declaring its simulated GPU; it prints their pids, then waits for its stdin to close.
LAUNCHER = """
import os, subprocess, sys
gpus, job, cat = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
workers = [
    subprocess.Popen(
        [f"python3 train.py --config job{job}.yaml --lr 3e-4 --batch 64 --rank {rank}"],
        executable=cat,
        stdin=subprocess.PIPE,
        env=dict(os.environ, GPUTUI_SIM_GPU=str(rank), GPUTUI_SIM_MEM_MIB="20000"),
    )
    for rank in range(gpus)
]
print(*(w.pid for w in workers), flush=True)
sys.stdin.read()
for w in workers:
    w.stdin.close()
    w.wait()
"""


@contextmanager
def workload(gpus: int, jobs: int, scope: str) -> Iterator[list[int]]:
    """``jobs`` launchers, each with a worker on every simulated GPU of ``scope``;
    yields the workers' pids once each has its environment (what the simulator reads)."""
    cat = shutil.which("cat") or "/bin/cat"
    env = dict(os.environ, GPUTUI_SIM_SCOPE=scope)
    launchers = [
        subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(gpus), str(job), cat],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for job in range(jobs)
    ]
    try:
        pids = [int(pid) for launcher in launchers for pid in _line(launcher).split()]
        for pid in pids:  # exec has begun; the kernel sets the environment up just after
            deadline = time.monotonic() + 10
            while not _has_environment(pid) and time.monotonic() < deadline:
                os.sched_yield()
        yield pids
    finally:
        for launcher in launchers:
            if launcher.stdin is not None:
                launcher.stdin.close()
        for launcher in launchers:
            launcher.wait(30)


def _line(launcher: subprocess.Popen[str]) -> str:
    assert launcher.stdout is not None
    return launcher.stdout.readline()


def _has_environment(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return bool(fh.read(1))
    except OSError:
        return True  # gone or unreadable: waiting will not change it


def real_sample(gpus: int, jobs: int = 4) -> str:
    """One sample line as the helper writes it, from its simulator, with ``jobs``
    processes on every GPU (see ``workload``)."""
    scope = f"bench-decode-{os.getpid()}"
    with workload(gpus, jobs, scope) as pids:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "gputui.cli.console",
                "helper",
                "--sim",
                f"{gpus}xa100-80gb",
                "--once",
            ],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, GPUTUI_SIM_SCOPE=scope),
        ).stdout
    line = next(line for line in out.splitlines() if '"sample"' in line)
    seen = {p["pid"] for g in json.loads(line)["gpus"] for p in g.get("processes", ())}
    if seen != set(pids):
        raise SystemExit(f"decode: the helper saw {len(seen)} of the {len(pids)} processes")
    return line


def hostile(line: str) -> str:
    """The same sample with every reading impossible, a process flood on GPU 0 and a
    parent table over its cap, looping, with escape sequences in every name."""
    data = json.loads(line)
    for gpu in data["gpus"]:
        gpu.update(temp_c=-300, power_w=1e30, util_gpu=float("nan"), fan_pct="fast")
    data["gpus"][0]["processes"] = [{"pid": 1 + i, "command": "\x1b]0;x"} for i in range(600)]
    data["parents"] = [
        {"pid": 1 + i, "ppid": 1 + (i + 1) % 1100, "name": "\x1b]0;x"} for i in range(1100)
    ]
    return json.dumps(data)


def per_call(fn: Callable[[], object], seconds: float) -> float:
    """Best-of-five mean seconds per call, each round about ``seconds`` / 5 long."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(seconds / 5 / once))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=4, help="processes on each GPU")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    line = real_sample(args.gpus, args.jobs)
    bad = hostile(line)
    decode = per_call(lambda: decode_helper_line(line), args.seconds)
    baseline = per_call(lambda: json.loads(line), args.seconds)
    repair = per_call(lambda: decode_helper_line(bad), args.seconds)
    data = json.loads(line)
    result = {
        "bench": "decode",
        "gpus": args.gpus,
        "processes": sum(len(g.get("processes", ())) for g in data["gpus"]),
        "parents": len(data.get("parents", ())),
        "line_bytes": len(line),
        "decode_us": round(decode * 1e6, 1),
        "json_loads_us": round(baseline * 1e6, 1),
        "ratio_vs_json_loads": round(decode / baseline, 2),
        "hostile_line_bytes": len(bad),
        "hostile_decode_us": round(repair * 1e6, 1),
        "hostile_per_byte_vs_good": round((repair / len(bad)) / (decode / len(line)), 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
