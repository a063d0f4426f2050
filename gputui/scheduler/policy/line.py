"""From the store's rows to the policy's view: the line, the running work, the rules.

``build`` turns queued jobs and waiting claims into ``policy.Want``s (class rank,
fair-share factor, quota state, off-hours, time limit, dependency state) and live
jobs and claims into ``policy.Running``; nothing here decides anything. Jobs
whose ``--after-ok`` dependency failed come back separately, to be cancelled.
The rows are read through ``rows``' protocols: the store's objects pass as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy import shares
from gputui.scheduler.policy.rows import FINAL_JOB_STATES, ClaimRow, J, JobRow, Rows
from gputui.scheduler.policy.shares import Standing

STOPPING = ("killing", "preempting")
HOLDING = ("starting", "running", "killing", "preempting", "unknown")


def _job_ids(text: str) -> list[int]:
    """A job's ``after`` column: most have none, and need no parse."""
    return [] if text == "[]" else list(json.loads(text))


def alike(rows: Sequence[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    """New jobs' rows (with ids), grouped under the id of the first of each group by
    what alone decides a job's reason when no GPU is usable: its class, pool, host,
    size and user (then a pass places, preempts and reserves nothing, and each
    request waits for its class's reason or its shape's: the same for all alike, as
    ``test_policy_props`` checks). A pass over one of each gives them all theirs."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (row["priority"], row["pool"], row["host_constraint"], row["gpus"], row["user"])
        groups.setdefault(key, []).append(row)
    return {group[0]["id"]: group for group in groups.values()}


def dependency_state(after: Sequence[int], after_ok: bool, states: Mapping[int, str]) -> str | None:
    """None when it may start; ``policy.DEPENDENCY`` while one of ``after`` has not
    ended; for ``after_ok``, a line naming the dependency that did not complete
    (the job is then cancelled). A job no longer known counts as ended (completed)."""
    waiting = False
    for dep in after:
        state = states.get(dep, "completed")
        if state not in FINAL_JOB_STATES:
            waiting = True
        elif after_ok and state != "completed":
            return f"dependency job {dep} {state}"
    return policy.DEPENDENCY if waiting else None


def class_blocked(config: SchedulerConfig, klass: str) -> str | None:
    """``ClassNotAllowed`` for a class the config no longer has."""
    return None if config.klass(klass) is not None else policy.CLASS_NOT_ALLOWED


@dataclass(slots=True)
class Line(Generic[J]):
    wants: list[policy.Want] = field(default_factory=list)
    rows: dict[tuple[str, int], Any] = field(default_factory=dict)
    running: list[policy.Running] = field(default_factory=list)
    broken_deps: list[tuple[J, str]] = field(default_factory=list)
    """Queued jobs whose ``--after-ok`` dependency failed: (job, why)."""
    arrays: dict[int, J] = field(default_factory=dict)
    """Each array with waiting tasks in the line: its first waiting task (the one whose
    reason the array's other waiting tasks, not read, take)."""
    room: dict[int, int] = field(default_factory=dict)
    """How many more tasks each throttled array in the line may start (its ``%N``
    less those holding GPUs)."""
    throttled: list[J] = field(default_factory=list)
    """The first waiting task of each array held back by its ``%N`` (none of its
    tasks is in the line: ``policy.ARRAY_LIMIT``)."""


def job_want(
    job: JobRow,
    config: SchedulerConfig,
    standing: Standing,
    barred: frozenset[str],
    blocked: str | None,
) -> policy.Want:
    assert job.id is not None
    klass = config.klass(job.priority)
    return policy.Want(
        "job",
        job.id,
        job.gpus,
        user=job.user,
        pool=job.pool,
        host=job.host_constraint,
        mig=job.mig,
        since=job.submitted_at,
        barred=barred,
        group=job.group,
        rank=config.rank(job.priority),
        fair=standing.factor(job.group),
        over_quota=standing.over_quota(job.group, job.pool),
        off_hours_only=klass is not None and klass.off_hours,
        time_limit_s=job.time_limit_s,
        preemptible=preemptible(job, config),
        booking=job.booking_id,
        blocked=blocked or class_blocked(config, job.priority),
    )


def claim_want(item: ClaimRow, config: SchedulerConfig, standing: Standing) -> policy.Want:
    assert item.id is not None
    return policy.Want(
        "claim",
        item.id,
        item.gpus,
        user=item.user,
        pool=item.pool,
        host=item.host_constraint,
        model=item.model,
        mig=item.mig,
        named=tuple(json.loads(item.wanted)),
        since=item.created_at,
        group=item.group,
        rank=config.rank(config.default_class),
        fair=standing.factor(item.group),
        over_quota=standing.over_quota(item.group, item.pool),
        time_limit_s=item.max_duration_s,
        booking=item.booking_id,
    )


def preemptible(job: JobRow, config: SchedulerConfig) -> bool:
    """Whether a job may be preempted by a higher class: asked for (``--preemptible``)
    or of a preemptible class."""
    klass = config.klass(job.priority)
    return job.preemptible or (klass is not None and klass.preemptible)


def running_job(job: JobRow, config: SchedulerConfig, now: float) -> policy.Running:
    assert job.id is not None and job.host is not None
    started = job.started_at if job.started_at is not None else now
    # A job on a host that does not answer cannot be signalled: never a victim. Nor is
    # an interactive one (someone is at its terminal), over quota or not.
    reachable = job.state != "unknown" and not job.interactive
    return policy.Running(
        "job",
        job.id,
        job.host,
        tuple(json.loads(job.gpu_uuids)),
        rank=config.rank(job.priority),
        preemptible=reachable and preemptible(job, config),
        over_quota=reachable and job.over_quota,
        started_at=started,
        ends_at=None if job.time_limit_s is None else started + job.time_limit_s,
        stopping=job.state in STOPPING,
        booking=job.booking_id,
    )


def build(
    tx: Rows[J],
    config: SchedulerConfig,
    standing: Standing,
    now: float,
    only: Mapping[str, str] | None = None,
    *,
    jobs: Sequence[J] | None = None,
    free: int = 0,
    hosts: int = 0,
) -> Line[J]:
    """``only`` maps a host to the one user whose jobs may run there. ``jobs``: only
    these queued jobs, and nothing else (no claims, nothing running: a pass on no
    usable GPU that only gives new jobs their reason).

    An array's waiting tasks are alike but for their number, so the line holds only
    its first few (no more than the ``free`` GPUs, and those preemption could free,
    could take, then one for each of ``hosts``, which the rest could each reserve),
    and no more than its ``%N`` leaves room for: a sweep of thousands costs the pass what
    those few cost."""
    only = only or {}
    line: Line[J] = Line()
    holding: Sequence[J] = ()
    if jobs is None:
        holding = tx.jobs(HOLDING)
        held = [
            (len(json.loads(j.gpu_uuids)), j.over_quota or preemptible(j, config))
            for j in holding
            if j.state != "unknown" and j.state not in STOPPING
        ]
        room = array_room(free, held, preemption=config.preemption.enabled)
        queued = _room(tx.queued_line(room, hosts), holding, line)
    else:
        queued = list(jobs)
    afters = [_job_ids(job.after) for job in queued]  # each read once
    deps = {d for after in afters for d in after}
    states = tx.job_states(deps) if deps else {}
    for job, after in zip(queued, afters, strict=True):
        assert job.id is not None
        blocked = dependency_state(after, job.after_ok, states) if after else None
        if blocked is not None and blocked != policy.DEPENDENCY:
            line.broken_deps.append((job, blocked))
            continue
        barred = frozenset(h for h, user in only.items() if user != job.user)
        line.rows["job", job.id] = job
        line.wants.append(job_want(job, config, standing, barred, blocked))
    if jobs is not None:
        return line
    for item in tx.claims(("waiting",)):
        assert item.id is not None
        line.rows["claim", item.id] = item
        line.wants.append(claim_want(item, config, standing))
    for job in holding:
        if job.host is not None and job.gpu_uuids != "[]":
            line.running.append(running_job(job, config, now))
    for item in tx.claims(("active",)):
        assert item.id is not None
        if item.host is None:
            continue
        line.running.append(
            policy.Running(
                "claim",
                item.id,
                item.host,
                tuple(json.loads(item.gpu_uuids)),
                rank=config.rank(config.default_class),
                started_at=item.granted_at or now,
                ends_at=item.expires_at,
            )
        )
    return line


def array_room(free: int, running: Sequence[tuple[int, bool]], *, preemption: bool) -> int:
    """How many GPUs a pass could hand out at most: the free ones, and with preemption
    those of running jobs that may be preempted (``running``: each job's GPU count and
    whether it may be). An array's tasks past what this could take of their shape
    cannot start or preempt in this pass, so the line need not hold them."""
    if not preemption:
        return free
    return free + sum(gpus for gpus, victim in running if victim)


def _room(queued: Sequence[J], holding: Sequence[J], line: Line[J]) -> list[J]:
    """``queued`` less each array's tasks past what its ``%N`` leaves room for; the
    first waiting task of each array noted in ``line``."""
    live: dict[int, int] = {}
    for job in holding:
        if job.array_id is not None:
            live[job.array_id] = live.get(job.array_id, 0) + 1
    kept: list[J] = []
    taken: dict[int, int] = {}
    for job in queued:
        array = job.array_id
        if array is None:
            kept.append(job)
            continue
        count = taken.get(array, 0)
        taken[array] = count + 1
        room = None if job.array_throttle is None else job.array_throttle - live.get(array, 0)
        if count == 0:
            if room is not None and room <= 0:
                line.throttled.append(job)
                continue
            line.arrays[array] = job
            if room is not None:
                line.room[array] = room
        if room is None or count < room:
            kept.append(job)
    return kept


def view(
    line: Line[J],
    slots: tuple[policy.GpuSlot, ...],
    config: SchedulerConfig,
    now: float,
    grace_s: float,
    *,
    bookings: tuple[policy.Booked, ...] = (),
) -> policy.ClusterView:
    return policy.ClusterView(
        gpus=slots,
        waiting=tuple(line.wants),
        running=tuple(line.running),
        now=now,
        off_hours=shares.in_off_hours(now, config.off_hours),
        preemption=config.preemption.enabled,
        min_runtime_s=config.preemption.min_runtime_minutes * 60,
        grace_s=grace_s,
        backfill=config.backfill,
        bookings=bookings,
    )
