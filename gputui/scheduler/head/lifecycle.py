"""The job life cycle on the store: placing work, launches, what hosts report, expiry.

Like ``actions``, each function runs inside one open transaction, in the head's
writer. The daemon sends launches and signals only after the
transaction that decided them is durable, so a crash in between leaves a job
``starting`` with a known launch number, which the next start resolves by asking
the host (``jobs``) instead of launching again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, cast

from gputui.common.arrays import output_path
from gputui.common.i18n import N_
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
from gputui.wire.words import Words, say


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
    conda: str | None = None
    venv: str | None = None
    image: str | None = None
    runtime: str | None = None
    script: str | None = None
    """A submit script's text, copied at submit: the host writes it to the job's
    directory and runs it (argv[0] names it; argv[1:] are its arguments)."""
    output: str | None = None
    """Where the job's output goes on the host (``--output``, its patterns filled in)."""
    pty: bool = False
    """An interactive job: run on a terminal its supervisor keeps."""
    idle_s: float | None = None
    """... ended after this long with no input and no output."""

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
    idle_out: bool = False
    """An interactive job ended at its idle limit."""
    log_path: str | None = None
    error: str | None = None
    container_id: str | None = None


def _notice(tx: Tx, ctx: Context, job: Job, kind: str, text: Words) -> None:
    tx.notice(Notice.of(uid=job.uid, time=ctx.now, kind=kind, text=text, job_id=job.id))


def array_env(job: Job) -> dict[str, str]:
    """An array task's own variables (gputui's, and Slurm's for scripts written for it)."""
    if job.array_id is None or job.array_task is None:
        return {}
    array, task = str(job.array_id), str(job.array_task)
    return {
        "GPUTUI_ARRAY_JOB_ID": array,
        "GPUTUI_ARRAY_TASK_ID": task,
        "SLURM_ARRAY_JOB_ID": array,
        "SLURM_ARRAY_TASK_ID": task,
    }


def launch_for(job: Job, ctx: Context, tx: Tx) -> Launch:
    assert job.id is not None and job.host is not None
    script = None if job.script_id is None else tx.script_text(job.script_id)
    output = None
    if job.output is not None:  # a relative one is the host's to join to the cwd
        output = output_path(job.output, job.id, job.array_id, job.array_task)
    return Launch(
        job_id=job.id,
        launch=job.launches,
        host=job.host,
        user=job.run_as,
        uid=job.uid if job.run_as == job.user else None,
        argv=tuple(json.loads(job.argv)),
        cwd=job.cwd,
        env={**json.loads(job.env), **array_env(job)},
        gpu_uuids=tuple(json.loads(job.gpu_uuids)),
        time_limit_s=job.time_limit_s,
        grace_s=ctx.rules.kill_grace_s,
        conda=job.conda,
        venv=job.venv,
        image=job.image,
        runtime=job.runtime,
        script=script,
        output=output,
        pty=job.interactive,
        idle_s=ctx.rules.interactive_idle_s if job.interactive else None,
    )


