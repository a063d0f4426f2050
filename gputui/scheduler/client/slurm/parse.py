"""What Slurm's commands print, read into the head's wire shapes: untrusted text.

Slurm 22.05 (Debian 12's) and later. The text formats (``squeue -o``, ``sinfo -o``)
are read, not ``--json``: the JSON shape changed between releases (data_parser
v0.0.38 to v0.0.44) and is several times slower to make; the ``%`` field letters
have not changed since long before 22.05 (see DESIGN.md).

Job names, comments, reasons and working directories are anybody's text: Slurm
prints them as given, newlines and control characters included. So every record
and every field is delimited by a marker holding a random nonce made for that one
call (``Markers``), which no user can have put in a name in advance: a record whose
fields do not split exactly is dropped and counted, never shifted into another
job's columns. ``scontrol show job -d`` (the only source of a running job's GPU
indexes) has no such format: its records are found by the names ``squeue`` gave
(``gpu_indexes``), and a job whose record is ambiguous gets no indexes rather than
another job's.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from gputui.scheduler.client.slurm.fields import MAX_OUTPUT, Markers

MAX_FIELD: Final = 4096
"""The longest field kept (a name, a comment, a reason); longer is cut."""
MAX_JOB_ID: Final = 2**32 - 1
MAX_LIMIT_S: Final = 365 * 86400
"""The longest ``--time`` gputui passes Slurm."""
"""Slurm's job ids are 32-bit."""

ACTIVE_STATES: Final = frozenset(
    {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "RESIZING", "REQUEUED",
     "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}
)  # fmt: skip
"""Slurm's job states of a job that has not ended."""
FINAL_STATES: Final = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
     "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"}
)  # fmt: skip


@dataclass
class Parsed:
    """Records read, and how many were dropped as malformed."""

    rows: list[dict[str, str]]
    dropped: int = 0


def split_records(out: str, markers: Markers, keys: Sequence[str]) -> Parsed:
    """``out`` (printed with ``markers.format``) as one dict per record; a record whose
    field count is not ``len(keys)`` is dropped, counted."""
    parsed = Parsed([])
    chunks = out[:MAX_OUTPUT].split(markers.record)
    tail = chunks.pop()  # after the last record: its newline, or a record cut short
    if tail.strip():
        parsed.dropped += 1
    for number, chunk in enumerate(chunks):
        body = chunk
        if number:  # each record after the first starts with the previous one's newline
            if not chunk.startswith("\n"):
                parsed.dropped += 1
                continue
            body = chunk[1:]
        values = body.split(markers.field)
        if len(values) != len(keys):
            parsed.dropped += 1
            continue
        if len(body) > MAX_FIELD:  # only then can a field be over the cap
            values = [v[:MAX_FIELD] for v in values]
        parsed.rows.append(dict(zip(keys, values, strict=True)))
    return parsed


# -- values -------------------------------------------------------------------------

_NONE: Final = frozenset({"", "N/A", "NONE", "None", "(null)", "Unknown", "n/a"})


def text(value: str) -> str | None:
    """A free-text field, or None for Slurm's words for nothing."""
    return None if value in _NONE else value


def job_id(value: str) -> int | None:
    if not value.isascii() or not value.isdigit() or len(value) > 10:
        return None
    number = int(value)
    return number if 0 < number <= MAX_JOB_ID else None


_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


@functools.lru_cache(maxsize=4096)
def timestamp(value: str) -> float | None:
    """Slurm's ``2026-12-03T02:49:01`` (the local time of the command), as epoch
    seconds (a queue's jobs share many: each is worked out once)."""
    if len(value) != 19 or not _STAMP.fullmatch(value):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


_DURATION = re.compile(r"(?:(\d{1,5})-)?(?:(\d{1,2}):)?(\d{1,2}):(\d{2})|(\d{1,7})")


