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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.remote import procs
from gputui.remote.procs import ANCESTOR_DEPTH, ProcessTable, describe
from gputui.wire.chains import chain, parent_index
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import MAX_ANCESTORS, Sample

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
    table = ProcessTable()
    info = table.lookup(leaf)
    assert info["ppid"] == worker and "ancestors" not in info
    parents = table.parents([leaf])
    assert [a["pid"] for a in parents[:3]] == [worker, launcher, os.getpid()]
    assert [a["ppid"] for a in parents[:2]] == [launcher, os.getpid()]
    assert len(parents) <= ANCESTOR_DEPTH
    assert all(a["name"] and len(a["name"]) <= procs.NAME_MAX for a in parents)
    assert parents[0]["name"] == Path(f"/proc/{worker}/comm").read_text().strip()
    # What the helper prints, the console decodes: the chain comes through whole.
    gpu = {"index": 0, "uuid": "GPU-0", "processes": [info]}
    line = json.dumps({"type": "sample", "seq": 1, "gpus": [gpu], "parents": parents})
    message = decode_helper_line(line)
    assert isinstance(message, Sample)
    process = message.gpus[0].processes[0]
    assert process.ppid == worker
    found = chain(process.pid, process.ppid, parent_index(message.parents))
    assert [a.pid for a in found] == [a["pid"] for a in parents]


def test_processes_that_share_parents_send_each_parent_once(tree: list[int]) -> None:
    """The worker and the leaf (as two GPU processes) share the launcher and everything
    above it: the table names each once, nearest levels first, and both chains decode
    whole from it."""
    launcher, worker, leaf = tree
    table = ProcessTable()
    infos = [table.lookup(leaf), table.lookup(worker)]
    parents = table.parents([leaf, worker])
    pids = [a["pid"] for a in parents]
    assert len(pids) == len(set(pids))
    assert pids[:3] == [worker, launcher, os.getpid()]  # level 1 of each, then level 2 ...
    gpus = [{"index": i, "uuid": f"GPU-{i}", "processes": [info]} for i, info in enumerate(infos)]
    line = json.dumps({"type": "sample", "seq": 1, "gpus": gpus, "parents": parents})
    message = decode_helper_line(line)
    assert isinstance(message, Sample)
    index = parent_index(message.parents)
    leaf_chain, worker_chain = (
        [a.pid for a in chain(g.processes[0].pid, g.processes[0].ppid, index)] for g in message.gpus
    )
    assert leaf_chain[:3] == [worker, launcher, os.getpid()]
    assert worker_chain[:2] == [launcher, os.getpid()]
    assert len(leaf_chain) <= MAX_ANCESTORS and len(worker_chain) <= MAX_ANCESTORS
    table.keep_only([leaf])  # the worker left the GPUs: its chain goes from the table
    assert table.parents([worker]) == []


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
    assert worker not in [a["pid"] for a in table.parents([leaf])]


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
    table = ProcessTable(str(tmp_path))

    def parents(pid: int) -> list[dict[str, Any]]:
        table.lookup(pid)
        return table.parents([pid])

    chain10 = parents(10)
    assert [a["pid"] for a in chain10] == [9, 8, 7, 6][:ANCESTOR_DEPTH]
    assert [a["ppid"] for a in chain10] == [8, 7, 6, 5][:ANCESTOR_DEPTH]
    assert all("\x1b" not in a["name"] for a in chain10)
    assert chain10[0]["name"].startswith("p9 ?[2J)(x")
    _fake(tmp_path, 20, 21, "a")
    _fake(tmp_path, 21, 20, "b")  # a loop (a corrupt or racing /proc)
    assert [a["pid"] for a in parents(20)] == [21, 20]
    _fake(tmp_path, 30, 0, "outside")  # parent outside the pid namespace
    assert parents(30) == []
    _fake(tmp_path, 40, 99, "orphan")  # the parent vanished mid-read
    assert parents(40) == []
    (tmp_path / "50").mkdir()  # no stat at all: no tree fields (as an older helper)
    assert "ppid" not in describe(50, str(tmp_path)) and parents(50) == []


def test_the_table_is_capped_nearest_levels_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the cap, the far levels go first: every process keeps its own parent."""
    (tmp_path / "stat").write_text("btime 1700000000\n")
    for i in range(3):  # three processes, each under its own three-level chain
        base = 100 * (i + 1)
        _fake(tmp_path, base, base + 1, "leaf")
        for level in range(1, 4):
            _fake(tmp_path, base + level, base + level + 1, f"up{level}")
    monkeypatch.setattr(procs, "PARENTS_MAX", 4)
    table = ProcessTable(str(tmp_path))
    for pid in (100, 200, 300):
        table.lookup(pid)
    assert [a["pid"] for a in table.parents([100, 200, 300])] == [101, 201, 301, 102]


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


def test_the_helpers_sample_names_a_shared_parent_once(
    sim_process: Callable[..., subprocess.Popen[bytes]],
    run_once: Callable[..., tuple[int, list[dict[str, Any]]]],
) -> None:
    """Two processes of this test's, on two simulated GPUs: each sends its ``ppid``;
    the sample's ``parents`` table names this test's process (their parent) once."""
    ours = {sim_process("0").pid, sim_process("1").pid}
    code, messages = run_once(["--sim", "2xa100-80gb"])
    assert code == 0
    sample = next(m for m in messages if m["type"] == "sample")
    procs = [p for g in sample["gpus"] for p in g["processes"] if p["pid"] in ours]
    assert sorted(p["pid"] for p in procs) == sorted(ours)
    assert {p["ppid"] for p in procs} == {os.getpid()}
    assert all("ancestors" not in p for p in procs)
    pids = [a["pid"] for a in sample["parents"]]
    assert pids.count(os.getpid()) == 1 and len(pids) == len(set(pids))
    message = decode_helper_line(json.dumps(sample))
    assert isinstance(message, Sample)
    index = parent_index(message.parents)
    chains = {
        p.pid: [a.pid for a in chain(p.pid, p.ppid, index)]
        for g in message.gpus
        for p in g.processes
        if p.pid in ours
    }
    first, second = chains.values()
    assert first == second and first[0] == os.getpid()
