"""What each request does to the store, checked against who asks.

Every function here runs inside one open transaction (``Tx``), in the head's
writer, and either returns the result body or raises ``Refusal`` (the
savepoint around it then undoes everything it did). An admin acting on someone
else's job or claim must give a reason, and the ``Audit`` row is written in the
same transaction as the change, so neither exists without the other.

This module holds the job requests and what every request shares (``Rules``,
``Context``, ``authorize``, ``check_feasible``, paging); the claim requests are in
``claims``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gputui.common.arrays import parse_array
from gputui.common.i18n import N_
from gputui.common.jobenv import DEFAULT_RUNTIME, Runtime
from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import privacy, transitions
from gputui.scheduler.head.views import audit_view, job_row_view, job_view
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy.line import preemptible
from gputui.scheduler.policy.lookup import no_host_words
from gputui.scheduler.policy.naming import job_name
from gputui.scheduler.server.op_args import JobArgs, SubmitArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.read_args import ListArgs
from gputui.scheduler.server.wire import (
    FINAL_JOB_STATES,
    LIVE_JOB_STATES,
    PENDING_JOB_STATES,
    Refusal,
)
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit, Claim, Job, Notice, owned_by
from gputui.wire.words import Words, fields_of, say


@dataclass(frozen=True, slots=True)
class Rules:
    """The head's settings that actions need (from hosts.yaml's ``head:`` section)."""

    claim_idle_s: float = 1800.0
    requeue_limit: int = 3
    kill_grace_s: float = 10.0
    runtime: Runtime = DEFAULT_RUNTIME
    """The container runtime of a job that names an image but no runtime (``jobs.runtime``)."""
    sched: SchedulerConfig = field(default_factory=SchedulerConfig)
    """hosts.yaml's ``scheduler:`` section: classes, fair share, quotas, accounting."""
    interactive_time_s: float = 8 * 3600.0
    """An interactive job's time limit, at most (``jobs.interactive_time``)."""
    interactive_idle_s: float = 3600.0
    """An interactive job with no input or output this long ends (``jobs.interactive_idle``)."""

    @property
    def priorities(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.sched.classes)


@dataclass(slots=True)
class Context:
    """What the daemon knows beyond the store: the cluster's shape and live health."""

    now: float
    slots: Sequence[policy.GpuSlot]
    unknown_hosts: frozenset[str] = frozenset()
    """Configured hosts whose GPUs the head has not seen yet (placement can't judge them)."""
    pools: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()
    rules: Rules = field(default_factory=Rules)
    stops: list[tuple[str, int]] = field(default_factory=list)
    """(host, run key) pairs to send SIGTERM once the transaction is durable."""
    changed: bool = False
    bookings_moved: bool = False
    """A booking was made, started or ended, or the claim a booking made ended: the
    bookings are read again (``bookings.tick``) before the next pass."""
    new_jobs: list[dict[str, Any]] = field(default_factory=list)
    """The rows (with ids) of the jobs submitted in this batch (a submission alone
    does not set ``changed``: it
    changes no other request's standing, so a pass that can start nothing need only
    give these their reason)."""
    judged: dict[tuple[int, str | None, str | None, str | None], str | Words | None] = field(
        default_factory=dict
    )
    """(GPUs, pool, host) of a submission -> why no host could ever run it (None: some
    could): ``check_feasible``'s verdict, worked out once a batch for each."""
    groups: dict[tuple[str, frozenset[str], str], str] = field(default_factory=dict)
    """(user, Unix groups, primary group) -> accounting group (``group_of``), worked out
    once a batch for each caller."""


RUNS_PER_JOB = 1000
"""A job's run on a host is keyed by ``job id * 1000 + launch number``: a requeued job
gets a fresh, exclusively created state file, and a retried launch never a second."""


def run_key(job_id: int, launch: int) -> int:
    return job_id * RUNS_PER_JOB + launch


def split_run_key(key: int) -> tuple[int, int]:
    return divmod(key, RUNS_PER_JOB)


