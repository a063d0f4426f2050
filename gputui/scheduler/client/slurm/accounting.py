"""GPU-hours from Slurm's accounting (``sacct``): ``gputui usage`` and ``report`` on Slurm.

One ``sacct`` for the whole span: every allocation (``-X``) that overlapped it, with
its user, account, partition, allocated TRES (``gres/gpu=N``), start and end. A
job's GPU-hours are its GPUs times the part of its run inside the span (a running
job's up to now), split by local day for ``--daily``. Slurm keeps no GPU
utilisation or energy: those stay unknown here (None), and say so, rather than 0.

Only fields Slurm writes itself are asked for (no job name, no comment), each
record delimited by a nonce as ``squeue``'s are; a line that does not split is
dropped and counted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gputui.scheduler.client.slurm import parse

FIELDS: Final = ("JobID", "User", "Account", "Partition", "AllocTRES", "Start", "End", "State")
_GPU = re.compile(r"(?:^|,)gres/gpu=(\d{1,6})(?:,|$)")
MAX_SPAN_S: Final = 366 * 86400


@dataclass(frozen=True)
class Allocation:
    job: str
    user: str
    account: str
    partition: str
    gpus: int
    start: float
    end: float | None
    """None: still running."""


def sacct_argv(since: float, until: float, markers: parse.Markers) -> list[str]:
    def stamp(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))

    return [
        "sacct", "--allusers", "--allocations", "--noheader", "--parsable2",
        f"--delimiter={markers.field}", "--starttime", stamp(since), "--endtime", stamp(until),
        "--format", ",".join(FIELDS),
    ]  # fmt: skip


def allocations(out: str, markers: parse.Markers) -> tuple[list[Allocation], int]:
    """Each line of ``sacct_argv``'s output that held GPUs; and how many were dropped."""
    found: list[Allocation] = []
    dropped = 0
    for line in out[: parse.MAX_OUTPUT].splitlines():
        if not line:
            continue
        parts = line.split(markers.field)
        if len(parts) != len(FIELDS):
            dropped += 1
            continue
        job, user, account, partition, tres, start, end, _state = parts
        m = _GPU.search(tres)
        began = parse.timestamp(start)
        if m is None or began is None or int(m.group(1)) == 0:
            continue  # held no GPU, or never started
        found.append(
            Allocation(
                job[:32], user[:64], account[:64], partition[:64], int(m.group(1)), began,
                parse.timestamp(end),
            )
        )  # fmt: skip
    return found, dropped


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t))


def _next_midnight(t: float) -> float:
    lt = time.localtime(t)
    return time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, 0, 0, 0, 0, 0, -1))


def usage(
    allocs: Iterable[Allocation],
    since: float,
    until: float,
    by: str,
    *,
    pools: Mapping[str, str],
    now: float,
) -> dict[str, Any]:
    """``usage``'s answer (the head's shape): GPU-hours by ``by`` in ``[since, until)``,
    in total and per local day; busy hours, energy and cost unknown (None)."""
    per_key: dict[str, float] = {}
    per_day: dict[tuple[str, str], float] = {}
    for a in allocs:
        key = {
            "user": a.user,
            "group": a.account,
            "pool": pools.get(a.partition, a.partition),
            "project": "",
        }[by]
        start, end = max(a.start, since), min(a.end if a.end is not None else now, until)
        t = start
        while t < end:
            cut = min(end, _next_midnight(t))
            hours = a.gpus * (cut - t) / 3600
            per_key[key] = per_key.get(key, 0.0) + hours
            per_day[(_day(t), key)] = per_day.get((_day(t), key), 0.0) + hours
            t = cut

    def row(key: str, hours: float) -> dict[str, Any]:
        return {"key": key, "alloc_gpu_h": hours, "busy_gpu_h": None, "energy_kwh": None,
                "cost": None}  # fmt: skip

    totals = [row(k, h) for k, h in sorted(per_key.items(), key=lambda kv: -kv[1])]
    rows = [{"day": d, **row(k, h)} for (d, k), h in sorted(per_day.items())]
    return {
        "scheduler": "slurm",
        "by": by,
        "since": since,
        "until": until,
        "currency": "",
        "totals": totals,
        "rows": rows,
        "unknown": "busy hours, energy and cost: Slurm keeps no GPU utilisation",
    }


def report(allocs: list[Allocation], since: float, until: float, now: float) -> dict[str, Any]:
    """``report``'s answer on Slurm: GPU-hours allocated, the top users and accounts."""
    by_user = usage(allocs, since, until, "user", pools={}, now=now)["totals"]
    by_account = usage(allocs, since, until, "group", pools={}, now=now)["totals"]
    return {
        "scheduler": "slurm",
        "since": since,
        "until": until,
        "days": (until - since) / 86400,
        "alloc_gpu_h": sum(r["alloc_gpu_h"] for r in by_user),
        "jobs": len({a.job for a in allocs}),
        "users": by_user[:5],
        "accounts": by_account[:5],
    }
