"""The processes of each GPU as a tree, as htop's tree view: parents above children.

A helper names each GPU process's parent (``ProcessSample.ppid``) and, once per
sample, the processes up those chains (``Sample.parents``, a few levels); the chains
(``gputui.wire.chains``: loop-safe, capped) of one GPU's processes are merged by pid,
so a launcher's workers hang under one launcher line. A parent that holds nothing on
the GPU is a line of its own (pid and name), for context; pid 1 (the top of every
chain) is left out. An older helper sends no ``ppid``: ``has_tree`` says so, and the
table stays flat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.ui.gpu_view import GpuView
from gputui.wire.chains import chain, parent_index
from gputui.wire.messages import Parent, ProcessSample

__all__ = ["CONTAINER_SHORT", "TreeLine", "has_tree", "tree_lines"]

CONTAINER_SHORT = 12
"""A container id is shown by its first 12 characters, as ``docker ps`` does."""
INIT = 1
"""The top of every chain (init, systemd): not shown, its children are the roots."""
_MID, _LAST, _BAR, _GAP = "├─ ", "└─ ", "│  ", "   "


@dataclass(frozen=True, slots=True)
class TreeLine:
    """One line of the tree: a GPU process (``process``), or a parent of some (None)."""

    gpu: GpuView
    pid: int
    prefix: str
    """``├─ `` / ``└─ `` and the bars of the levels above; empty at a root."""
    name: str
    """The process's command line, or a parent's name."""
    process: ProcessSample | None = None


@dataclass(slots=True)
class _Node:
    pid: int
    name: str
    process: ProcessSample | None = None
    parent: int | None = None
    children: list[int] = field(default_factory=list)


def has_tree(entries: list[tuple[GpuView, ProcessSample]]) -> bool:
    """Whether any process came with its parent (from a helper that sends them)."""
    return any(process.ppid is not None for _, process in entries)


def tree_lines(entries: list[tuple[GpuView, ProcessSample]]) -> list[TreeLine]:
    """Each GPU's processes as a tree, GPUs in the order they come in ``entries``."""
    by_gpu: dict[str, tuple[GpuView, list[ProcessSample]]] = {}
    for gpu, process in entries:
        by_gpu.setdefault(gpu.uuid, (gpu, []))[1].append(process)
    lines: list[TreeLine] = []
    indices: dict[int, dict[int, Parent]] = {}  # a host's GPUs share one table
    for gpu, processes in by_gpu.values():
        index = indices.get(id(gpu.parents))
        if index is None:
            index = indices[id(gpu.parents)] = parent_index(gpu.parents)
        lines += _one_gpu(gpu, processes, index)
    return lines


def _one_gpu(
    gpu: GpuView, processes: list[ProcessSample], index: dict[int, Parent]
) -> list[TreeLine]:
    nodes: dict[int, _Node] = {}

    def node(pid: int, name: str) -> _Node:
        found = nodes.get(pid)
        if found is None:
            found = nodes[pid] = _Node(pid, name)
        return found

    for process in processes:
        node(process.pid, process.command).process = process
    for process in processes:
        child = nodes[process.pid]
        for parent in chain(process.pid, process.ppid, index):
            up = node(parent.pid, parent.name)
            if child.parent is not None or up.pid == child.pid or _above(nodes, up, child):
                break  # already placed (a chain seen before), or a loop
            child.parent = up.pid
            up.children.append(child.pid)
            child = up
    lines: list[TreeLine] = []
    for root in [n for n in nodes.values() if n.parent is None]:
        if root.pid == INIT and root.process is None:  # every chain's top: not news
            for pid in root.children:
                _walk(gpu, nodes, nodes[pid], lines, prefix="", bars="")
        else:
            _walk(gpu, nodes, root, lines, prefix="", bars="")
    return lines


def _above(nodes: dict[int, _Node], up: _Node, child: _Node) -> bool:
    """Whether ``child`` is already above ``up`` (linking them would make a loop)."""
    seen: set[int] = set()
    at: _Node | None = up
    while at is not None and at.pid not in seen:
        if at.pid == child.pid:
            return True
        seen.add(at.pid)
        at = nodes.get(at.parent) if at.parent is not None else None
    return False


def _walk(
    gpu: GpuView, nodes: dict[int, _Node], at: _Node, out: list[TreeLine], *, prefix: str, bars: str
) -> None:
    name = at.process.command if at.process is not None else at.name
    out.append(TreeLine(gpu, at.pid, prefix, name or "-", at.process))
    for i, pid in enumerate(at.children):
        last = i == len(at.children) - 1
        below = bars + (_GAP if last else _BAR)
        _walk(gpu, nodes, nodes[pid], out, prefix=bars + (_LAST if last else _MID), bars=below)
