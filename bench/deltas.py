"""A console's side of the head's stream: real deltas, recorded once, applied by this
checkout and, side by side, by another.

    python bench/deltas.py [--vs CHECKOUT] [--hosts 1000] [--view 5] [--seconds 40]
                           [--record FILE] [--repeats 5] [--rounds 2]

Most of what a console through the head spends is applying what it is sent
(``HostBook.apply``: each changed field checked, each host's snapshot made again).
Measured inside a running console, that is a few milliseconds a second among a
machine's noise; here it is measured alone. First a real ``gputui head``
(``bench/consoles.py``'s ``Head`` over its ``Replay``, 8 GPUs a host at 1 Hz) is
subscribed to as a console showing ``--view`` hosts is, for ``--seconds``, and its
pushes are written to ``--record`` (JSON lines; an existing file is used as it is,
so two trees can be compared on the same stream another day). Then a process
applies them, in this checkout and in ``--vs``'s (run from its own tree) in turn,
``--rounds`` times each, the order swapped each round: the first 10 s of the stream
(the subscription's full pushes) untimed, the rest timed ``--repeats`` times over,
the best kept. The figure is CPU milliseconds a second of stream, and with ``--vs``
the ratio of this checkout's over the other's (median of the rounds; below 1: this
one costs less).

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from gputui.scheduler.client.aio import AsyncHeadClient

WARM_S = 10.0
"""Seconds of the stream applied untimed: the subscription's first, full pushes."""
HERE = Path(__file__).resolve().parent


async def record(path: Path, hosts: int, view: int, seconds: float) -> int:
    """Write the pushes a console showing ``view`` hosts gets from a head at ``hosts``
    in ``seconds``: one JSON line each, ``{"t": seconds since the first, "hosts": [...]}``.
    The number of pushes."""
    from consoles import Head, Replay, names, probe_connect, settle  # (not to apply)

    from gputui.scheduler.client.aio import AsyncHeadClient

    with tempfile.TemporaryDirectory(prefix="gputui-deltas-") as tmp:
        replay = Replay(Path(tmp))
        head = Head(Path(tmp), replay, hosts)
        try:
            await head.ready()
            _, live = await probe_connect(head, hosts)
            if len(live) < hosts:
                raise RuntimeError(f"only {len(live)} of {hosts} hosts came up")
            await settle(head, 20.0)
            client = await AsyncHeadClient.open_local(head.sock)
            try:
                return await _take(client, path, names(hosts), view, seconds)
            finally:
                await client.close()
        finally:
            head.stop()
            replay.stop()


async def _take(
    client: AsyncHeadClient, path: Path, hosts: list[str], view: int, seconds: float
) -> int:
    body = {"detail": hosts[:view], "gpu": {"host": hosts[0], "index": 0}}
    await client.call("telemetry", body, timeout=30)
    count, start = 0, None
    with path.open("wb") as out:
        async for push in client.pushes("telemetry"):
            now = time.monotonic()
            start = now if start is None else start
            if push.get("n") != count:
                raise RuntimeError("a push was dropped while recording: run it again")
            out.write(orjson.dumps({"t": now - start, "hosts": push.get("hosts", [])}) + b"\n")
            count += 1
            if now - start >= seconds:
                break
    return count


