"""A helper that announces 100,000 GPUs (and samples them every time) costs the
console what 64 GPUs cost: its lists are cut to their caps before any model or
error is built from them, so memory stays flat however many such lines come.

The console side runs in a child process (its own peak RSS is the measure) with a
real ``Fleet`` and a local host whose ``python`` is the announcing stand-in. The peak
is the child's memory's own (``VmHWM``), not ``getrusage``'s ``ru_maxrss``: Linux
carries the parent's peak into a child it starts (the test's worker, grown by the
tests before this one, read as the child's own: 428 MB once, for a console of 92).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.wire.decode import MODEL_FIRST_BYTES, ProtocolError, decode_helper_line

ANNOUNCED = 100_000
LINES = 12
RSS_MAX_MB = 300  # the fixed decoder stays under ~100 MB here; before, ~950 MB

_HELPER = r"""#!PYTHON
import json, sys, time
entries = [{"index": i, "uuid": "G%d" % i} for i in range(ANNOUNCED)]
hello = {"type": "hello", "protocol": 1, "helper_version": "0.1.0", "hostname": "big",
         "gpus": entries}
sys.stdout.write(json.dumps(hello) + "\n")
seq = 0
while True:
    seq += 1
    sample = {"type": "sample", "seq": seq, "time": time.time(), "gpus": entries}
    sys.stdout.write(json.dumps(sample) + "\n")
    sys.stdout.flush()
"""

_CONSOLE = r"""
import asyncio, json, sys, time
from gputui.config.loader import load_config
from gputui.fleet.fleet import Fleet

def peak_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/self/status")

async def main():
    fleet = Fleet(load_config(sys.argv[1]))
    await fleet.start()
    deadline = time.monotonic() + 120
    while fleet.samples_received().get("big", 0) < int(sys.argv[2]):
        assert time.monotonic() < deadline, "no samples from the big host"
        await asyncio.sleep(0.05)
    snap = fleet.snapshots()["big"]
    out = {
        "rss_mb": peak_mb(),
        "hello_gpus": len(snap.hello.gpus),
        "notes": list(snap.hello.notes),
        "sample_gpus": len(snap.sample.gpus),
    }
    await fleet.close()
    print(json.dumps(out))

asyncio.run(main())
"""


def test_a_helper_announcing_100000_gpus_costs_what_64_cost(tmp_path: Path) -> None:
    helper = tmp_path / "announcing-python"
    body = _HELPER.replace("PYTHON", sys.executable).replace("ANNOUNCED", str(ANNOUNCED))
    helper.write_text(body)
    helper.chmod(0o755)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"hosts:\n  - name: big\n    local: true\n    python: {helper}\n")
    done = subprocess.run(
        [sys.executable, "-c", _CONSOLE, str(hosts), str(LINES)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["hello_gpus"] == 64 and seen["sample_gpus"] == 64
    assert f"{ANNOUNCED} GPU entries sent; kept the first 64" in seen["notes"]
    assert seen["rss_mb"] < RSS_MAX_MB, seen


_ENTRY = st.fixed_dictionaries(
    {"index": st.integers(-2, 70), "uuid": st.text(max_size=6)},
    optional={"memory_total_mib": st.floats() | st.integers(-5, 10**6)},
)


@settings(max_examples=25, deadline=None)
@given(gpus=st.lists(_ENTRY, max_size=80), kind=st.sampled_from(["hello", "sample"]))
def test_a_big_line_decodes_as_the_same_line_small(gpus: list[dict[str, Any]], kind: str) -> None:
    """Cut first or validated first, a line means the same: padding a line past
    ``MODEL_FIRST_BYTES`` with JSON whitespace changes nothing in what it decodes to."""
    head = {"protocol": 1, "helper_version": "0.1.0", "hostname": "h"}
    body = head if kind == "hello" else {"seq": 1, "time": 1.7e9}
    line = json.dumps({"type": kind, **body, "gpus": gpus})
    padded = line[:-1] + " " * (MODEL_FIRST_BYTES + 1) + "}"
    assert len(padded) > MODEL_FIRST_BYTES
    try:
        small = decode_helper_line(line)
    except ProtocolError:
        with pytest.raises(ProtocolError):
            decode_helper_line(padded)
    else:
        assert decode_helper_line(padded) == small
