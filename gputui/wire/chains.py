"""Parent chains from a sample's ``parents`` table: loop-safe, depth-capped.

A helper sends each GPU process's ``ppid`` and, once per sample, every process up
those chains (``Sample.parents``), so the workers of one launcher cost one entry for
the launcher. The console rebuilds a process's chain here, nearest parent first. The
table is untrusted: a pid named twice counts once (its first entry), and a walk stops
at ``MAX_ANCESTORS`` levels, at pid 0, at a pid the table does not name, and at a pid
it has already passed (a loop).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gputui.wire.messages import MAX_ANCESTORS, Parent

__all__ = ["chain", "parent_index"]


def parent_index(parents: Iterable[Parent]) -> dict[int, Parent]:
    """The table by pid; a pid named twice keeps its first entry."""
    index: dict[int, Parent] = {}
    for parent in parents:
        index.setdefault(parent.pid, parent)
    return index


def chain(
    pid: int, ppid: int | None, index: Mapping[int, Parent], depth: int = MAX_ANCESTORS
) -> list[Parent]:
    """The parents of process ``pid`` (whose parent is ``ppid``), nearest first.

    Never ``pid`` itself, never a pid twice, at most ``depth`` entries.
    """
    found: list[Parent] = []
    seen = {pid}
    at = ppid
    while at and at not in seen and len(found) < depth:
        parent = index.get(at)
        if parent is None:
            break
        seen.add(at)
        found.append(parent)
        at = parent.ppid
    return found
