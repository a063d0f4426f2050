"""The parent chain and container the helper reports per GPU process, read from /proc.

A real process tree (spawned here) is read through the helper's scan; a fake /proc
covers what a real one cannot be made to show (containers, loops, hostile names).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.remote import procs
from gputui.remote.procs import ANCESTOR_DEPTH, ProcessTable, describe
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Sample

# A launcher that starts a worker that starts the process holding the GPU; each waits.
TREE = """
import subprocess, sys
depth = int(sys.argv[1])
if depth == 0:
    print("ready", flush=True)
    sys.stdin.read()
else:
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], str(depth - 1), sys.argv[2]])
    child.wait()
"""


@pytest.fixture
def tree() -> Iterator[list[int]]:
    """pids of a real chain: [launcher, worker, leaf] (the leaf is this test's grandchild's
    child); all end when the test does."""
    launcher = subprocess.Popen(
        [sys.executable, "-c", TREE, "2", TREE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert launcher.stdout is not None
        assert launcher.stdout.readline().strip() == "ready"  # the leaf is up
        worker = _children(launcher.pid)
        leaf = _children(worker[0])
        yield [launcher.pid, worker[0], leaf[0]]
    finally:
        if launcher.stdin is not None:
            launcher.stdin.close()  # the leaf reads EOF and the chain unwinds
        launcher.wait(timeout=30)


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def test_a_real_process_reports_its_parent_chain_nearest_first(tree: list[int]) -> None:
    launcher, worker, leaf = tree
    info = ProcessTable().lookup(leaf)
    assert info["ppid"] == worker
    chain = info["ancestors"]
    assert [a["pid"] for a in chain[:3]] == [worker, launcher, os.getpid()]
    assert len(chain) <= ANCESTOR_DEPTH
    assert all(a["name"] and len(a["name"]) <= procs.NAME_MAX for a in chain)
    assert chain[0]["name"] == Path(f"/proc/{worker}/comm").read_text().strip()
    # What the helper prints, the console decodes: the chain comes through whole.
    gpu = {"index": 0, "uuid": "GPU-0", "processes": [info]}
    line = json.dumps({"type": "sample", "seq": 1, "gpus": [gpu]})
    message = decode_helper_line(line)
    assert isinstance(message, Sample)
    process = message.gpus[0].processes[0]
    assert process.ppid == worker
    assert [a.pid for a in process.ancestors or ()] == [a["pid"] for a in chain]


def test_a_re_parented_process_is_described_afresh(tree: list[int]) -> None:
    """The cache is keyed by start time and parent: a process whose parent died shows
    its new parent on the next sample."""
    _, worker, leaf = tree
    table = ProcessTable()
    assert table.lookup(leaf)["ppid"] == worker
    os.kill(worker, 9)  # the leaf is re-parented (to init or a subreaper)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the kill is delivered, then the leaf re-parented
        info = table.lookup(leaf)
        if info["ppid"] != worker:
            break
        os.sched_yield()
    assert info["ppid"] != worker
    assert worker not in [a["pid"] for a in info["ancestors"]]


def _fake(root: Path, pid: int, ppid: int, name: str, cgroup: str = "0::/user.slice\n") -> None:
    entry = root / str(pid)
    entry.mkdir(parents=True, exist_ok=True)
    fields = ["S", str(ppid), *["0"] * 17, "1000", "0"]
    (entry / "stat").write_bytes(f"{pid} ({name}) {' '.join(fields)}\n".encode())
    (entry / "cgroup").write_text(cgroup)
    (entry / "cmdline").write_bytes(b"python\0train.py\0")


def test_the_chain_is_capped_stops_at_a_loop_and_cleans_names(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("btime 1700000000\n")
    _fake(tmp_path, 10, 9, "leaf")
    for pid in range(9, 1, -1):
        _fake(tmp_path, pid, pid - 1, f"p{pid} \x1b[2J)(x")
    info = describe(10, str(tmp_path))
    assert [a["pid"] for a in info["ancestors"]] == [9, 8, 7, 6][:ANCESTOR_DEPTH]
    assert all("\x1b" not in a["name"] for a in info["ancestors"])
    assert info["ancestors"][0]["name"].startswith("p9 ?[2J)(x")
    _fake(tmp_path, 20, 21, "a")
    _fake(tmp_path, 21, 20, "b")  # a loop (a corrupt or racing /proc)
    assert [a["pid"] for a in describe(20, str(tmp_path))["ancestors"]] == [21, 20]
    _fake(tmp_path, 30, 0, "outside")  # parent outside the pid namespace
    assert describe(30, str(tmp_path))["ancestors"] == []
    _fake(tmp_path, 40, 99, "orphan")  # the parent vanished mid-read
    assert describe(40, str(tmp_path))["ancestors"] == []
    (tmp_path / "50").mkdir()  # no stat at all: no tree fields (as an older helper)
    assert "ancestors" not in describe(50, str(tmp_path))


@pytest.mark.parametrize(
    ("cgroup", "container"),
    [
        ("0::/system.slice/docker-" + "ab" * 32 + ".scope\n", "abababababab"),
        (
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
            "cri-containerd-" + "0123456789abcdef" * 4 + ".scope\n",
            "0123456789ab",
        ),
        ("0::/user.slice/libpod-" + "f" * 64 + ".scope\n", "ffffffffffff"),
        ("0::/user.slice/user-1000.slice\n", None),
        ("0::/docker-" + "z" * 64 + "\x1b[2J.scope\n", None),
    ],
)
def test_the_container_id_is_twelve_hex_from_the_cgroup_or_none(
    tmp_path: Path, cgroup: str, container: str | None
) -> None:
    _fake(tmp_path, 10, 1, "leaf", cgroup)
    assert describe(10, str(tmp_path))["container"] == container
