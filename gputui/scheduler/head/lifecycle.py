"""The job life cycle on the store: placing work, launches, what hosts report, expiry.

Like ``actions``, each function runs inside one open transaction, in the head's
writer. The daemon sends launches and signals only after the
transaction that decided them is durable, so a crash in between leaves a job
``starting`` with a known launch number, which the next start resolves by asking
the host (``jobs``) instead of launching again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, cast

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head.actions import (
    STOPPING,
    Context,
    back_in_line,
    run_key,
    split_run_key,
    stop_job,
)
from gputui.scheduler.head.claims import end_claim, grant_claim
from gputui.scheduler.head.transitions import END_OF_STOP
from gputui.scheduler.policy import line, model
from gputui.scheduler.policy.shares import Standing
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Claim, Job, Notice


@dataclass(frozen=True, slots=True)
class Launch:
    """A launch to send once its transaction is committed."""

    job_id: int
    launch: int
    host: str
    user: str | None
    uid: int | None
    """The uid ``user`` must still have on the host (the job's owner's); None when the
    job runs as the head's login user there (``run_as_login_user``)."""
    argv: tuple[str, ...]
    cwd: str | None
    env: Mapping[str, str]
    gpu_uuids: tuple[str, ...]
    time_limit_s: float | None
    grace_s: float

    @property
    def key(self) -> int:
        return run_key(self.job_id, self.launch)


@dataclass(frozen=True, slots=True)
class HostJob:
    """A job's state as its host reported it (the helper's JobState, decoded)."""

    key: int
    state: str
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    timed_out: bool = False
    log_path: str | None = None
    error: str | None = None


def _notice(tx: Tx, ctx: Context, job: Job, kind: str, text: str) -> None:
    tx.notice(Notice(uid=job.uid, time=ctx.now, kind=kind, text=text[:512], job_id=job.id))


def launch_for(job: Job, ctx: Context) -> Launch:
    assert job.id is not None and job.host is not None
    return Launch(
        job_id=job.id,
        launch=job.launches,
        host=job.host,
        user=job.run_as,
        uid=job.uid if job.run_as == job.user else None,
        argv=tuple(json.loads(job.argv)),
        cwd=job.cwd,
        env=dict(json.loads(job.env)),
        gpu_uuids=tuple(json.loads(job.gpu_uuids)),
        time_limit_s=job.time_limit_s,
        grace_s=ctx.rules.kill_grace_s,
    )


