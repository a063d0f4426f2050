"""GPU-hours from Slurm's accounting (``sacct``): ``gputui usage`` and ``report`` on Slurm.

One ``sacct`` for the whole span: every allocation (``-X``) that overlapped it, with
its user, account, partition, allocated TRES (``gres/gpu=N``), start and end. A
job's GPU-hours are its GPUs times the part of its run inside the span (a running
job's up to now), split by local day for ``--daily``. Slurm keeps no GPU
utilisation or energy: those stay unknown here (None), and say so, rather than 0,
unless a gputui head that relays Slurm metered the jobs (``metering``): its figures
are joined job by job (sacct's ``JobIDRaw``).

Only fields Slurm writes itself are asked for (no job name, no comment), each
record delimited by a nonce as ``squeue``'s are; a line that does not split is
dropped and counted.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gputui.common.printable import shown
from gputui.scheduler.client.slurm import fields, parse

FIELDS: Final = ("JobIDRaw", "User", "Account", "Partition", "AllocTRES", "Start", "End", "State")
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


def sacct_argv(since: float, until: float, markers: fields.Markers) -> list[str]:
    def stamp(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))

    return [
        "sacct", "--allusers", "--allocations", "--noheader", "--parsable2",
        f"--delimiter={markers.field}", "--starttime", stamp(since), "--endtime", stamp(until),
        "--format", ",".join(FIELDS),
    ]  # fmt: skip


def allocations(out: str, markers: fields.Markers) -> tuple[list[Allocation], int]:
    """Each line of ``sacct_argv``'s output that held GPUs; and how many were dropped."""
    found: list[Allocation] = []
    dropped = 0
    for line in out[: fields.MAX_OUTPUT].splitlines():
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


@dataclass(frozen=True)
class JobEnergy:
    """What a gputui head that relays Slurm metered of one job (``slurm_energy``)."""

    busy_s: float
    energy_j: float
    per_node: bool
    days: Mapping[str, tuple[float, float, float]]
    """Local day -> (busy GPU-seconds, joules, GPU-seconds metered)."""
    held_s: float = 0.0
    """GPU-seconds the head metered of it (a per-node share counted by its share)."""


@dataclass(frozen=True)
class Metering:
    """The head's answer: each metered job's figures, and its prices."""

    jobs: Mapping[str, JobEnergy]
    price_per_kwh: float = 0.0
    gpu_hour_rate: Mapping[str, float] = field(default_factory=dict)
    currency: str = ""


MAX_METERED_JOBS: Final = 1_000_000
SPLIT_NOTE: Final = (
    "some energy is a node's power split among its jobs by GPU count (Slurm named no GPU"
    " indexes there)"
)