def schedule(
    tx: Tx,
    ctx: Context,
    decide: model.Policy,
    logins: Mapping[str, str | None],
    *,
    run_as_login_user: bool = False,
    standing: Standing | None = None,
    bookings: tuple[model.Booked, ...] = (),
) -> list[Launch]:
    """One scheduling pass: place what fits, preempt for what may, record why the
    rest waits, cancel jobs whose ``--after-ok`` dependency failed.

    ``logins`` maps a host to the user the head logs in as there. Root (or not
    known yet): each job runs as its submitter. Anyone else: only that user's jobs
    run there, unless ``run_as_login_user``, when every job runs as that user.
    ``standing``: fair-share factors and quota use (none: everyone equal).
    ``bookings``: those not yet over; a maintenance one's cards are drained while on.
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
    free = sum(1 for s in ctx.slots if s.healthy and not s.drained and s.uuid not in busy)
    nothing_free = usable and not free
    if nothing_free and not (config.preemption.enabled and _victims_exist(tx, config)):
        return []  # the waiting keep their reasons (cheap on a long queue)
    users = {h: u for h, u in logins.items() if u not in (None, "root")}
    barred = {} if run_as_login_user else users
    hosts = len({s.host for s in ctx.slots})
    built = line.build(
        tx, config, standing or Standing(), ctx.now, barred, jobs=only, free=free, hosts=hosts
    )
    for broken, why in built.broken_deps:
        if broken.array_id is not None:  # all its array waits on the same jobs
            for task in tx.array_tasks(broken.array_id, ("queued",)):
                task.state, task.ended_at, task.reason = "cancelled", ctx.now, why[:512]
        broken.state, broken.ended_at, broken.reason = "cancelled", ctx.now, why[:512]
        _notice(
            tx,
            ctx,
            broken,
            "ended",
            say(
                N_("job {id} ({name}) cancelled: {why}"),
                id=broken.id or 0,
                name=broken.name,
                why=why,
            ),
        )
        ctx.changed = True
    for first in built.throttled:
        if first.reason != model.ARRAY_LIMIT and first.array_id is not None:
            tx.set_array_reason(first.array_id, model.ARRAY_LIMIT)
    if not built.wants:
        tx.flush()
        return []
    slots = tuple(s.held(s.uuid in busy) for s in ctx.slots)
    maint = {u for b in bookings if b.maint and b.active(ctx.now) for u in b.uuids}
    if maint:
        slots = tuple(replace(s, drained=True) if s.uuid in maint else s for s in slots)
    view = line.view(built, slots, config, ctx.now, ctx.rules.kill_grace_s, bookings=bookings)
    decisions = decide(view)
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
        if job.over_quota:
            _notice(
                tx,
                ctx,
                job,
                "quota",
                say(
                    N_(
                        "job {id} ({name}) starts over group {group}'s weekly GPU-hour quota:"
                        " it runs on GPUs no one else waits for, and work within its quota"
                        " preempts it"
                    ),
                    id=job.id or 0,
                    name=job.name,
                    group=job.group or "?",
                ),
            )
        job.idle_since, job.idle_told = None, False
        tx.allocate(place.gpu_uuids, place.host, ctx.now, job_id=job.id)
        launches.append(launch_for(job, ctx, tx))
    started: dict[int, int] = {}
    for place in decisions.place:
        array = built.rows[place.kind, place.id].array_id if place.kind == "job" else None
        if array is not None:
            started[array] = started.get(array, 0) + 1
    full = [a for a, n in started.items() if a in built.room and n >= built.room[a]]
    if full:
        tx.flush()  # the tasks placed are no longer queued when the rest are told why
        for array in full:
            tx.set_array_reason(array, model.ARRAY_LIMIT)
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
            array = row.array_id if wait.kind == "job" else None
            if array is not None and built.arrays.get(array) is row:
                # The array's first waiting task: the others, not read, take its reason.
                tx.set_array_reason(array, wait.reason[:512])
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
    said = say(N_("preempted for job {job}"), job=stop.for_id)
    if isinstance(winner, Job):
        said = say(
            N_("preempted for job {job} ({priority}, {user})"),
            job=stop.for_id, priority=winner.priority, user=winner.user,
        )  # fmt: skip
        if victim.over_quota and ctx.rules.sched.rank(winner.priority) >= ctx.rules.sched.rank(
            victim.priority
        ):
            said = say(
                N_(
                    "preempted for job {job} ({priority}, {user}): job {id} ran over its"
                    " group's quota"
                ),
                job=stop.for_id, priority=winner.priority, user=winner.user, id=victim.id or 0,
            )  # fmt: skip
    why = said.english()
    stop_job(victim, ctx, "preempt", "preempting")
    victim.reason = why[:512]
    victim.preempted_by, victim.preempted_at = why[:512], ctx.now  # kept past the requeue
    _notice(
        tx,
        ctx,
        victim,
        "preempted",
        say(
            N_(
                "job {id} ({name}) is being preempted: {why}; it gets SIGTERM, {grace} s, then"
                " SIGKILL, and is requeued"
            ),
            id=victim.id or 0,
            name=victim.name,
            why=said,
            grace=f"{ctx.rules.kill_grace_s:g}",
        ),
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
        _notice(
            tx,
            ctx,
            job,
            "preempted",
            say(
                N_("job {id} ({name}) was preempted; {state}"),
                id=job.id or 0,
                name=job.name,
                state=job.state,
            ),
        )
        ctx.changed = True
        return
    # A run that started and ended while the head did not hear of it (the head was
    # down, or the launch's answer was lost): its start is in the supervisor's state.
    job.started_at = job.started_at or report.started_at
    # How it ended, for the notice: the job's stored reason (English, as it is), in
    # words where the head wrote it (the user's or an admin's own reason stays as it is).
    how: Words | str
    if kind in ("kill", "cancel"):  # as asked: never requeued, never run again
        job.state = END_OF_STOP[kind]
        job.reason = job.reason or job.state
        how = _asked_how(job.reason)
    elif report.state == "lost":
        how = say(N_("its supervisor on the host was lost"))
        job.state, job.reason = "failed", how.english()
    elif report.state == "failed-to-start":
        how = report.error[:512] if report.error else say(N_("failed to start"))
        job.state, job.reason = "failed", how if isinstance(how, str) else how.english()
    elif report.idle_out:
        idle = ctx.rules.interactive_idle_s
        how = say(N_("idle limit reached: no input or output for {span}"), span=_span(idle))
        job.state, job.reason = "timeout", how.english()
    elif report.timed_out:
        how = say(N_("time limit reached"))
        job.state, job.reason = "timeout", how.english()
    elif report.exit_code == 0:
        job.state, job.reason = "completed", ""
        how = ""
    else:
        job.state = "failed"
        how = (
            f"exit code {report.exit_code}"
            if report.exit_code is not None
            else say(N_("killed by {signal}"), signal=f"SIG{report.signal or '?'}")
        )
        job.reason = how if isinstance(how, str) else how.english()
    if job.exit_code is None and isinstance(how, str):
        how = job.reason
    if job.exit_code is not None:
        said = say(
            N_("job {id} ({name}) {state} (exit {code})"),
            id=job.id or 0,
            name=job.name,
            state=job.state,
            code=job.exit_code,
        )
    else:
        said = say(
            N_("job {id} ({name}) {state} ({how})"),
            id=job.id or 0,
            name=job.name,
            state=job.state,
            how=how,
        )
    _notice(tx, ctx, job, "ended", said)
    ctx.changed = True


def _span(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


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
                relaunch.append(launch_for(job, ctx, tx))
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
                job.container_id = report.container_id
                job.reason = ""
                if was == "starting":
                    _notice(
                        tx,
                        ctx,
                        job,
                        "started",
                        say(
                            N_("job {id} ({name}) started on {host}"),
                            id=job.id or 0,
                            name=job.name,
                            host=host,
                        ),
                    )
                ctx.changed = True
            elif job.pid is None and report.pid is not None:
                job.pid = report.pid
            if report.container_id is not None and job.container_id != report.container_id:
                job.container_id = report.container_id  # written a moment after the start
            continue
        if report.log_path:
            job.log_path = report.log_path
        _finish(tx, job, ctx, report)
        forget.append(report.key)
    tx.flush()
    return forget


NOT_LEADING = "not-leading"
"""A host action this head did not send: it no longer holds its lease (``leased_hosts``)."""
UNCONFIRMED = ("offline", "timeout", "unknown", NOT_LEADING)
"""A launch's answers that leave it unconfirmed (not refused by its host)."""