def schedule(
    tx: Tx,
    ctx: Context,
    decide: model.Policy,
    logins: Mapping[str, str | None],
    *,
    run_as_login_user: bool = False,
    standing: Standing | None = None,
) -> list[Launch]:
    """One scheduling pass: place what fits, preempt for what may, record why the
    rest waits, cancel jobs whose ``--after-ok`` dependency failed.

    ``logins`` maps a host to the user the head logs in as there. Root (or not
    known yet): each job runs as its submitter. Anyone else: only that user's jobs
    run there, unless ``run_as_login_user``, when every job runs as that user.
    ``standing``: fair-share factors and quota use (none: everyone equal).
    """
    usable = any(s.healthy and not s.drained for s in ctx.slots)
    only: list[Job] | None = None
    transient: dict[int, list[Mapping[str, Any]]] = {}  # stand-in's id -> its kind's rows
    if not usable and not ctx.changed:
        if not ctx.new_jobs:
            return []  # no usable GPU at all: nothing to place, and no query for it
        # Only submissions came: they alone need their reason (Drained, Fenced,
        # HostDown), not a pass over a queue that can start nothing. From their rows
        # as submitted (no query), unless one waits on others (its dependencies may
        # cancel it: that takes the stored row).
        if any(row["after"] != "[]" for row in ctx.new_jobs):
            only = tx.jobs_by_id([row["id"] for row in ctx.new_jobs], ("queued",))
        else:
            # Stand-ins with the row's attributes, all the pass reads of a queued job
            # (an ORM object costs more to build than the pass): one for each kind
            # of job, as here a job's reason depends on its kind alone.
            transient = line.alike(ctx.new_jobs)
            only = [cast("Job", SimpleNamespace(**rows[0])) for rows in transient.values()]
    # (After a change, a pass on no usable GPU still says why each waits.)
    config = ctx.rules.sched
    busy = {a.gpu_uuid for a in tx.live_allocations()} if ctx.slots else set()
    free = (s.healthy and not s.drained and s.uuid not in busy for s in ctx.slots)
    nothing_free = usable and not any(free)
    if nothing_free and not (config.preemption.enabled and _victims_exist(tx, config)):
        return []  # the waiting keep their reasons (cheap on a long queue)
    users = {h: u for h, u in logins.items() if u not in (None, "root")}
    barred = {} if run_as_login_user else users
    built = line.build(tx, config, standing or Standing(), ctx.now, barred, jobs=only)
    for broken, why in built.broken_deps:
        broken.state, broken.ended_at, broken.reason = "cancelled", ctx.now, why[:512]
        _notice(tx, ctx, broken, "ended", f"job {broken.id} ({broken.name}) cancelled: {why}")
        ctx.changed = True
    if not built.wants:
        tx.flush()
        return []
    slots = tuple(s.held(s.uuid in busy) for s in ctx.slots)
    decisions = decide(line.view(built, slots, config, ctx.now, ctx.rules.kill_grace_s))
    if transient and (decisions.place or decisions.preempt):
        # Not reached (no usable GPU to place on or free); rows not stored in this
        # session are never placed: the next full pass decides.
        decisions = replace(decisions, place=(), preempt=())
    launches: list[Launch] = []
    wants = {(w.kind, w.id): w for w in built.wants}
    for place in decisions.place:
        row = built.rows[place.kind, place.id]
        if place.kind == "claim":
            grant_claim(tx, row, place, ctx)
            continue
        job: Job = row
        job.state, job.reason = "starting", ""
        job.host = place.host
        job.gpu_uuids = json.dumps(list(place.gpu_uuids))
        job.launches += 1
        job.started_at = None
        job.run_as = users.get(place.host, job.user) if run_as_login_user else job.user
        job.stop_kind = job.stop_deadline = None
        job.over_quota = wants[place.kind, place.id].over_quota
        job.idle_since, job.idle_told = None, False
        tx.allocate(place.gpu_uuids, place.host, ctx.now, job_id=job.id)
        launches.append(launch_for(job, ctx))
    for stop in decisions.preempt:
        _preempt_for(tx, ctx, stop, built.rows.get((stop.for_kind, stop.for_id)))
    reasons: dict[int, str] = {}
    for wait in decisions.wait:
        if transient:
            for new in transient[wait.id]:
                if new["reason"] != wait.reason:
                    reasons[new["id"]] = wait.reason[:512]
            continue
        row = built.rows[wait.kind, wait.id]
        if row.reason != wait.reason:
            row.reason = wait.reason
    if reasons:
        tx.set_job_reasons(reasons)
    ctx.changed = ctx.changed or bool(decisions.place) or bool(decisions.preempt)
    tx.flush()
    return launches


def _victims_exist(tx: Tx, config: SchedulerConfig) -> bool:
    """Whether any running job could be preempted at all (a few rows: what runs)."""
    for job in tx.jobs(("running", "starting")):
        if job.over_quota or line.preemptible(job, config):
            return True
    return False


def _preempt_for(tx: Tx, ctx: Context, stop: model.Preempt, winner: Job | Claim | None) -> None:
    """Stop a running job for one ahead of it: SIGTERM now, SIGKILL after the grace
    period, then requeued (or held past the requeue limit); its owner is told why."""
    victim = tx.job(stop.id)
    if victim is None or victim.state not in ("running", "starting"):
        return
    why = f"preempted for job {stop.for_id}"
    if isinstance(winner, Job):
        why += f" ({winner.priority}, {winner.user})"
        if victim.over_quota and ctx.rules.sched.rank(winner.priority) >= ctx.rules.sched.rank(
            victim.priority
        ):
            why += f": job {victim.id} ran over its group's quota"
    stop_job(victim, ctx, "preempt", "preempting")
    victim.reason = why[:512]
    victim.preempted_by, victim.preempted_at = why[:512], ctx.now  # kept past the requeue
    _notice(
        tx,
        ctx,
        victim,
        "preempted",
        f"job {victim.id} ({victim.name}) is being preempted: {why}; "
        f"it gets SIGTERM, {ctx.rules.kill_grace_s:g} s, then SIGKILL, and is requeued",
    )


