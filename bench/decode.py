"""Decoding: what a helper line costs the console, beside a bare ``json.loads``.

Every sample from every host goes through ``decode_helper_line``: JSON parsing,
range checks on every number, the sanitiser on every string. The baseline parses the
same line with the standard library and checks nothing, so the ratio is the price of
the checks. A hostile line (bad values to repair, lists to cut) is timed too: it must
stay within a small multiple of a good one, so a broken helper cannot buy the
console's CPU cheaply.

    python bench/decode.py [--gpus 8] [--seconds 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable

from gputui.wire.decode import decode_helper_line


def real_sample(gpus: int) -> str:
    """One sample line as the helper writes it, from its simulator."""
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
    ).stdout
    return next(line for line in out.splitlines() if '"sample"' in line)


def hostile(line: str) -> str:
    """The same sample with every reading impossible and a process flood on GPU 0."""
    data = json.loads(line)
    for gpu in data["gpus"]:
        gpu.update(temp_c=-300, power_w=1e30, util_gpu=float("nan"), fan_pct="fast")
    data["gpus"][0]["processes"] = [{"pid": 1 + i, "command": "\x1b]0;x"} for i in range(600)]
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
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    line = real_sample(args.gpus)
    bad = hostile(line)
    decode = per_call(lambda: decode_helper_line(line), args.seconds)
    baseline = per_call(lambda: json.loads(line), args.seconds)
    repair = per_call(lambda: decode_helper_line(bad), args.seconds)
    result = {
        "bench": "decode",
        "gpus": args.gpus,
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