def on_launch_failed(
    tx: Tx, ctx: Context, job_id: int, launch: int, *, code: str, message: str
) -> None:
    """The host refused the launch (or could not be asked): back to the queue, or failed."""
    job = tx.job(job_id)
    if job is None or job.launches != launch:
        return
    if job.state in STOPPING and code not in UNCONFIRMED:
        # Stopped before its launch was answered, and the host refused it: no run
        # exists to report its end, so it ends here, the way its stop says.
        report = HostJob(key=run_key(job_id, launch), state="failed-to-start", error=message)
        _finish(tx, job, ctx, report)
        return
    if job.state != "starting":
        return
    if code in UNCONFIRMED:
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
    tx: Tx,
    ctx: Context,
    active_users: Mapping[str, AbstractSet[int]],
    orphan_sessions: set[str],
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
            if item.warned_at is not None:
                item.warned_at = None  # in use again: its next idle time is told anew
            continue
        _warn_claim(tx, item, ctx.now)
        if item.expires_at is not None and ctx.now >= item.expires_at:
            end_claim(tx, item, ctx, "expired", "its time (--for) ran out")
            _tell(tx, item, ctx.now, N_("claim {id} on {host} expired: its time ran out"))
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
            _tell(
                tx,
                item,
                ctx.now,
                N_("claim {id} on {host} released: idle {minutes} min"),
                minutes=f"{minutes:g}",
            )
    tx.flush()