def _finish(tx: Tx, job: Job, ctx: Context, report: HostJob) -> None:
    """A run ended (or was lost): the job's next state, its GPUs freed, its owner told."""
    assert job.id is not None
    tx.free(ctx.now, job_id=job.id)
    job.ended_at = report.ended_at or ctx.now
    job.exit_code = report.exit_code
    job.exit_signal = report.signal
    job.pid = None
    kind, job.stop_kind, job.stop_deadline = job.stop_kind, None, None
    if kind == "preempt":
        job.requeues += 1
        if job.requeues > ctx.rules.requeue_limit:
            why = f"Held: preempted {job.requeues} times (limit {ctx.rules.requeue_limit})"
            back_in_line(job, "held", why)
        else:
            back_in_line(job, "queued", "Priority")
        _notice(tx, ctx, job, "preempted", f"job {job.id} ({job.name}) was preempted; {job.state}")
        ctx.changed = True
        return
    # A run that started and ended while the head did not hear of it (the head was
    # down, or the launch's answer was lost): its start is in the supervisor's state.
    job.started_at = job.started_at or report.started_at
    if kind in ("kill", "cancel"):  # as asked: never requeued, never run again
        job.state = END_OF_STOP[kind]
        job.reason = job.reason or job.state
    elif report.state == "lost":
        job.state, job.reason = "failed", "its supervisor on the host was lost"
    elif report.state == "failed-to-start":
        job.state, job.reason = "failed", (report.error or "failed to start")[:512]
    elif report.timed_out:
        job.state, job.reason = "timeout", "time limit reached"
    elif report.exit_code == 0:
        job.state, job.reason = "completed", ""
    else:
        job.state = "failed"
        job.reason = (
            f"exit code {report.exit_code}"
            if report.exit_code is not None
            else f"killed by SIG{report.signal or '?'}"
        )
    how = f"exit {job.exit_code}" if job.exit_code is not None else job.reason
    _notice(tx, ctx, job, "ended", f"job {job.id} ({job.name}) {job.state} ({how})")
    ctx.changed = True


LIVE = ("starting", "running", "killing", "preempting", "unknown")


def on_report(
    tx: Tx,
    ctx: Context,
    host: str,
    reports: Iterable[HostJob],
    *,
    complete: bool = False,
    in_flight: frozenset[int] = frozenset(),
    relaunch: list[Launch] | None = None,
) -> list[int]:
    """Apply what a host says about its runs; returns run keys the host may forget.

    With ``complete`` (the host's whole list), a job still ``starting`` or
    ``unknown`` there whose run the host has never heard of, and whose launch is
    not in flight, gets its launch sent again into ``relaunch``: the same run key,
    so the host's exclusive state file still makes a second start impossible.
    """
    forget: list[int] = []
    reports = list(reports)
    live = {j.id: j for j in tx.jobs_on(host, LIVE)}
    if complete and relaunch is not None:
        listed = {r.key for r in reports}
        for job in live.values():
            if job.id is None or job.state not in ("starting", "unknown"):
                continue
            key = run_key(job.id, job.launches)
            if key not in listed and key not in in_flight:
                relaunch.append(launch_for(job, ctx))
    for report in reports:
        job_id, launch = split_run_key(report.key)
        found = live.get(job_id)
        if found is None or found.launches != launch:
            job_row = tx.job(job_id)
            if job_row is None or job_row.state not in LIVE or job_row.launches != launch:
                if report.state in ("exited", "lost", "failed-to-start"):
                    forget.append(report.key)
                continue
            found = job_row
        job = found
        if report.state in ("starting", "running"):
            if job.state in ("starting", "unknown"):
                was = job.state
                job.state = "running"
                job.pid = report.pid
                job.started_at = job.started_at or report.started_at or ctx.now
                job.log_path = report.log_path
                job.reason = ""
                if was == "starting":
                    _notice(tx, ctx, job, "started", f"job {job.id} ({job.name}) started on {host}")
                ctx.changed = True
            elif job.pid is None and report.pid is not None:
                job.pid = report.pid
            continue
        if report.log_path:
            job.log_path = report.log_path
        _finish(tx, job, ctx, report)
        forget.append(report.key)
    tx.flush()
    return forget


