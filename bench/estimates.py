"""The week board's estimates: the first requests in line played forward once.

    python bench/estimates.py [--hosts 64] [--gpus 8] [--waiting 500] [--limit 100] [--runs 5]

One cluster of 64 hosts of 8 GPUs, every card held by a running job with a time limit
(ending over the next day), a few cards booked ahead, and 500 jobs waiting (1, 2, 4
or 8 GPUs, each with a time limit). ``explain.project`` (what the head's
``estimates`` answers, on its reader thread) gives the first 100 their estimated
start; beside it, in the same run, the baseline: the same projection asking every
host at every time any card or booking frees up (how ``explain`` played the line
before, run once: it takes seconds), which must give the same starts, hosts and
cards. The median of the runs; the last line printed is one JSON object. The
scheduling pass never runs this.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from gputui.scheduler.policy import explain, model
from gputui.scheduler.policy.bookings import overlaps

NOW = 1_800_000_000.0
INF = model.INF


def cluster(hosts: int, gpus: int, waiting: int, seed: int = 7) -> model.ClusterView:
    rnd = random.Random(seed)
    slots = tuple(
        model.GpuSlot(f"GPU-{h}-{i}", f"h{h:03d}", i) for h in range(hosts) for i in range(gpus)
    )
    running = tuple(
        model.Running(
            "job",
            1_000_000 + k,
            g.host,
            (g.uuid,),
            ends_at=NOW + rnd.uniform(600, 86_400),
        )
        for k, g in enumerate(slots)
    )
    booked = tuple(
        model.Booked(
            1 + b,
            "carol",
            tuple(s.uuid for s in slots[b * gpus : b * gpus + 2]),
            NOW + 86_400 + b * 3600,
            NOW + 2 * 86_400 + b * 3600,
        )
        for b in range(min(4, hosts))
    )
    wants = tuple(
        model.Want(
            "job",
            j,
            rnd.choice((1, 1, 2, 4, 8)),
            user=f"user{j % 40}",
            since=NOW - rnd.uniform(0, 86_400),
            time_limit_s=rnd.choice((1800.0, 3600.0, 4 * 3600.0, 86_400.0)),
        )
        for j in range(1, waiting + 1)
    )
    return model.ClusterView(gpus=slots, waiting=wants, running=running, now=NOW, bookings=booked)


def naive(view: model.ClusterView, limit: int) -> list[tuple[int, float, str, tuple[str, ...]]]:
    """Every host asked at every time any card or booking frees up."""
    busy: dict[str, list[tuple[float, float]]] = {}
    for run in view.running:
        end = INF if run.ends_at is None else max(run.ends_at, view.now)
        for u in run.gpus:
            busy.setdefault(u, []).append((view.now, end))
    usable = [g for g in view.gpus if g.healthy and not g.drained]
    out = []
    for want in explain.line_of(view)[:limit]:
        by_host: dict[str, list[str]] = {}
        for g in usable:
            if want.fits(g):
                by_host.setdefault(g.host, []).append(g.uuid)
        times = {view.now} | {e for iv in busy.values() for _, e in iv if view.now < e < INF}
        times |= {b.end for b in view.bookings if b.end > view.now}
        for t in sorted(times):
            end = INF if want.time_limit_s is None else t + want.time_limit_s
            best: tuple[int, str, list[str]] | None = None
            for host, cards in sorted(by_host.items()):
                free = [
                    u
                    for u in cards
                    if all(e <= t or s >= end for s, e in busy.get(u, []))
                    and not any(
                        u in b.uuids and overlaps(t, end, b.start, b.end) for b in view.bookings
                    )
                ]
                if len(free) >= want.gpus and (best is None or len(free) < best[0]):
                    best = (len(free), host, free[: want.gpus])
            if best is not None:
                for u in best[2]:
                    busy.setdefault(u, []).append((t, end))
                out.append((want.id, t, best[1], tuple(best[2])))
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--waiting", type=int, default=500)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    view = cluster(args.hosts, args.gpus, args.waiting)
    ours: list[float] = []
    theirs: list[float] = []
    agree = True
    for _ in range(args.runs):
        start = time.perf_counter()
        got = explain.project(view, None, args.limit)
        ours.append(time.perf_counter() - start)
        if not theirs:  # (the naive play takes seconds: once is enough beside it)
            start = time.perf_counter()
            want = naive(view, args.limit)
            theirs.append(time.perf_counter() - start)
        agree = agree and [(p.want.id, p.start, p.host, p.uuids) for p in got] == want
    report: dict[str, Any] = {
        "gpus": args.hosts * args.gpus,
        "limit": args.limit,
        "estimates_ms": statistics.median(ours) * 1e3,
        "naive_ms": statistics.median(theirs) * 1e3,
        "ratio": statistics.median(theirs) / statistics.median(ours),
        "agree": agree,
        "agree_n": 1 if agree else 0,
    }
    print(
        f"estimates: first {args.limit} of {args.waiting} in line at {report['gpus']} GPUs:"
        f" {report['estimates_ms']:.1f} ms (naive {report['naive_ms']:.1f} ms,"
        f" {report['ratio']:.1f}x), same answers: {agree}"
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