CLAIM_WARN_S = 600.0
"""A claim's holder is told this long before it is released (for idling, or at the
end of its ``--for``), or a quarter of the span when that is shorter."""


def _warn_claim(tx: Tx, claim: Claim, now: float) -> None:
    """Tell the holder of an idle claim, once, that it is about to be released."""
    if claim.warned_at is not None:
        return
    ends: list[tuple[float, float, str]] = []  # (end, span, what ends then)
    if claim.expires_at is not None:
        span = claim.expires_at - (claim.granted_at or claim.created_at)
        ends.append(
            (
                claim.expires_at,
                span,
                N_(
                    "claim {id} on {host} ends (--for) at {at} (in {left} min): use it, or"
                    " release it"
                ),
            )
        )
    if claim.session is None and claim.idle_release_s > 0:
        idle_end = (claim.last_active_at or claim.granted_at or now) + claim.idle_release_s
        ends.append(
            (
                idle_end,
                claim.idle_release_s,
                N_(
                    "claim {id} on {host} is released for idling at {at} (in {left} min): use"
                    " it, or release it"
                ),
            )
        )
    due = [(end, what) for end, span, what in ends if now >= end - min(CLAIM_WARN_S, span / 4)]
    if not due:
        return
    end, what = min(due)
    claim.warned_at = now
    at = time.strftime("%H:%M", time.localtime(end))
    left = max(0.0, end - now) / 60
    _tell(tx, claim, now, what, at=at, left=f"{left:.0f}")


def _tell(tx: Tx, claim: Claim, now: float, template: str, **args: str) -> None:
    """A notice about ``claim``: ``template`` (marked ``N_``) with its ``{id}``,
    ``{host}`` and ``args``."""
    text = say(template, id=claim.id or 0, host=str(claim.host), **args)
    tx.notice(Notice.of(uid=claim.uid, time=now, kind="claim", claim_id=claim.id, text=text))


_ASKED = {
    "killed by request": (N_("killed by request"), N_("killed by request by {user}")),
    "cancelled by request": (N_("cancelled by request"), N_("cancelled by request by {user}")),
    "preempted by request": (N_("preempted by request"), N_("preempted by request by {user}")),
    "cancelled": (N_("cancelled"), N_("cancelled by {user}")),
}
"""How a job stopped as asked (``actions``' reasons, and ``by`` someone else), as words."""


def _asked_how(reason: str) -> Words | str:
    """A killed or cancelled job's stored reason as the head's words, so the ended
    notice reads in the reader's language; any other reason as it is."""
    for start, (alone, by_whom) in _ASKED.items():
        if reason == start:
            return say(alone)
        if reason.startswith(start + " by "):
            return say(by_whom, user=reason[len(start) + 4 :])
    return reason