def _ref(kind: str, item_id: int | None) -> str:
    return f"{kind} {item_id}"


SELF_AUDITED = frozenset({"cancel", "kill", "preempt", "requeue"})
"""The acts on a job that stop or rerun work: audited whoever does them, its owner
too (an admin's act on another's work is audited whatever it is)."""


def authorize(
    tx: Tx,
    caller: Caller,
    ctx: Context,
    action: str,
    *,
    kind: str,
    item: Job | Claim,
    reason: str | None,
) -> Audit | None:
    """Owner, or an admin with a reason; anyone else is refused. The audit row, for
    an admin acting on another's work and for an owner's own destructive act
    (``SELF_AUDITED``): its ``outcome`` is the caller's to fill in."""
    target = _ref(kind, item.id)
    if caller.owns(item.uid):
        if action not in SELF_AUDITED:
            return None
        words = " ".join((reason or "").split())
        return audited(tx, ctx, caller, action, target=target, owner=item.user, reason=words)
    if not caller.admin:
        raise Refusal(
            "denied",
            say(
                N_("job {id} belongs to {user}; only they or an admin may {action} it")
                if kind == "job"
                else N_("claim {id} belongs to {user}; only they or an admin may {action} it"),
                id=item.id or 0,
                user=item.user,
                action=action,
            ),
        )
    if not reason or not reason.strip():
        raise Refusal(
            "reason-required",
            say(
                N_("job {id} belongs to {user}: an admin must give --reason to {action} it")
                if kind == "job"
                else N_("claim {id} belongs to {user}: an admin must give --reason to {action} it"),
                id=item.id or 0,
                user=item.user,
                action=action,
            ),
        )
    row = audited(tx, ctx, caller, action, target=target, owner=item.user, reason=reason.strip())
    ids = {"job_id": item.id} if kind == "job" else {"claim_id": item.id}
    text = say(
        N_("job {id}: {action} by {admin} (admin): {reason}")
        if kind == "job"
        else N_("claim {id}: {action} by {admin} (admin): {reason}"),
        id=item.id or 0,
        action=action,
        admin=caller.user,
        reason=" ".join(reason.split()),
    )
    notice(tx, ctx, item.uid, "admin", text, **ids)
    return row


def audited(
    tx: Tx, ctx: Context, caller: Caller, action: str, *, target: str, owner: str, reason: str
) -> Audit:
    """The audit row of ``caller``'s ``action`` on ``owner``'s ``target``, written in
    this transaction (its ``outcome`` is the caller's to fill in)."""
    row = Audit(
        time=ctx.now,
        uid=caller.uid,
        user=caller.user,
        action=action,
        target=target,
        owner=owner,
        reason=reason[:512],
    )
    tx.audit(row)
    return row


def notice(tx: Tx, ctx: Context, uid: int, kind: str, text: str | Words, **ids: int | None) -> None:
    """A notice to user ``uid``, written in this transaction (text cut to 512): a line,
    or the ``Words`` it is made from (kept with it, for the user's own language)."""
    tx.notice(Notice.of(uid=uid, time=ctx.now, kind=kind, text=text, **ids))


def _job(tx: Tx, job_id: int) -> Job:
    job = tx.job(job_id)
    if job is None:
        raise Refusal("unknown-job", say(N_("no job {job}"), job=job_id))
    return job


def new_want(kind: str, item_id: int, gpus: int, **kw: Any) -> policy.Want:
    """A request as placement sees it (``check_feasible``, ``place_now``)."""
    return policy.Want(kind=kind, id=item_id, gpus=gpus, **kw)


def check_feasible(want: policy.Want, ctx: Context) -> None:
    """Refuse what no host could ever satisfy (judged on hosts whose GPUs are known)."""
    if want.pool is not None and want.pool not in ctx.pools:
        raise Refusal("impossible", policy.no_pool_words(want.pool, sorted(ctx.pools)))
    if want.host is not None and want.host not in ctx.hosts:
        raise Refusal("impossible", no_host_words(want.host, ctx.hosts))
    if want.host is not None and want.host in ctx.unknown_hosts:
        return
    if want.host is None and ctx.unknown_hosts:
        return  # a host not yet seen might fit it: let it wait rather than refuse
    if policy.impossible(want, ctx.slots) is not None:  # the words, only for a refusal
        raise Refusal("impossible", policy.impossible_words(want, ctx.slots) or "")


