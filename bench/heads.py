"""Two heads side by side: this checkout's and another's, the same load, the same time.

    python bench/heads.py --vs CHECKOUT [--hosts 500] [--windows 6] [--seconds 10]

A head's own CPU at a thousand hosts moves by a fifth from one run to the next on a
shared machine (the same code read 0.42 and 0.63 cores within the hour), far more
than most changes to it. Here two real ``gputui head`` processes run at once, each
ingesting its own ``--hosts`` replayed hosts (``bench/replay.py``, 8 GPUs each, 1 Hz;
``bench/consoles.py``'s ``Head`` and ``Replay``): this checkout's and ``--vs``'s (a
before or an after, run from its own tree). Both are measured over the same
windows, so what the machine does to one it does to the other, and the figure is
their ratio. The head started first is started again second in a second round, so
neither order is favoured: ``ratio`` is the median over both rounds' windows of
this head's CPU over the other's (below 1: this one costs less).

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from consoles import Head, Replay, probe_connect, settle

SETTLE_S = 15.0
"""Seconds at least after both heads have every host live, before the windows."""


async def one_round(
    d: Path, order: list[Path | None], hosts: int, windows: int, seconds: float
) -> dict[Path | None, list[float]]:
    """Both heads, started in ``order`` (None: this checkout); each one's CPU (cores)
    in each of the shared windows."""
    pairs: list[tuple[Path | None, Replay, Head]] = []
    try:
        for i, checkout in enumerate(order):
            place = d / str(i)
            place.mkdir()
            replay = Replay(place)
            pairs.append((checkout, replay, Head(place, replay, hosts, checkout)))
        for _, _, head in pairs:
            await head.ready()
            _, live = await probe_connect(head, hosts)
            if len(live) < hosts:
                raise RuntimeError(f"only {len(live)} of {hosts} hosts came up")
        for _, _, head in pairs:
            await settle(head, SETTLE_S, least_s=SETTLE_S)
        cores: dict[Path | None, list[float]] = {checkout: [] for checkout, _, _ in pairs}
        for _ in range(windows):
            before = {checkout: head.cpu() for checkout, _, head in pairs}
            start = time.monotonic()
            await asyncio.sleep(seconds)
            wall = time.monotonic() - start
            for checkout, _, head in pairs:
                cores[checkout].append(round((head.cpu() - before[checkout]) / wall, 4))
        return cores
    finally:
        for _, replay, head in pairs:
            head.stop()
            replay.stop()


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    other: Path = args.vs.resolve()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="gputui-heads-") as tmp:
        for n, order in enumerate(([None, other], [other, None])):
            d = Path(tmp) / f"round{n}"
            d.mkdir()
            rounds.append(await one_round(d, order, args.hosts, args.windows, args.seconds))
    ratios = [a / b for cores in rounds for a, b in zip(cores[None], cores[other], strict=True)]
    return {
        "hosts": args.hosts,
        "vs": str(other),
        "this_cores": [cores[None] for cores in rounds],
        "vs_cores": [cores[other] for cores in rounds],
        "this_cores_median": round(statistics.median(c for r in rounds for c in r[None]), 4),
        "vs_cores_median": round(statistics.median(c for r in rounds for c in r[other]), 4),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_by_round": [
            round(statistics.median(a / b for a, b in zip(r[None], r[other], strict=True)), 3)
            for r in rounds
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", type=Path, required=True, metavar="CHECKOUT")
    parser.add_argument("--hosts", type=int, default=500, help="each head's")
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10.0, help="each window")
    args = parser.parse_args()
    if not (args.vs / "gputui" / "__init__.py").is_file():
        print(f"--vs {args.vs}: not a gputui checkout (no gputui/__init__.py)", file=sys.stderr)
        return 2
    print(json.dumps(asyncio.run(measure(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
