"""The scheduling pass over arrays against the same number of single jobs.

    python bench/array_pass.py [--tasks 10000] [--arrays 20] [--hosts 128] [--passes 7]

Two real SQLite stores (the head's own, migrated) on one cluster of 128 hosts of 8
GPUs, most of them held by running jobs (rows and allocations), a few free. In one,
10,000 single jobs wait; in the other, the same 10,000 as tasks of 20 arrays, each
array with the shape, class and group a single job of the first store has. One
whole pass (``lifecycle.schedule``: the store's reads, the line, the policy, the
placements and reasons written) is timed on each, in the same run, rolled back after
each so every pass sees the same queue (after one pass kept, so that each waiting job
already has its reason, as on a head that has been running). The median of the
passes is reported; the last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from gputui.scheduler.head import lifecycle
from gputui.scheduler.head.actions import Context, Rules
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy.passes import decide
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore

NOW = 1_800_000_000.0
SHAPES = (1, 1, 1, 1, 2, 2, 4, 8)
CLASSES = ("urgent", "normal", "normal", "low")


class _Undo(Exception):
    """Raised inside the savepoint to undo a measured pass."""


def _base(rnd: random.Random, n: int) -> dict[str, Any]:
    return {
        "uid": 1000 + n % 40,
        "user": f"user{n % 40}",
        "group": f"group{n % 8}",
        "name": "train",
        "argv": '["python", "train.py"]',
        "gpus": rnd.choice(SHAPES),
        "priority": rnd.choice(CLASSES),
        "time_limit_s": rnd.choice((None, 1800.0, 3600.0, 4 * 3600.0)),
        "submitted_at": NOW - rnd.uniform(0, 86_400),
        "state": "queued",
        "reason": "Resources",
    }


def _cluster(hosts: int, seed: int) -> tuple[tuple[policy.GpuSlot, ...], list[dict[str, Any]]]:
    """The GPUs, and a running 1-GPU job on each GPU but about one in twelve."""
    rnd = random.Random(seed)
    slots: list[policy.GpuSlot] = []
    running: list[dict[str, Any]] = []
    for h in range(hosts):
        host = f"gpu{h:03d}"
        for k in range(8):
            uuid = f"GPU-{h:03d}-{k}"
            slots.append(policy.GpuSlot(uuid, host, k, "default", "A100"))
            if rnd.random() < 0.08:
                continue
            started = NOW - rnd.uniform(0, 20_000)
            running.append(
                {
                    **_base(rnd, len(running)),
                    "gpus": 1,
                    "state": "running",
                    "reason": "",
                    "host": host,
                    "gpu_uuids": json.dumps([uuid]),
                    "started_at": started,
                    "launches": 1,
                    "run_as": "root",
                }
            )
    return tuple(slots), running


def _fill(path: Path, hosts: int, tasks: int, arrays: int, seed: int) -> SqlStore:
    """A store with the cluster's running jobs and ``tasks`` waiting: single jobs, or
    (``arrays`` > 0) that many arrays sharing them out."""
    store = SqlStore(open_store(path))
    slots, running = _cluster(hosts, seed)
    rnd = random.Random(seed + 1)
    with store.batch() as tx:
        ids = tx.insert_jobs(running)
        for job_id, row in zip(ids, running, strict=True):
            tx.allocate(json.loads(row["gpu_uuids"]), row["host"], NOW, job_id=job_id)
        if arrays == 0:
            tx.insert_jobs([_base(rnd, n) for n in range(tasks)])
        else:
            per = tasks // arrays
            for a in range(arrays):
                base = _base(rnd, a)
                rows = [{**base, "array_task": t, "array_throttle": None} for t in range(per)]
                tx.link_array(tx.insert_jobs(rows))
    store.slots = slots  # type: ignore[attr-defined]
    _settle(store, slots)
    return store


def _settle(store: SqlStore, slots: tuple[policy.GpuSlot, ...]) -> None:
    """One pass kept, so each waiting job has the reason a pass gives it (as on a
    head that has run a while: a measured pass writes only what changes); then what
    it placed is put back in line, so the measured passes have the free GPUs too."""
    with store.batch() as tx:
        ctx = Context(now=NOW, slots=slots, rules=Rules(), changed=True)
        lifecycle.schedule(tx, ctx, decide, {s.host: "root" for s in slots})
    with store.batch() as tx:
        for job in tx.jobs(("starting",)):
            tx.free(NOW, job_id=job.id)
            job.state, job.host, job.gpu_uuids, job.launches = "queued", None, "[]", 0
        tx.flush()


def _pass(store: SqlStore, slots: tuple[policy.GpuSlot, ...]) -> tuple[float, int]:
    """One pass, undone after; (seconds, jobs placed)."""
    placed = 0
    start = 0.0
    elapsed = 0.0
    with store.batch() as tx:
        try:
            with tx.savepoint():
                ctx = Context(now=NOW, slots=slots, rules=Rules(), changed=True)
                logins = {s.host: "root" for s in slots}
                start = time.perf_counter()
                placed = len(lifecycle.schedule(tx, ctx, decide, logins))
                elapsed = time.perf_counter() - start
                raise _Undo
        except _Undo:
            pass
    return elapsed, placed


def pass_figures(tasks: int, arrays: int, hosts: int, passes: int) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-bench-arrays-"))
    try:
        singles = _fill(tmp / "singles" / "gputui.db", hosts, tasks, 0, seed=7)
        swept = _fill(tmp / "arrays" / "gputui.db", hosts, tasks, arrays, seed=7)
        slots = singles.slots  # type: ignore[attr-defined]
        single_s: list[float] = []
        array_s: list[float] = []
        placed = (0, 0)
        gc.collect()
        for _ in range(passes):  # interleaved: the machine's load falls on both alike
            s, p1 = _pass(singles, slots)
            a, p2 = _pass(swept, slots)
            single_s.append(s)
            array_s.append(a)
            placed = (p1, p2)
        singles.close()
        swept.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    single_ms = statistics.median(single_s) * 1000
    array_ms = statistics.median(array_s) * 1000
    return {
        "pass_ms_with_arrays": round(array_ms, 2),
        "pass_ms_same_singles": round(single_ms, 2),
        "pass_arrays_ratio": round(single_ms / array_ms, 2) if array_ms else None,
        "pass_array_tasks": tasks,
        "pass_arrays": arrays,
        "pass_placed_singles": placed[0],
        "pass_placed_arrays": placed[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--arrays", type=int, default=20)
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args()
    figures = pass_figures(args.tasks, args.arrays, args.hosts, args.passes)
    print(
        f"pass over arrays:  {figures['pass_ms_with_arrays']} ms median of {args.passes}"
        f" ({args.tasks} waiting in {args.arrays} arrays); the same as single jobs"
        f" {figures['pass_ms_same_singles']} ms ({figures['pass_arrays_ratio']}x);"
        f" placed {figures['pass_placed_arrays']} and {figures['pass_placed_singles']}"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