def _check_job_feasible(args: SubmitArgs, ctx: Context) -> None:
    """``check_feasible`` for a submission; a burst of alike ones is judged once."""
    key = (args.gpus, args.pool, args.host, args.mig)
    if key not in ctx.judged:
        try:
            want = new_want("job", 0, args.gpus, pool=args.pool, host=args.host, mig=args.mig)
            check_feasible(want, ctx)
        except Refusal as refusal:
            ctx.judged[key] = refusal.words or refusal.message
        else:
            ctx.judged[key] = None
    why = ctx.judged[key]
    if why is not None:
        raise Refusal("impossible", why)


def _check_container_vendor(args: SubmitArgs, ctx: Context) -> None:
    """``--image`` on a pool of AMD cards is refused now, in one line: Docker and Podman
    are given GPUs NVIDIA's way (``--gpus``, ``nvidia.com/gpu=``), Apptainer with
    ``--nvccli``, and passing AMD's ``/dev/kfd`` and ``/dev/dri`` whole would show every
    card of the host to the job (README: "Containers on AMD cards")."""
    if args.image is None or args.pool is None:
        return
    if any(s.pool == args.pool and s.vendor != policy.DEFAULT_VENDOR for s in ctx.slots):
        raise Refusal(
            "bad-args",
            say(
                N_(
                    "submit: --image: pool {pool} has AMD cards, and gputui runs containers"
                    " on NVIDIA cards only; run it without --image (on the host, or with"
                    " --conda or --venv)"
                ),
                pool=args.pool,
            ),
        )


# -- jobs ---------------------------------------------------------------------------


def submit_row(
    caller: Caller, args: SubmitArgs, ctx: Context, tx: Tx | None = None
) -> dict[str, Any]:
    """A submission checked and turned into a ``job`` row (no database work but for
    ``--after``'s check: the daemon inserts a batch's rows in one statement)."""
    config = ctx.rules.sched
    name = args.priority or config.default_class
    klass = config.klass(name)
    if klass is None:
        shown = ", ".join(ctx.rules.priorities)
        raise Refusal(
            "bad-args",
            say(
                N_("submit: unknown priority {name} (classes: {classes})"),
                name=repr(name),
                classes=shown,
            ),
        )
    who = (caller.user, caller.groups, caller.group)
    group = ctx.groups.get(who)
    if group is None:
        group = ctx.groups[who] = config.group_of(*who)
    if (
        klass.groups is not None
        and not caller.admin
        and not (set(klass.groups) & (caller.groups | {group}))
    ):
        raise Refusal(
            "denied",
            say(
                N_("submit: priority {name} is for the groups {groups} only"),
                name=name,
                groups=", ".join(klass.groups),
            ),
        )
    limit = args.time_limit_s
    if limit is None and klass.time_default_hours is not None:
        limit = klass.time_default_hours * 3600
    if klass.time_max_hours is not None:
        if limit is None:
            limit = klass.time_max_hours * 3600
        elif limit > klass.time_max_hours * 3600:
            raise Refusal(
                "bad-args",
                say(
                    N_("submit: --time is over priority {name}'s maximum ({hours} h)"),
                    name=name,
                    hours=f"{klass.time_max_hours:g}",
                ),
            )
    if args.pty:  # a session at a terminal: never longer than the interactive limit
        most = ctx.rules.interactive_time_s
        limit = most if limit is None else min(limit, most)
    if args.after:
        if tx is None:
            raise Refusal("bad-args", say(N_("submit: --after needs the store")))  # not reached
        known = tx.job_states(args.after)
        missing = [j for j in args.after if j not in known]
        if missing:
            flag = "--after-ok" if args.after_ok else "--after"  # the flag the user gave
            raise Refusal(
                "unknown-job", say(N_("submit: {flag}: no job {job}"), flag=flag, job=missing[0])
            )
    if args.booking is not None:
        _check_booking(tx, caller, args.booking)
    _check_container_vendor(args, ctx)
    _check_job_feasible(args, ctx)
    return {
        "uid": caller.uid,
        "user": caller.user,
        "group": group,
        "name": args.name or job_name(args.argv),
        "argv": orjson.dumps(args.argv).decode(),
        "cwd": args.cwd,
        "env": orjson.dumps(args.env).decode(),
        "gpus": args.gpus,
        "pool": args.pool,
        "host_constraint": args.host,
        "priority": name,
        "preemptible": args.preemptible and not args.pty,  # a person waits at it
        "time_limit_s": limit,
        "submitted_at": ctx.now,
        "state": "queued",
        "reason": "Resources",
        "requeues": 0,
        "launches": 0,
        "gpu_uuids": "[]",
        "project": args.project,
        "after": orjson.dumps(sorted(set(args.after))).decode() if args.after else "[]",
        "after_ok": args.after_ok,
        "conda": args.conda,
        "venv": args.venv,
        "image": args.image,
        "runtime": (args.runtime or ctx.rules.runtime) if args.image else None,
        "output": args.output,
        "array_id": None,
        "array_throttle": None,
        "booking_id": args.booking,
        "mig": args.mig,
        "interactive": args.pty,
    }