def apply(path: Path, repeats: int) -> dict[str, Any]:
    """In this process's gputui: the recording's pushes after ``WARM_S`` applied
    ``repeats`` times over (each time onto the first ``WARM_S`` applied untimed)."""
    import gputui
    from gputui.scheduler.client.deltas import HostBook

    pushes = []
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        try:
            push = orjson.loads(line)
            if not isinstance(push, dict) or not isinstance(push.get("hosts"), list):
                raise ValueError("not a recorded push")
            float(push["t"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: {str(exc)[:100]}") from None
        pushes.append(push)
    if not pushes:
        raise ValueError(f"{path}: no pushes recorded")
    warm = [d for p in pushes if p["t"] < WARM_S for d in p["hosts"]]
    timed = [d for p in pushes if p["t"] >= WARM_S for d in p["hosts"]]
    span = pushes[-1]["t"] - WARM_S
    if span <= 0 or not timed:
        raise RuntimeError(f"{path}: under {WARM_S:g} s of stream")
    spent = []
    for _ in range(repeats):
        book = HostBook()
        for delta in warm:
            book.apply(delta)
        cpu = time.process_time()
        for delta in timed:
            book.apply(delta)
        spent.append(time.process_time() - cpu)
    return {
        "gputui": str(Path(gputui.__file__).parent.parent),
        "deltas": len(timed),
        "span_s": round(span, 1),
        "ms_per_s": [round(s / span * 1000, 3) for s in spent],
        "best_ms_per_s": round(min(spent) / span * 1000, 3),
    }


def apply_in(checkout: Path | None, path: Path, repeats: int) -> dict[str, Any]:
    """``apply`` in a process of its own, running ``checkout``'s gputui (None: this
    one's): the last line it prints."""
    env, cwd = None, None
    if checkout is not None:
        env, cwd = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{HERE}"}, checkout
    done = subprocess.run(
        [sys.executable, str(HERE / "deltas.py"), "--apply", str(path), "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"applying in {checkout or 'this checkout'}: {done.stderr[-1500:]}")
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer


def measure(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"record": str(path)}
    if not path.exists():
        started = time.monotonic()
        pushes = asyncio.run(record(path, args.hosts, args.view, args.seconds))
        report.update(hosts=args.hosts, view=args.view, pushes=pushes)
        report["record_s"] = round(time.monotonic() - started, 1)
    if args.vs is None:
        report.update(apply_in(None, path, args.repeats))
        return report
    other: Path = args.vs.resolve()
    this_best, other_best, trees = [], [], set()
    for n in range(args.rounds):
        order: list[Path | None] = [None, other] if n % 2 == 0 else [other, None]
        for checkout in order:
            got = apply_in(checkout, path, args.repeats)
            (this_best if checkout is None else other_best).append(got["best_ms_per_s"])
            trees.add((checkout is None, got["gputui"]))
    if len(trees) != 2 or len({tree for _, tree in trees}) != 2:  # each its own gputui
        raise RuntimeError(f"the two sides ran {sorted(trees)}")
    ratios = [a / b for a, b in zip(this_best, other_best, strict=True)]
    report.update(
        vs=str(other),
        this_ms_per_s=this_best,
        vs_ms_per_s=other_best,
        ratio=round(statistics.median(ratios), 3),
    )
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", type=Path, metavar="CHECKOUT")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--view", type=int, default=5, help="hosts the console shows")
    parser.add_argument("--seconds", type=float, default=40.0, help="of stream recorded")
    parser.add_argument("--record", type=Path, help="the recording (made when missing)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="with --vs: each order once")
    parser.add_argument("--apply", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    problem = _bad_args(args)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    try:
        if args.apply is not None:
            print(json.dumps(apply(args.apply, args.repeats)))
        elif args.record is not None:
            print(json.dumps(measure(args, args.record.resolve())))
        else:
            with tempfile.TemporaryDirectory(prefix="gputui-deltas-") as tmp:
                print(json.dumps(measure(args, Path(tmp) / "deltas.jsonl")))
    except (OSError, RuntimeError, ValueError, KeyError, TypeError) as exc:
        line = str(exc).strip().splitlines()
        print(f"bench/deltas.py: {line[-1] if line else type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


def _bad_args(args: argparse.Namespace) -> str | None:
    """One line naming the first argument out of range (None: all fine)."""
    if args.vs is not None and not (args.vs / "gputui" / "__init__.py").is_file():
        return f"--vs {args.vs}: not a gputui checkout (no gputui/__init__.py)"
    if not WARM_S < args.seconds <= 3600:  # (NaN is neither)
        return f"--seconds {args.seconds:g}: give more than {WARM_S:g}, at most 3600"
    for name, low, high in (("hosts", 1, 5000), ("view", 1, 5000), ("repeats", 1, 100),
                            ("rounds", 1, 20)):  # fmt: skip
        value = getattr(args, name)
        if not low <= value <= high:
            return f"--{name} {value}: give {low} to {high}"
    return None


if __name__ == "__main__":
    sys.exit(main())
