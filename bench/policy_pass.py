"""Scheduling-pass benchmark: the policy over 10,000 waiting jobs on 1,024 GPUs.

    python bench/policy_pass.py [--jobs 10000] [--hosts 128] [--passes 20] [--naive-passes 1]

One complete pass (classes, fair share, quotas, preemption, reservations and
backfill) of ``passes.decide`` over a busy cluster: 128 hosts of 8 GPUs, most of
them running jobs with time limits, and a line of 10,000 jobs of four classes,
eight groups, 1 to 8 GPUs. Beside it, in the same run, ``reference.decide_ref``
(the same rules applied by a full re-sort and re-scan for every job), and the two
are checked to decide exactly the same. The median of the passes is reported; the
last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time

from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy.model import ClusterView, GpuSlot, Running, Want
from gputui.scheduler.policy.passes import decide
from gputui.scheduler.policy.reference import decide_ref

NOW = 1_800_000_000.0


def cluster(jobs: int, hosts: int, seed: int = 7) -> ClusterView:
    rnd = random.Random(seed)
    gpus: list[GpuSlot] = []
    running: list[Running] = []
    next_id = 1
    for h in range(hosts):
        host = f"gpu{h:03d}"
        pool = "a100" if h % 4 else "3090"
        model = "NVIDIA A100-SXM4-80GB" if pool == "a100" else "NVIDIA GeForce RTX 3090"
        busy: set[int] = set()
        i = 0
        while i < 8:
            if rnd.random() < 0.08:  # a few GPUs free here and there
                i += 1
                continue
            size = min(8 - i, rnd.choice((1, 1, 2, 2, 4, 8)))
            started = NOW - rnd.uniform(0, 20_000)
            running.append(
                Running(
                    kind="job",
                    id=next_id,
                    host=host,
                    gpus=tuple(f"GPU-{h}-{k}" for k in range(i, i + size)),
                    rank=rnd.choice((0, 1, 1, 1, 2, 3)),
                    preemptible=rnd.random() < 0.4,
                    over_quota=rnd.random() < 0.05,
                    started_at=started,
                    ends_at=started + rnd.choice((3600.0, 4 * 3600.0, 24 * 3600.0)),
                )
            )
            busy.update(range(i, i + size))
            next_id += 1
            i += size
        for k in range(8):
            gpus.append(GpuSlot(f"GPU-{h}-{k}", host, k, pool, model, busy=k in busy))
    waiting = []
    for n in range(jobs):
        waiting.append(
            Want(
                kind="job",
                id=100_000 + n,
                gpus=rnd.choice((1, 1, 1, 1, 2, 2, 4, 8)),
                user=f"user{n % 40}",
                group=f"group{n % 8}",
                pool=rnd.choice((None, None, "a100", "3090")),
                since=NOW - rnd.uniform(0, 86_400),
                rank=rnd.choice((0, 1, 1, 1, 1, 2, 2, 3)),
                fair=(1 + n % 8) / 8,
                over_quota=rnd.random() < 0.1,
                off_hours_only=rnd.random() < 0.05,
                time_limit_s=rnd.choice((None, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0)),
            )
        )
    return ClusterView(
        gpus=tuple(gpus),
        waiting=tuple(waiting),
        running=tuple(running),
        now=NOW,
        off_hours=False,
        preemption=True,
        min_runtime_s=600.0,
        grace_s=10.0,
    )


def timed(fn: object, view: ClusterView, passes: int) -> tuple[list[float], policy.Decisions]:
    times: list[float] = []
    result = policy.Decisions()
    for _ in range(passes):
        start = time.perf_counter()
        result = fn(view)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return times, result


def pass_figures(jobs: int, hosts: int, passes: int, naive_passes: int) -> dict[str, object]:
    view = cluster(jobs, hosts)
    gc.collect()  # the garbage from building the view is not the pass's
    fast, decided = timed(decide, view, passes)
    naive, reference = timed(decide_ref, view, naive_passes)
    if decided != reference:
        raise SystemExit("passes.decide and reference.decide_ref decided differently")
    pass_ms = statistics.median(fast) * 1000
    naive_ms = statistics.median(naive) * 1000
    return {
        "pass_ms": round(pass_ms, 2),
        "naive_pass_ms": round(naive_ms, 1),
        "pass_ratio": round(naive_ms / pass_ms, 1) if pass_ms else None,
        "pass_jobs": jobs,
        "pass_gpus": len(view.gpus),
        "pass_placed": len(decided.place),
        "pass_preempted": len(decided.preempt),
        "pass_reserved": sum(
            1 for w in decided.wait if w.host is not None and w.reason != policy.PREEMPTING
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--naive-passes", type=int, default=1)
    args = parser.parse_args()
    figures = pass_figures(args.jobs, args.hosts, args.passes, args.naive_passes)
    print(
        f"scheduling pass: {figures['pass_ms']} ms median of {args.passes}"
        f" ({args.jobs} waiting, {figures['pass_gpus']} GPUs); naive {figures['naive_pass_ms']} ms"
        f" ({figures['pass_ratio']}x); placed {figures['pass_placed']},"
        f" preempted {figures['pass_preempted']}, reserved {figures['pass_reserved']}"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
