"""The grid's rows: ``ClusterModel.rows`` for a filter and a sort, beside one bare pass.

Whenever a filter or a sort is on, the console recomputes which rows show at most
twice a second (``REBUILD_EVERY_S``); at thousands of GPUs that must stay a few
milliseconds. For G GPUs (hosts of 8, each GPU with one or two processes of a few
users) this times, median of several runs:

* **rows**: ``model.rows(query, sort)`` for the usual view (no filter, host order), an
  owner filter sorted by utilisation and a host filter sorted by free memory;
* **baseline**: the least any filter can do, one pass over every GPU reading its
  search text and sort value.

Reported: milliseconds per call, the ratio to the baseline (how much the model adds
over touching each GPU once; it should not grow with G) and, for 4,096 GPUs, whether
the filtered views stay within the 50 ms budget the console allows itself. Last line
of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.model import SORT_KEYS, ClusterModel, SortKey
from gputui.wire.messages import GpuInfo, GpuSample, Hello, ProcessSample, Sample

GPUS_PER_HOST = 8
USERS = ("alice", "bob", "carol", "dave", "erin", "frank")
BUDGET_MS = 50.0
"""Per call at 4,096 GPUs, filtered and sorted (what the old unit test asserted)."""


def cluster(gpus: int, seed: int = 7) -> ClusterModel:
    rng = random.Random(seed)
    model = ClusterModel()
    for h in range(0, gpus, GPUS_PER_HOST):
        name = f"node{h // GPUS_PER_HOST:04d}"
        count = min(GPUS_PER_HOST, gpus - h)
        hello = Hello(
            protocol=1,
            helper_version="0.1.0",
            hostname=name,
            driver="550.127.05",
            gpus=tuple(
                GpuInfo(
                    index=i,
                    uuid=f"GPU-{name}-{i}",
                    name="NVIDIA H100 80GB HBM3",
                    memory_total_mib=81559,
                    power_limit_w=700.0,
                )
                for i in range(count)
            ),
        )
        samples = tuple(
            GpuSample(
                index=i,
                uuid=f"GPU-{name}-{i}",
                util_gpu=rng.randint(0, 100),
                mem_used_mib=rng.randint(0, 81559),
                mem_total_mib=81559,
                temp_c=rng.randint(30, 85),
                power_w=round(rng.uniform(60, 700), 1),
                processes=tuple(
                    ProcessSample(
                        pid=1000 + 10 * i + p,
                        user=rng.choice(USERS),
                        command="python train.py",
                        gpu_mem_mib=1000,
                    )
                    for p in range(rng.randint(1, 2))
                ),
            )
            for i in range(count)
        )
        model.apply(
            HostSnapshot(
                name=name,
                address=name,
                status=HostStatus.LIVE,
                hello=hello,
                sample=Sample(seq=1, time=time.time(), gpus=samples),
                received_at=time.time(),
            )
        )
    return model


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def one_pass(model: ClusterModel, query: str, sort: SortKey) -> Callable[[], object]:
    """The baseline: read every GPU's search text and sort value once, nothing else."""
    terms = query.lower().split()
    key = sort.value

    def run() -> object:
        hits = 0
        for gpu in model.iter_gpus():
            if all(term in gpu.haystack for term in terms):
                hits += 1
                if key is not None:
                    key(gpu)
        return hits

    return run


CASES = (
    ("all, host order", "", SORT_KEYS[0]),
    ("owner filter, by util", "alice", SORT_KEYS[1]),
    ("host filter, by free memory", "node00", SORT_KEYS[5]),
)


def bench(sizes: list[int], runs: int) -> dict[str, Any]:
    report: dict[str, Any] = {"runs": runs, "budget_ms_at_4096": BUDGET_MS, "sizes": {}}
    for gpus in sizes:
        model = cluster(gpus)
        per_case = {}
        for label, query, sort in CASES:
            rows_ms = median_ms(lambda m=model, q=query, s=sort: m.rows(q, s), runs)
            base_ms = median_ms(one_pass(model, query, sort), runs)
            per_case[label] = {
                "rows_ms": round(rows_ms, 3),
                "baseline_ms": round(base_ms, 3),
                "ratio": round(rows_ms / base_ms, 2) if base_ms else None,
                "rows": len(model.rows(query, sort)),
            }
            print(
                f"{gpus:6d} GPUs  {label:28s} rows {rows_ms:8.3f} ms  "
                f"one pass {base_ms:8.3f} ms  x{rows_ms / base_ms:5.2f}",
                file=sys.stderr,
            )
        report["sizes"][str(gpus)] = per_case
        if gpus == 4096:
            report["within_budget_at_4096"] = all(
                per_case[label]["rows_ms"] < BUDGET_MS for label, query, _ in CASES if query
            )
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(json.dumps(bench(args.gpus, args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
