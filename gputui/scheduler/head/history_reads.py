"""The ``history`` request (``gputui history``, Slurm's ``sacct``): finished jobs with
their exit, GPU-hours, busy share and energy. Read-only, answered from a snapshot.

Each job keeps its own figures (``Job.alloc_gpu_s``, ``busy_gpu_s``, ``energy_j``),
added in the same transactions as the usage rows, so a job's GPU-hours are the
seconds its usage rows got; what the meter counted since its last flush is added
here, so a job that just ended shows its last minute too.

Who sees whose: the caller's own jobs by default. Another user's (``user``), or
everyone's (``all_users``), as ``queue --all`` shows them: to anyone while the head's
``scheduler.private_data`` is off, to admins alone while it is on (Slurm's
``PrivateData=jobs`` hides them from ``sacct`` the same way).
"""

from __future__ import annotations

from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.head.usage_reads import window
from gputui.scheduler.policy.meter import Metered
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.read_args import HistoryArgs
from gputui.scheduler.server.wire import FINAL_JOB_STATES, Refusal
from gputui.scheduler.store.api import Tx
from gputui.wire.words import say

HOUR = 3600.0
KWH = 3.6e6
_DIGITS = 6


def whose(caller: Caller, args: HistoryArgs, private: bool) -> tuple[str | None, int | None]:
    """(user name, uid) to filter by (None, None: everyone's), or a ``denied`` Refusal."""
    mine = args.user is None or args.user == caller.user
    if not args.all_users and mine:
        return None, caller.uid
    if private and not caller.admin:
        raise Refusal(
            "denied",
            say(N_("history: everyone's jobs are private here (private_data): your own only"))
            if args.all_users
            else say(
                N_("history: {user}'s jobs are private here (private_data): your own only"),
                user=str(args.user),
            ),
        )
    return (None, None) if args.all_users else (args.user, None)


def row(job: dict[str, Any], pending: Metered) -> dict[str, Any]:
    """One finished job as the answer shows it: its figures in hours, share and kWh
    (``busy_share``, ``energy_kwh``: None when the job ran before they were kept)."""
    alloc = float(job["alloc_gpu_s"] or 0.0)
    busy, energy = job["busy_gpu_s"], job["energy_j"]
    counted = pending.jobs.get(int(job["id"]))
    if counted is not None and busy is not None and energy is not None:
        busy, energy = float(busy) + counted[0], float(energy) + counted[1]
    out = {k: v for k, v in job.items() if k not in ("alloc_gpu_s", "busy_gpu_s", "energy_j")}
    out["gpu_h"] = round(alloc / HOUR, _DIGITS)
    out["busy_gpu_h"] = None if busy is None else round(float(busy) / HOUR, _DIGITS)
    out["busy_share"] = (
        None if busy is None or alloc <= 0 else round(min(1.0, float(busy) / alloc), 4)
    )
    out["energy_kwh"] = None if energy is None else round(float(energy) / KWH, _DIGITS)
    return out


def history(
    tx: Tx, caller: Caller, args: HistoryArgs, pending: Metered, now: float, *, private: bool
) -> dict[str, Any]:
    """The newest ``limit`` finished jobs in the range, newest first; ``more``: whether
    the limit left some out."""
    since, until = window("history", args.since, args.until, now)
    user, uid = whose(caller, args, private)
    states = sorted(set(args.states) or FINAL_JOB_STATES)
    found = tx.usage.finished(states, since, until, args.limit + 1, user=user, uid=uid)
    jobs = [row(j, pending) for j in found[: args.limit]]
    return {
        "since": since,
        "until": until,
        "user": caller.user if uid is not None else user,
        "all_users": user is None and uid is None,
        "jobs": jobs,
        "more": len(found) > args.limit,
    }