def _figure(value: Any) -> float:
    """A non-negative finite number from the head's answer (anything else: refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("not a number")
    number = float(value)
    if not math.isfinite(number) or not 0 <= number <= 1e15:
        raise ValueError("out of range")
    return number


def metering(answer: Mapping[str, Any]) -> Metering:
    """The head's ``slurm_energy`` answer, checked (``ValueError`` naming what is wrong)."""
    jobs: dict[str, JobEnergy] = {}
    rows = answer.get("jobs")
    if not isinstance(rows, list) or len(rows) > MAX_METERED_JOBS:
        raise ValueError("jobs: not a list")
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("job"), int):
            raise ValueError("jobs: a row without a job id")
        days = row.get("days")
        if not isinstance(days, dict) or len(days) > 400:
            raise ValueError(f"job {row['job']}: days")
        per_day = {}
        for day, cell in days.items():
            if not (isinstance(day, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", day)):
                raise ValueError(f"job {row['job']}: not a day: {shown(day, 20)}")
            if not isinstance(cell, list) or len(cell) != 3:
                raise ValueError(f"job {row['job']}: {day}")
            per_day[day] = (_figure(cell[0]), _figure(cell[1]), _figure(cell[2]))
        jobs[str(row["job"])] = JobEnergy(
            _figure(row.get("busy_gpu_s")),
            _figure(row.get("energy_j")),
            row.get("per_node") is True,
            per_day,
            _figure(row.get("held_gpu_s", 0.0)),
        )
    rates = answer.get("gpu_hour_rate") or {}
    if not isinstance(rates, dict):
        raise ValueError("gpu_hour_rate: not a map")
    currency = answer.get("currency", "")
    return Metering(
        jobs,
        _figure(answer.get("price_per_kwh", 0.0)),
        {str(k)[:64]: _figure(v) for k, v in list(rates.items())[:256]},
        shown(currency, 8) if isinstance(currency, str) else "",
    )


def usage(
    allocs: Iterable[Allocation],
    since: float,
    until: float,
    by: str,
    *,
    pools: Mapping[str, str],
    now: float,
    metered: Metering | None = None,
) -> dict[str, Any]:
    """``usage``'s answer (the head's shape): GPU-hours by ``by`` in ``[since, until)``,
    in total and per local day. With ``metered`` (a head that relays Slurm and watches
    the hosts): busy hours, energy and cost of the jobs it metered; a key none of whose
    jobs it metered keeps them unknown (None), never 0."""
    keys: dict[str, dict[str, Any]] = {}
    days: dict[tuple[str, str], dict[str, Any]] = {}
    jobs = metered.jobs if metered is not None else {}
    rates = metered.gpu_hour_rate if metered is not None else {}
    kwh_price = metered.price_per_kwh if metered is not None else 0.0
    counted: set[str] = set()

    def cell(into: dict[Any, dict[str, Any]], at: Any) -> dict[str, Any]:
        return into.setdefault(
            at, {"alloc": 0.0, "seen": False, "busy": 0.0, "energy": 0.0, "rate": 0.0,
                 "split": False, "unknown": 0.0, "held": 0.0}
        )  # fmt: skip

    for a in allocs:
        pool = pools.get(a.partition, a.partition)
        key = {"user": a.user, "group": a.account, "pool": pool, "project": ""}[by]
        known = jobs.get(a.job)
        start, end = max(a.start, since), min(a.end if a.end is not None else now, until)
        t = start
        while t < end:
            cut = min(end, _next_midnight(t))
            hours = a.gpus * (cut - t) / 3600
            for c in (cell(keys, key), cell(days, (_day(t), key))):
                c["alloc"] += hours
                c["rate"] += hours * rates.get(pool, 0.0)
                if known is None:
                    c["unknown"] += hours
                else:
                    c["seen"] = True
            t = cut
        if known is not None and a.job not in counted:  # one job: its energy once
            counted.add(a.job)
            total = cell(keys, key)
            total["held"] += known.held_s / 3600
            total["busy"] += known.busy_s / 3600
            total["energy"] += known.energy_j / 3.6e6
            total["split"] = total["split"] or known.per_node
            total["seen"] = True
            for day, (busy, joules, held) in known.days.items():
                c = cell(days, (day, key))
                c["held"] += held / 3600
                c["busy"] += busy / 3600
                c["energy"] += joules / 3.6e6
                c["split"] = c["split"] or known.per_node
                c["seen"] = True

    def row(k: str, c: dict[str, Any]) -> dict[str, Any]:
        seen = bool(c["seen"])
        # A price per kWh with energy not known for all of it: the cost is not known.
        priced = metered is not None and not (c["unknown"] > 0 and kwh_price > 0)
        return {
            "key": k,
            "alloc_gpu_h": c["alloc"],
            "busy_gpu_h": c["busy"] if seen else None,
            "energy_kwh": c["energy"] if seen else None,
            "cost": c["energy"] * kwh_price + c["rate"] if priced else None,
            "unmetered_gpu_h": c["unknown"],
            "metered_gpu_h": c["held"],
            "per_node": c["split"],
        }

    totals = [row(k, c) for k, c in sorted(keys.items(), key=lambda kv: -kv[1]["alloc"])]
    rows = [{"day": d, **row(k, c)} for (d, k), c in sorted(days.items())]
    unknown = sum(c["unknown"] for c in keys.values())
    alloc = sum(c["alloc"] for c in keys.values())
    if metered is None:
        note = "busy hours, energy and cost: Slurm keeps no GPU utilisation"
    elif unknown > 0:
        note = (
            f"energy of {unknown:.2f} of {alloc:.2f} GPU-hours: the head metered no power"
            " for those jobs (hosts it does not watch, or before it relayed Slurm)"
        )
    else:
        note = ""
    split = any(c["split"] for c in keys.values())
    return {
        "scheduler": "slurm",
        "by": by,
        "since": since,
        "until": until,
        "currency": metered.currency if metered is not None else "",
        "totals": totals,
        "rows": rows,
        "unknown": note,
        "note": SPLIT_NOTE if split else "",
    }


def report(
    allocs: list[Allocation],
    since: float,
    until: float,
    now: float,
    *,
    pools: Mapping[str, str] | None = None,
    metered: Metering | None = None,
) -> dict[str, Any]:
    """``report``'s answer on Slurm: GPU-hours allocated, the top users and accounts;
    with ``metered``, busy hours, energy and cost of what the head metered (a pool's
    GPU-hour price found by ``pools``: partition -> pool)."""
    by_user, by_account = (
        usage(allocs, since, until, by, pools=pools or {}, now=now, metered=metered)
        for by in ("user", "group")
    )
    users = by_user["totals"]

    def total(name: str) -> float | None:
        values = [r[name] for r in users if r[name] is not None]
        return sum(values) if values else None

    return {
        "scheduler": "slurm",
        "since": since,
        "until": until,
        "days": (until - since) / 86400,
        "alloc_gpu_h": sum(r["alloc_gpu_h"] for r in users),
        "busy_gpu_h": total("busy_gpu_h"),
        "energy_kwh": total("energy_kwh"),
        "cost": None if any(r["cost"] is None for r in users) else total("cost"),
        "unmetered_gpu_h": sum(r["unmetered_gpu_h"] for r in users),
        "currency": by_user["currency"],
        "jobs": len({a.job for a in allocs}),
        "users": users[:5],
        "accounts": by_account["totals"][:5],
        "unknown": by_user["unknown"],
        "note": by_user["note"],
    }
