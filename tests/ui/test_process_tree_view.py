"""The process table as a tree per GPU (``p``, ``:tree``), at 80x24 and 200x50.

Each GPU process hangs under its parents as the helper named them (its ``ppid``, and
the chain above it from the sample's ``parents`` table, which names a parent shared by
several processes, on several GPUs, once); a parent that holds nothing on the GPU is a
line of its own; a container shows by 12 characters.
A host whose helper sends no parents keeps its flat list, with one line saying why.
"""

from __future__ import annotations

from typing import Any

import pytest
from ui_fakes import NOW, FakeSource, fixed_clock, gpu, hello, process, sample
from ui_helpers import lines, select, until

from gputui.config.models import Config
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow, GpuView, HostRow
from gputui.ui.widgets.process_table import NEEDS_NEWER_HELPER, ProcessTable
from gputui.ui.widgets.process_tree import tree_lines

SIZES = [(80, 24), (200, 50)]
CONTAINER = "0123456789ab" + "c" * 52
PARENTS = [
    {"pid": 100, "ppid": 90, "name": "torchrun"},
    {"pid": 90, "ppid": 1, "name": "bash"},
    {"pid": 1, "ppid": 0, "name": "init"},
]


def worker(pid: int, rank: int, **extra: Any) -> dict[str, Any]:
    found = process(pid, "alice", f"python worker.py --rank {rank}", 9_000, NOW - 60)
    return {**found, "ppid": 100, **extra}


def host(
    name: str, processes: list[dict[str, Any]], parents: list[dict[str, Any]] | None = None
) -> HostSnapshot:
    """GPU 0 runs ``processes``; GPU 1 runs one more worker of the same launcher when
    the host sends a parent table."""
    others = [worker(103, 2)] if parents else []
    return HostSnapshot(
        name=name,
        address="10.0.0.9",
        status=HostStatus.LIVE,
        pool="a100",
        hello=hello(name, "NVIDIA A100-SXM4-80GB", 2, 81_920, 400.0),
        sample=sample(
            1,
            NOW - 1,
            [gpu(name, 0, processes=processes), gpu(name, 1, processes=others)],
            parents,
        ),
        received_at=NOW - 1,
    )


def cluster() -> list[HostSnapshot]:
    tree = [
        worker(101, 0),
        worker(102, 1, container=CONTAINER[:12]),
        {**process(200, "bob", "jupyter-kernel", 1_000, NOW - 60), "ppid": 0},
    ]
    old = [process(300, "carol", "python old.py", 1_000, NOW - 60)]  # no ppid, no table
    return [host("new01", tree, PARENTS), host("old01", old)]


def table_text(app: GpuTuiApp) -> str:
    return "\n".join(lines(app.main.query_one(ProcessTable)))


@pytest.mark.parametrize("size", SIZES)
async def test_p_shows_each_gpus_processes_under_their_parents(size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(cluster()), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await select(pilot, app, GpuRow("new01", 0))
        await until(pilot, lambda: "python worker" in table_text(app), "the processes")
        assert "├─" not in table_text(app)  # flat until asked
        await pilot.press("p")
        await until(pilot, lambda: "└─" in table_text(app), "the tree")
        rows = [line for line in table_text(app).splitlines() if line.strip()]
        names = [r for r in rows if r.split()[0] in ("90", "100", "101", "102")]
        assert [n.split()[0] for n in names] == ["90", "100", "101", "102"], names
        assert "init" not in table_text(app)  # pid 1 tops every chain: left out
        assert names[0].split()[1] == "bash" and "└─ torchrun" in names[1]
        assert "├─ python w" in names[2]
        # A container's id by 12 characters: a column where it fits, else before the command.
        assert f"└─ [{CONTAINER[:12]}]" in names[3] or (
            "└─ python worker" in names[3] and names[3].rstrip().endswith(CONTAINER[:12])
        )
        assert "jupyter-kernel" in table_text(app)  # a root of its own
        assert CONTAINER[:12] in table_text(app) and CONTAINER[:13] not in table_text(app)
        assert "tree" in str(app.main.query_one(ProcessTable).border_title)
        # The parent line holds nothing on the GPU: no signal can be aimed at it.
        table = app.main.query_one(ProcessTable)
        table.move_cursor(row=rows.index(names[1]) - 1)  # under the header line
        await pilot.pause()
        assert table.selected is None
        table.move_cursor(row=rows.index(names[2]) - 1)
        await pilot.pause()
        assert table.selected is not None and table.selected[1].pid == 101
        # :tree (and the palette's "tree") is the same switch: flat again.
        await pilot.press("colon", *"tree", "enter")
        await until(pilot, lambda: "└─" not in table_text(app), "flat again")
        assert "torchrun" not in table_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_an_older_helper_keeps_the_flat_list_and_says_so(size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(cluster()), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await select(pilot, app, GpuRow("old01", 0))
        await until(pilot, lambda: "python old.py" in table_text(app), "the process")
        await pilot.press("p")
        table = app.main.query_one(ProcessTable)
        await until(pilot, lambda: table.border_subtitle == NEEDS_NEWER_HELPER, "the line")
        assert "python old.py" in table_text(app) and "└─" not in table_text(app)
        # The newer host's tree is there as soon as it is selected; the line goes.
        await select(pilot, app, HostRow("new01"))
        await until(pilot, lambda: "└─" in table_text(app), "the newer host's tree")
        assert not table.border_subtitle
        # The launcher, sent once, tops its workers on both GPUs.
        rows = table_text(app).splitlines()
        assert sum("torchrun" in row for row in rows) == 2
        assert sum(row.split()[:2] == ["1", "103"] for row in rows) == 1


def test_chains_merge_by_pid_and_a_loop_or_a_gpu_parent_is_placed_once() -> None:
    processes = [
        worker(101, 0),
        # the launcher holds memory too: its line is the process's, not a parent's
        {**process(100, "alice", "torchrun --nproc 2", 500, NOW), "ppid": 0},
        # a loop from a racing /proc read: 7 -> 8 -> 7
        {**process(7, "x", "a", 1, NOW), "ppid": 8},
        {**process(8, "x", "b", 1, NOW), "ppid": 7},
        # a loop in the table above a process: 9 -> 50 -> 51 -> 50
        {**process(9, "x", "c", 1, NOW), "ppid": 50},
    ]
    parents = [
        {"pid": 100, "ppid": 0, "name": "torchrun"},
        {"pid": 8, "ppid": 7, "name": "b"},
        {"pid": 7, "ppid": 8, "name": "a"},
        {"pid": 50, "ppid": 51, "name": "d"},
        {"pid": 51, "ppid": 50, "name": "e"},
    ]
    decoded = sample(1, NOW, [gpu("h", 0, processes=processes)], parents)
    view = GpuView("h", 0, None, decoded.gpus[0], (), "h", decoded.parents)
    lines = tree_lines([(view, p) for p in decoded.gpus[0].processes])
    shown = [(line.prefix, line.pid, line.process is not None) for line in lines]
    assert (shown[0], shown[1]) == (("", 100, True), ("└─ ", 101, True))
    assert sorted(pid for _, pid, _ in shown) == [7, 8, 9, 50, 51, 100, 101]  # each once
    assert [pid for _, pid, _ in shown[-3:]] == [51, 50, 9]
