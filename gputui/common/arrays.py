"""Job arrays: ``--array`` specs (``0-31%4``, ``1,3,5``, ``0-99:10``) and the names of
their tasks (``12_7``; ``12_[4-31]`` for the rest of an array).

Stdlib only: the CLI checks a spec before it asks the head, and the head checks it
again with the same function (a request is untrusted).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from typing import Any, NamedTuple

MAX_TASKS = 10_000
"""The most tasks one array may have."""
MAX_TASK_ID = 1_000_000
"""The highest task id (Slurm's ``MaxArraySize`` bounds it the same way)."""
MAX_SPEC = 1024
"""The longest spec read."""

_PART = re.compile(r"([0-9]{1,7})(?:-([0-9]{1,7})(?::([0-9]{1,7}))?)?")


class ArraySpec(NamedTuple):
    """An array's task ids (sorted, unique) and how many may run at once (None: any)."""

    tasks: tuple[int, ...]
    throttle: int | None


class ArrayError(ValueError):
    """A spec that cannot be read: one line saying what is wrong with it."""


def parse_array(text: str) -> ArraySpec:
    """``A-B[:STEP]`` and single ids, comma-separated, then an optional ``%N``."""
    if len(text) > MAX_SPEC:
        raise ArrayError(f"--array: longer than {MAX_SPEC} characters")
    body, percent, limit = text.strip().partition("%")
    throttle: int | None = None
    if percent:
        if not limit.isascii() or not limit.isdigit() or len(limit) > 7:
            raise ArrayError(f"--array: %N takes a whole number, not {limit[:20]!r}")
        throttle = int(limit)
        if throttle < 1:
            raise ArrayError("--array: %N must be at least 1")
    tasks: set[int] = set()
    for part in body.split(","):
        match = _PART.fullmatch(part.strip())
        if match is None:
            raise ArrayError(
                f"--array: {part.strip()[:40]!r} is not N, A-B or A-B:STEP (e.g. 0-31%4, 1,3,5)"
            )
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        step = int(match.group(3)) if match.group(3) is not None else 1
        if high > MAX_TASK_ID:
            raise ArrayError(f"--array: task ids go up to {MAX_TASK_ID}, not {high}")
        if high < low:
            raise ArrayError(f"--array: {low}-{high} goes down")
        if step < 1:
            raise ArrayError("--array: a step must be at least 1")
        if (high - low) // step + 1 + len(tasks) > MAX_TASKS:
            raise ArrayError(f"--array: more than {MAX_TASKS} tasks")
        tasks.update(range(low, high + 1, step))
    return ArraySpec(tuple(sorted(tasks)), throttle)


def task_name(array_id: int, task: int) -> str:
    """One task as Slurm names it: ``12_7``."""
    return f"{array_id}_{task}"


def folded_name(array_id: int, tasks: list[int] | tuple[int, ...]) -> str:
    """Several tasks of one array in one name: ``12_[4-31]``, ``12_[1,3,5-9]``; one
    task alone is ``12_7``."""
    if len(tasks) == 1:
        return task_name(array_id, tasks[0])
    runs: list[str] = []
    ordered = sorted(tasks)
    start = prev = ordered[0]
    for task in ordered[1:]:
        if task == prev + 1:
            prev = task
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = task
    runs.append(str(start) if start == prev else f"{start}-{prev}")
    text = ",".join(runs)
    if len(text) > 60:
        text = text[:57].rsplit(",", 1)[0] + ",..."
    return f"{array_id}_[{text}]"


_TASK_REF = re.compile(r"([0-9]{1,15})_([0-9]{1,7})")


def task_ref(text: str) -> tuple[int, int | None] | None:
    """``12`` -> (12, None); ``12_7`` -> (12, 7); anything else None."""
    text = text.strip()
    if text.isascii() and text.isdigit() and len(text) <= 15:
        return int(text), None
    match = _TASK_REF.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def output_path(pattern: str, job_id: int, array_id: int | None, task: int | None) -> str:
    """``--output``'s pattern with ``%j`` (job id), ``%A`` (array id), ``%a`` (task id)
    and ``%%`` replaced. Outside an array ``%A`` is the job's id and ``%a`` is ``0``
    (Slurm writes 4294967294 there). Any other ``%`` stays as it is."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "%" and i + 1 < len(pattern):
            code = pattern[i + 1]
            value = {
                "j": str(job_id),
                "A": str(array_id if array_id is not None else job_id),
                "a": str(task if task is not None else 0),
                "%": "%",
            }.get(code)
            if value is not None:
                out.append(value)
                i += 2
                continue
        out.append(char)
        i += 1
    return "".join(out)


FOLDED_STATES = frozenset({"queued", "held"})
"""The states whose tasks of one array ``fold`` shows as one line."""


def job_label(job: dict[str, Any]) -> str:
    """A job's id as the queue shows it: ``12``, or ``12_7`` for a task of array 12."""
    array, task = job.get("array_id"), job.get("array_task")
    if isinstance(array, int) and isinstance(task, int):
        return task_name(array, task)
    return str(job.get("id", "?"))


def fold(
    jobs: Iterable[dict[str, Any]], keep: Container[int] = frozenset()
) -> list[tuple[str, dict[str, Any], int]]:
    """The queue's lines: (label, the job shown, how many it stands for). An array's
    waiting tasks in one state fold into one line at the first one's place
    (``12_[4-31]``); running and ended tasks have a line each (``12_3``), as do all
    the tasks of the arrays in ``keep`` (expanded)."""
    out: list[tuple[str, dict[str, Any], list[int]]] = []
    at: dict[tuple[int, str], int] = {}
    for job in jobs:
        array, task, state = job.get("array_id"), job.get("array_task"), job.get("state")
        folds = isinstance(array, int) and array not in keep and state in FOLDED_STATES
        if folds and isinstance(array, int) and isinstance(task, int):
            key = (array, str(state))
            if key in at:
                out[at[key]][2].append(task)
                continue
            at[key] = len(out)
            out.append(("", job, [task]))
            continue
        out.append((job_label(job), job, []))
    lines: list[tuple[str, dict[str, Any], int]] = []
    for label, job, tasks in out:
        if tasks:
            lines.append((folded_name(job["array_id"], tasks), job, len(tasks)))
        else:
            lines.append((label, job, 1))
    return lines