@functools.lru_cache(maxsize=1024)
def duration_s(value: str) -> float | None:
    """Slurm's ``[D-]HH:MM:SS``, ``MM:SS`` or minutes, as seconds; None for
    ``UNLIMITED`` and anything else."""
    m = _DURATION.fullmatch(value.strip())
    if m is None:
        return None
    if m.group(5) is not None:
        return float(int(m.group(5)) * 60)
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.group(1, 2, 3, 4))
    if minutes >= 60 or seconds >= 60 or (hours >= 24 and days):
        return None
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def slurm_duration(seconds: float) -> str:
    """Seconds as Slurm's ``--time`` (``D-HH:MM:SS``, rounded up to a minute as Slurm's
    limits are)."""
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_LIMIT_S:
        raise ValueError(f"a time limit of at most {MAX_LIMIT_S // 86400} days")
    minutes = max(1, math.ceil(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00"


_GPU_TRES = re.compile(r"(?:gres[:/])?gpu(?::[A-Za-z0-9_.-]{1,64})?[:=](\d{1,6})")


@functools.lru_cache(maxsize=1024)
def gpus_of(tres: str, nodes: str = "1") -> int:
    """GPUs a job asks for: its per-node ``gres:gpu[:type]:N`` times its nodes."""
    total = 0
    for part in tres.split(","):
        m = _GPU_TRES.fullmatch(part.strip())
        if m is not None:
            total += int(m.group(1))
    count = int(nodes) if nodes.isascii() and nodes.isdigit() and len(nodes) < 7 else 1
    return total * max(1, count)


def exit_code(value: str) -> tuple[int | None, int | None]:
    """Slurm's ``EXIT:SIGNAL`` as (exit code, signal)."""
    code, _, sig = value.partition(":")
    if not (code.isascii() and code.isdigit() and sig.isascii() and sig.isdigit()):
        return None, None
    c, s = int(code), int(sig)
    if not (0 <= c <= 255 and 0 <= s <= 255):
        return None, None
    return c, s or None


_JOB_REF = re.compile(r"(?<![\d])(\d{1,10})(?![\d])")


def job_view(row: Mapping[str, str], pools: Mapping[str, str]) -> dict[str, Any] | None:
    """A squeue record as the head's job view (None for a record with no job id). A
    record of the table's fields only (``TABLE_KEYS``) gives None for the others."""
    number = job_id(row["id"])
    if number is None:
        return None
    other = row.get
    words = row["state"].split()
    state = words[0] if words else "UNKNOWN"
    partition = text(other("partition", ""))
    started = timestamp(row["started"]) if state not in ("PENDING",) else None
    dependency = text(other("dependency", ""))
    after = [int(x) for x in _JOB_REF.findall(dependency)][:64] if dependency else []
    priority = other("priority", "")
    return {
        "id": number,
        "array_id": row["display_id"] if row["display_id"] != row["id"] else None,
        "user": row["user"],
        "group": text(other("group", "")),
        "name": row["name"],
        "state": state,
        "reason": text(row["reason"]),
        "gpus": gpus_of(row["tres"], row["nodes"]),
        "pool": pools.get(partition, partition) if partition else None,
        "partition": partition,
        "host_constraint": None,
        "host": text(row["host"]),
        "gpu_uuids": [],
        "priority": int(priority) if priority.isascii() and priority.isdigit() else None,
        "qos": text(other("qos", "")),
        "preemptible": False,
        "time_limit_s": duration_s(other("time_limit", "")),
        "submitted_at": timestamp(other("submitted", "")),
        "started_at": started,
        "ended_at": timestamp(row["ended"]) if state in FINAL_STATES else None,
        "exit_code": None,
        "exit_signal": None,
        "requeues": 0,
        "run_as": None,
        "project": None,
        "after": after,
        "after_ok": dependency is not None and "afterok" in dependency,
        "over_quota": False,
        "idle_since": None,
        "cwd": text(other("cwd", "")),
        "comment": text(other("comment", "")),
    }


# -- scontrol show job -d ----------------------------------------------------------

_DETAIL = (
    r"     Nodes=(?P<nodes>[A-Za-z0-9_.,\[\]-]{1,256}) CPU_IDs=\S* Mem=\d+ "
    r"GRES=(?P<gres>\S*)"
)
_IDX = r"gpu(?::[A-Za-z0-9_.-]{1,64})?(?::\d{1,6})?\(IDX:(?P<idx>[0-9,\-]{0,256})\)"


def index_list(spec: str) -> list[int]:
    """``0-1,3`` as [0, 1, 3] (capped at 4,096 indexes)."""
    out: list[int] = []
    for part in spec.split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return []
        a, b = int(lo), int(hi or lo)
        if b < a or b - a > 4096 or len(out) + b - a >= 4096:
            return []
        out.extend(range(a, b + 1))
    return out


HEADER: Final = (
    r"(?m)^JobId=(\d{1,10})(?: ArrayJobId=\d{1,10} ArrayTaskId=[0-9\[\]%,-]{1,64})?"
    r"(?: HetJobId=\d{1,10} HetJobOffset=\d{1,10})? JobName="
)
"""How ``scontrol show job`` starts a job's record (an array element's and a
heterogeneous job's component's too), up to its name."""


def after_name(out: str, header: re.Match[str], name: str | None) -> int | None:
    """Where a record's body starts, past ``JobId=N ... JobName=`` (``header``) and the
    job's name as squeue gave it (newlines and all), or None when the name is not
    that one there."""
    if name is None:
        return None
    end = header.end() + len(name)
    if out[header.end() : end] != name or out[end : end + 1] != "\n":
        return None
    return end + 1


def gpu_indexes(out: str, names: Mapping[int, str]) -> dict[int, dict[str, list[int]]]:
    """Each running job's GPU indexes per node, from ``scontrol show job -d`` (all
    jobs, one call): {job id: {node: [index, ...]}}. ``names`` are the jobs' names as
    squeue gave them (nonce-delimited, so trusted to be the names): a record is
    where ``JobId=N JobName=<its name>`` starts a line and appears once; its name is
    skipped whole, and only the lines Slurm itself writes before the record's free
    text (``MinCPUsNode=``) are read. A job whose header appears twice (another
    job's name or comment forging it) gets nothing."""
    out = out[:MAX_OUTPUT]
    starts: dict[int, list[int]] = {}
    for m in re.finditer(HEADER, out):
        number = int(m.group(1))
        at = after_name(out, m, names.get(number))
        if at is not None:
            starts.setdefault(number, []).append(at)
    found: dict[int, dict[str, list[int]]] = {}
    for number, positions in starts.items():
        if len(positions) != 1:
            continue
        at = positions[0]
        stop = out.find("\n   MinCPUsNode=", at)
        body = out[at : stop if stop >= 0 else at]
        per_node: dict[str, list[int]] = {}
        for line in body.split("\n"):
            detail = re.fullmatch(_DETAIL, line)
            if detail is None:
                continue
            # One line may stand for several nodes given the same GPUs (gpu[01-02]).
            idx = [
                i
                for g in re.finditer(_IDX, detail.group("gres"))
                for i in index_list(g.group("idx"))
            ]
            for node in node_names(detail.group("nodes")) if idx else ():
                per_node.setdefault(node, []).extend(idx)
        if per_node:
            found[number] = per_node
    return found


def node_names(spec: str) -> list[str]:
    """A Slurm host list (``gpu[01-03,07],login``) expanded (capped at 4,096 names)."""
    names: list[str] = []
    for m in re.finditer(
        r"([A-Za-z0-9_.-]*)(?:\[([0-9,\-]{1,256})\])?([A-Za-z0-9_.-]*)(?:,|$)", spec
    ):
        prefix, ranges, suffix = m.group(1), m.group(2), m.group(3)
        if not prefix and not ranges:
            continue
        if ranges is None:
            names.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                continue
            width = len(lo)
            a, b = int(lo), int(hi or lo)
            if b < a or b - a > 4096:
                continue
            names.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(a, b + 1))
        if len(names) > 4096:
            return names[:4096]
    return names