def task_rows(tx: Tx, row: dict[str, Any], args: SubmitArgs, now: float) -> list[dict[str, Any]]:
    """A checked submission's rows: its own, or one per task of its ``--array`` (each
    task a row, linked by ``Tx.link_array`` once inserted); its script kept once."""
    if args.script is not None:
        row = {**row, "script_id": tx.add_script(args.script, now)}
    if args.array is None:
        return [row]
    spec = parse_array(args.array)
    return [{**row, "array_task": t, "array_throttle": spec.throttle} for t in spec.tasks]


def insert_submissions(tx: Tx, submissions: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Insert the rows of several submissions in one statement; each submission's
    first row as stored (with its id), an array's with ``array_id`` and its size."""
    ids = tx.insert_jobs([row for rows in submissions for row in rows])
    firsts: list[dict[str, Any]] = []
    at = 0
    for rows in submissions:
        mine = ids[at : at + len(rows)]
        at += len(rows)
        if rows[0].get("array_task") is not None:
            tx.link_array(mine)
            for row, job_id in zip(rows, mine, strict=True):
                row["id"], row["array_id"] = job_id, mine[0]
        else:
            rows[0]["id"] = mine[0]
        firsts.append({**rows[0], "array_size": len(rows)})
    return firsts


def submitted(first: dict[str, Any]) -> dict[str, Any]:
    """The answer to a submission: its job (an array's first task) and, for an
    array, its id and size."""
    body: dict[str, Any] = {"job": job_row_view(first)}
    if first.get("array_id") is not None:
        body["array"] = {"id": first["array_id"], "tasks": first["array_size"]}
    return body


def _check_booking(tx: Tx | None, caller: Caller, booking_id: int) -> None:
    """``--booking ID``: a booking of the caller's (an admin's: anyone's) not yet over."""
    item = tx.booking(booking_id) if tx is not None else None
    if item is None or item.state not in ("booked", "active"):
        raise Refusal(
            "unknown-booking",
            say(N_("submit: --booking: no booking {booking} booked or on"), booking=booking_id),
        )
    if not caller.owns(item.uid) and not caller.admin:
        raise Refusal(
            "denied",
            say(
                N_("submit: --booking: booking {booking} belongs to {user}"),
                booking=booking_id,
                user=item.user,
            ),
        )


def submit(tx: Tx, caller: Caller, args: SubmitArgs, ctx: Context) -> dict[str, Any]:
    """One submission (the daemon batches ``submit_row``s; this is the same for one)."""
    rows = task_rows(tx, submit_row(caller, args, ctx, tx), args, ctx.now)
    (first,) = insert_submissions(tx, [rows])
    ctx.new_jobs.extend(rows)
    return submitted(first)


def stop_job(job: Job, ctx: Context, kind: str, state: str) -> None:
    """SIGTERM now (after the commit), SIGKILL at ``stop_deadline``."""
    job.state = state
    job.stop_kind = kind
    job.stop_deadline = ctx.now + ctx.rules.kill_grace_s
    job.reason = _STOP_REASONS.get(kind, kind)
    if job.host is not None and job.id is not None:
        ctx.stops.append((job.host, run_key(job.id, job.launches)))


JobAction = Callable[[Tx, Caller, JobArgs, Context], dict[str, Any]]


def _on_job(action: str) -> JobAction:
    """A request on one job: found, authorized (audited when an admin acts for its
    owner), then changed as ``transitions`` says for its state, or refused there."""

    def run(tx: Tx, caller: Caller, args: JobArgs, ctx: Context) -> dict[str, Any]:
        if args.task is not None:
            found = tx.array_task(args.job_id, args.task)
            if found is None:
                raise Refusal(
                    "unknown-job", say(N_("no job {job}_{task}"), job=args.job_id, task=args.task)
                )
            job = found
        else:
            job = _job(tx, args.job_id)
            if action == "cancel" and job.array_id == job.id:
                return _cancel_array(tx, caller, args, ctx, job)
        row = authorize(tx, caller, ctx, action, kind="job", item=job, reason=args.reason)
        op = action.replace("-", "_")
        told = change_job(job, caller, ctx, op, force=getattr(args, "force", False))
        if row is not None:  # a refusal above undoes the row with the rest
            row.outcome = told.english()[:256]
        ctx.changed = True
        tx.flush()
        return {"job": job_view(job), **told_fields(told)}

    return run


def _cancel_array(
    tx: Tx, caller: Caller, args: JobArgs, ctx: Context, first: Job
) -> dict[str, Any]:
    """``cancel ARRAY``: every task of the array not ended yet (waiting ones at once,
    running ones SIGTERM then SIGKILL), as one request, audited once."""
    row = authorize(tx, caller, ctx, "cancel", kind="job", item=first, reason=args.reason)
    assert first.array_id is not None
    tasks = tx.array_tasks(first.array_id, PENDING_JOB_STATES | LIVE_JOB_STATES)
    stopping = 0
    for task in tasks:
        if task.state in STOPPING and task.stop_kind == "cancel":
            continue
        try:
            change_job(task, caller, ctx, "cancel")
        except Refusal:
            continue  # a state cancel does not apply to (it ends as it was told)
        stopping += task.state in STOPPING
    if stopping:
        told = say(
            N_(
                "{count} task(s) of array {array} cancelled ({stopping} running:"
                " SIGTERM now, SIGKILL after the grace period)"
            ),
            count=len(tasks),
            array=first.array_id,
            stopping=stopping,
        )
    else:
        told = say(
            N_("{count} task(s) of array {array} cancelled"), count=len(tasks), array=first.array_id
        )
    if row is not None:
        row.outcome = told.english()[:256]
    ctx.changed = True
    tx.flush()
    return {"job": job_view(first), **told_fields(told)}


def told_fields(told: Words) -> dict[str, Any]:
    """An answer's ``told`` (the English line: what old clients and ``--json`` show)
    and ``told_words`` (its template and args: what a client shows in its language)."""
    return {"told": told.english(), "told_words": told.wire()}


def back_in_line(job: Job, state: str, reason: str) -> None:
    """A job back in line (requeued, or held past the requeue limit): its last run's
    host, GPUs, times, exit and quota standing are cleared, so nothing shows it as
    placed (each run's host, GPUs and times stay in its allocations: ``show``)."""
    job.state, job.reason = state, reason
    job.host, job.gpu_uuids, job.pid = None, "[]", None
    job.started_at = job.ended_at = None
    job.exit_code = job.exit_signal = None
    job.over_quota, job.idle_since, job.idle_told = False, None, False


def change_job(
    job: Job, caller: Caller, ctx: Context, action: str, *, force: bool = False
) -> Words:
    """Apply ``action`` to ``job`` as ``transitions.TABLE`` says, or raise its
    ``Refusal``; returns what happens next, in words."""
    step = transitions.step(action, job.state, job.stop_kind)
    fill: dict[str, str | int] = {"id": job.id or 0, "state": job.state, "user": job.user}
    if step.state is None:
        raise Refusal("bad-state", say(step.refuse, **fill))
    if step.force and not force:
        raise Refusal("force-required", say(step.refuse, **fill))
    by = "" if caller.owns(job.uid) else f" by {caller.user}"
    if step.stop is not None and job.state in STOPPING:
        # Already signalled: the signals go on as they were; only how it ends changes.
        job.state, job.stop_kind = step.state, step.stop
        job.reason = _STOP_REASONS[step.stop] + by
    elif step.stop is not None:
        stop_job(job, ctx, step.stop, step.state)
        job.reason = _STOP_REASONS[step.stop] + by
    elif step.state == "cancelled":
        job.state, job.ended_at, job.reason = "cancelled", ctx.now, "cancelled" + by
    elif step.state == "queued" and job.state in FINAL_JOB_STATES:
        back_in_line(job, "queued", "Priority")
        job.requeues += 1
    else:
        job.state, job.reason = step.state, {"held": "Held"}.get(step.state, "Priority")
    wanted = fields_of(step.told) or set()
    return say(step.told, **{k: v for k, v in fill.items() if k in wanted})


STOPPING = ("killing", "preempting")
"""The states of a job whose run has been told to stop."""
_STOP_REASONS = {
    "kill": "killed by request",
    "cancel": "cancelled by request",
    "preempt": "preempted by request",
}


cancel = _on_job("cancel")
kill = _on_job("kill")
preempt = _on_job("preempt")
requeue = _on_job("requeue")
hold = _on_job("hold")
release_hold = _on_job("release-hold")


def show(
    tx: Tx,
    caller: Caller,
    job_id: int,
    config: SchedulerConfig | None = None,
    *,
    private: bool = False,
) -> dict[str, Any]:
    """One job, all of it; ``config``: its class's rules (``preemptible`` is then the
    job's own or its class's, as the scheduler judges it); ``private``
    (``scheduler.private_data``): its command line, working directory and log path
    only for its owner and admins."""
    job = _job(tx, job_id)
    allocations = [
        {"gpu_uuid": a.gpu_uuid, "host": a.host, "from": a.start_at, "to": a.end_at}
        for a in tx.allocations_of(job_id=job_id)
    ]
    view = privacy.hide_job(job_view(job, full=True), caller, job.uid, private)
    if config is not None:
        view["preemptible"] = preemptible(job, config)
    return {"job": view, "allocations": allocations}


def queue(tx: Tx, caller: Caller, args: ListArgs) -> dict[str, Any]:
    """A page of jobs, oldest first (the front of the line first); ``next``: the
    ``after`` of the next page, None when this is the last."""
    states = None if args.all else PENDING_JOB_STATES | LIVE_JOB_STATES
    jobs = tx.jobs(states, user=args.user, limit=args.limit + 1, after=args.after)
    page = jobs[: args.limit]
    return {"jobs": [job_view(j) for j in page], "next": next_after(page, len(jobs))}


def next_after(page: Sequence[Job] | Sequence[Claim], found: int) -> int | None:
    """A page's ``next``: the ``after`` of the next page (``found``: rows read, one
    more than the page asked for when there are more), None when this is the last."""
    return page[-1].id if found > len(page) and page else None


def audit_rows(tx: Tx, caller: Caller, since: float | None, limit: int) -> dict[str, Any]:
    rows = tx.audits(since, limit)
    if not caller.admin:
        rows = [r for r in rows if r.uid == caller.uid or owned_by(r.owner, caller.user)]
    return {"rows": [audit_view(r) for r in rows]}