def on_launch_failed(
    tx: Tx, ctx: Context, job_id: int, launch: int, *, code: str, message: str
) -> None:
    """The host refused the launch (or could not be asked): back to the queue, or failed."""
    job = tx.job(job_id)
    if job is None or job.launches != launch:
        return
    if job.state in STOPPING and code not in ("offline", "timeout", "unknown"):
        # Stopped before its launch was answered, and the host refused it: no run
        # exists to report its end, so it ends here, the way its stop says.
        report = HostJob(key=run_key(job_id, launch), state="failed-to-start", error=message)
        _finish(tx, job, ctx, report)
        return
    if job.state != "starting":
        return
    if code in ("offline", "timeout", "unknown"):
        job.state, job.reason = "unknown", f"launch unconfirmed: {message}"[:512]
        ctx.changed = True
        return
    report = HostJob(key=run_key(job_id, launch), state="failed-to-start", error=message)
    _finish(tx, job, ctx, report)


def on_host_down(tx: Tx, ctx: Context, host: str, why: str) -> None:
    """The host stopped answering: its running jobs are ``unknown`` and keep their GPUs."""
    for job in tx.jobs_on(host, ("running", "starting")):
        job.state, job.reason = "unknown", f"host {host}: {why}"[:512]
        ctx.changed = True
    tx.flush()


def expire_claims(
    tx: Tx, ctx: Context, active_users: Mapping[str, set[int]], orphan_sessions: set[str]
) -> None:
    """Release claims past their maximum time, idle ones, and ``run`` sessions now gone.

    ``active_users`` maps a GPU uuid to the uids with a process on it now.
    """
    for item in tx.claims(("active", "waiting")):
        uuids = json.loads(item.gpu_uuids)
        busy = any(item.uid in active_users.get(u, ()) for u in uuids)
        if item.session is not None and item.session in orphan_sessions:
            if item.state == "active" and busy:
                # Its gputui run is gone, but a process of its owner still holds the
                # GPUs (one that outlived it): they stay claimed until it is gone too.
                item.session, item.idle_release_s, item.last_active_at = None, 0, ctx.now
                continue
            end_claim(tx, item, ctx, "released", "its gputui run session ended")
            continue
        if item.state != "active":
            continue
        if busy:
            item.last_active_at = ctx.now
            continue
        if item.expires_at is not None and ctx.now >= item.expires_at:
            end_claim(tx, item, ctx, "expired", "its time (--for) ran out")
            _tell(tx, item, ctx.now, "expired: its time ran out")
            continue
        if item.session is not None:
            continue  # a run session is released when it ends, not when idle
        idle_since = item.last_active_at or item.granted_at or ctx.now
        if item.idle_release_s == 0:  # a run session's leftover (above): now it is gone
            end_claim(tx, item, ctx, "released", "its gputui run ended; its last process too")
            continue
        if ctx.now - idle_since >= item.idle_release_s:
            minutes = item.idle_release_s / 60
            end_claim(
                tx, item, ctx, "expired", f"idle for {minutes:g} min with no process of yours"
            )
            _tell(tx, item, ctx.now, f"released: idle {minutes:g} min")
    tx.flush()


def _tell(tx: Tx, claim: Claim, now: float, what: str) -> None:
    text = f"claim {claim.id} on {claim.host} {what}"
    tx.notice(Notice(uid=claim.uid, time=now, kind="claim", claim_id=claim.id, text=text))
