"""What each request does to the store, checked against who asks.

Every function here runs inside one open transaction (``Tx``), in the head's
writer, and either returns the result body or raises ``Refusal`` (the
savepoint around it then undoes everything it did). An admin acting on someone
else's job or claim must give a reason, and the ``Audit`` row is written in the
same transaction as the change, so neither exists without the other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import privacy, transitions
from gputui.scheduler.head.views import audit_view, claim_view, job_row_view, job_view
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy.line import preemptible
from gputui.scheduler.policy.lookup import no_host
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import (
    FINAL_JOB_STATES,
    LIVE_JOB_STATES,
    PENDING_JOB_STATES,
    ClaimArgs,
    JobArgs,
    ListArgs,
    Refusal,
    ReleaseArgs,
    SubmitArgs,
)
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit, Claim, Job, Notice, owned_by


@dataclass(frozen=True, slots=True)
class Rules:
    """The head's settings that actions need (from hosts.yaml's ``head:`` section)."""

    claim_idle_s: float = 1800.0
    requeue_limit: int = 3
    kill_grace_s: float = 10.0
    sched: SchedulerConfig = field(default_factory=SchedulerConfig)
    """hosts.yaml's ``scheduler:`` section: classes, fair share, quotas, accounting."""

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
    new_jobs: list[dict[str, Any]] = field(default_factory=list)
    """The rows (with ids) of the jobs submitted in this batch (a submission alone
    does not set ``changed``: it
    changes no other request's standing, so a pass that can start nothing need only
    give these their reason)."""
    judged: dict[tuple[int, str | None, str | None], str | None] = field(default_factory=dict)
    """(GPUs, pool, host) of a submission -> why no host could ever run it (None: some
    could): ``check_feasible``'s verdict, worked out once a batch for each."""


RUNS_PER_JOB = 1000
"""A job's run on a host is keyed by ``job id * 1000 + launch number``: a requeued job
gets a fresh, exclusively created state file, and a retried launch never a second."""


def run_key(job_id: int, launch: int) -> int:
    return job_id * RUNS_PER_JOB + launch


def split_run_key(key: int) -> tuple[int, int]:
    return divmod(key, RUNS_PER_JOB)


def _ref(kind: str, item_id: int | None) -> str:
    return f"{kind} {item_id}"


def _authorize(
    tx: Tx,
    caller: Caller,
    ctx: Context,
    action: str,
    *,
    kind: str,
    item: Job | Claim,
    reason: str | None,
) -> None:
    """Owner, or an admin with a reason (audited); anyone else is refused."""
    if caller.owns(item.uid):
        return
    target = _ref(kind, item.id)
    if not caller.admin:
        raise Refusal(
            "denied", f"{target} belongs to {item.user}; only they or an admin may {action} it"
        )
    if not reason or not reason.strip():
        raise Refusal(
            "reason-required",
            f"{target} belongs to {item.user}: an admin must give --reason to {action} it",
        )
    tx.audit(
        Audit(
            time=ctx.now,
            uid=caller.uid,
            user=caller.user,
            action=action,
            target=target,
            owner=item.user,
            reason=reason.strip(),
        )
    )
    ids = {"job_id": item.id} if kind == "job" else {"claim_id": item.id}
    text = f"{target}: {action} by {caller.user} (admin): {' '.join(reason.split())}"
    _notice(tx, ctx, item.uid, "admin", text, **ids)


def _notice(tx: Tx, ctx: Context, uid: int, kind: str, text: str, **ids: int | None) -> None:
    tx.notice(Notice(uid=uid, time=ctx.now, kind=kind, text=text[:512], **ids))


def _job(tx: Tx, job_id: int) -> Job:
    job = tx.job(job_id)
    if job is None:
        raise Refusal("unknown-job", f"no job {job_id}")
    return job


def _want(kind: str, item_id: int, gpus: int, **kw: Any) -> policy.Want:
    return policy.Want(kind=kind, id=item_id, gpus=gpus, **kw)


def check_feasible(want: policy.Want, ctx: Context) -> None:
    """Refuse what no host could ever satisfy (judged on hosts whose GPUs are known)."""
    if want.pool is not None and want.pool not in ctx.pools:
        shown = ", ".join(sorted(ctx.pools)[:8]) or "none"
        raise Refusal("impossible", f"no pool named {want.pool!r} (pools: {shown})")
    if want.host is not None and want.host not in ctx.hosts:
        raise Refusal("impossible", no_host(want.host, ctx.hosts))
    if want.host is not None and want.host in ctx.unknown_hosts:
        return
    if want.host is None and ctx.unknown_hosts:
        return  # a host not yet seen might fit it: let it wait rather than refuse
    why = policy.impossible(want, ctx.slots)
    if why is not None:
        raise Refusal("impossible", why)


def _check_job_feasible(args: SubmitArgs, ctx: Context) -> None:
    """``check_feasible`` for a submission; a burst of alike ones is judged once."""
    key = (args.gpus, args.pool, args.host)
    if key not in ctx.judged:
        try:
            check_feasible(_want("job", 0, args.gpus, pool=args.pool, host=args.host), ctx)
        except Refusal as refusal:
            ctx.judged[key] = refusal.message
        else:
            ctx.judged[key] = None
    why = ctx.judged[key]
    if why is not None:
        raise Refusal("impossible", why)


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
        raise Refusal("bad-args", f"submit: unknown priority {name!r} (classes: {shown})")
    group = config.group_of(caller.user, caller.groups, caller.group)
    if (
        klass.groups is not None
        and not caller.admin
        and not (set(klass.groups) & (caller.groups | {group}))
    ):
        raise Refusal(
            "denied",
            f"submit: priority {name} is for the groups {', '.join(klass.groups)} only",
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
                f"submit: --time is over priority {name}'s maximum ({klass.time_max_hours:g} h)",
            )
    if args.after:
        if tx is None:
            raise Refusal("bad-args", "submit: --after needs the store")  # not reached
        known = tx.job_states(args.after)
        missing = [j for j in args.after if j not in known]
        if missing:
            flag = "--after-ok" if args.after_ok else "--after"  # the flag the user gave
            raise Refusal("unknown-job", f"submit: {flag}: no job {missing[0]}")
    _check_job_feasible(args, ctx)
    return {
        "uid": caller.uid,
        "user": caller.user,
        "group": group,
        "name": args.name or args.argv[0].rsplit("/", 1)[-1][:128],
        "argv": orjson.dumps(args.argv).decode(),
        "cwd": args.cwd,
        "env": orjson.dumps(args.env).decode(),
        "gpus": args.gpus,
        "pool": args.pool,
        "host_constraint": args.host,
        "priority": name,
        "preemptible": args.preemptible,
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
    }


def submit(tx: Tx, caller: Caller, args: SubmitArgs, ctx: Context) -> dict[str, Any]:
    """One submission (the daemon batches ``submit_row``s; this is the same for one)."""
    row = submit_row(caller, args, ctx, tx)
    (job_id,) = tx.insert_jobs([row])
    ctx.new_jobs.append({**row, "id": job_id})
    return {"job": job_row_view({**row, "id": job_id})}


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
        job = _job(tx, args.job_id)
        _authorize(tx, caller, ctx, action, kind="job", item=job, reason=args.reason)
        op = action.replace("-", "_")
        told = change_job(job, caller, ctx, op, force=getattr(args, "force", False))
        ctx.changed = True
        tx.flush()
        return {"job": job_view(job), "told": told}

    return run


def back_in_line(job: Job, state: str, reason: str) -> None:
    """A job back in line (requeued, or held past the requeue limit): its last run's
    host, GPUs, times, exit and quota standing are cleared, so nothing shows it as
    placed (each run's host, GPUs and times stay in its allocations: ``show``)."""
    job.state, job.reason = state, reason
    job.host, job.gpu_uuids, job.pid = None, "[]", None
    job.started_at = job.ended_at = None
    job.exit_code = job.exit_signal = None
    job.over_quota, job.idle_since, job.idle_told = False, None, False


def change_job(job: Job, caller: Caller, ctx: Context, action: str, *, force: bool = False) -> str:
    """Apply ``action`` to ``job`` as ``transitions.TABLE`` says, or raise its
    ``Refusal``; returns what happens next, in words."""
    step = transitions.step(action, job.state, job.stop_kind)
    fill = {"id": job.id, "state": job.state, "user": job.user}
    if step.state is None:
        raise Refusal("bad-state", step.refuse.format(**fill))
    if step.force and not force:
        raise Refusal("force-required", step.refuse.format(**fill))
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
    return step.told.format(**fill)


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
    return {"jobs": [job_view(j) for j in page], "next": _next(page, len(jobs))}


def _next(page: Sequence[Job] | Sequence[Claim], found: int) -> int | None:
    return page[-1].id if found > len(page) and page else None


# -- claims -------------------------------------------------------------------------


def resolve_refs(refs: Sequence[str], slots: Sequence[policy.GpuSlot]) -> tuple[str, ...]:
    """GPU references (uuid, ``host:index``) -> uuids, refusing one that names nothing."""
    by_uuid = {s.uuid.lower(): s.uuid for s in slots}
    by_place = {f"{s.host}:{s.index}": s.uuid for s in slots}
    out: list[str] = []
    for ref in refs:
        uuid = by_uuid.get(ref.lower()) or by_place.get(ref)
        if uuid is None:
            raise Refusal("unknown-gpu", f"no GPU {ref!r} (name one as HOST:INDEX or by uuid)")
        if uuid not in out:
            out.append(uuid)
    return tuple(out)


def claim(
    tx: Tx,
    caller: Caller,
    args: ClaimArgs,
    ctx: Context,
    *,
    session: str | None,
    place_now: Callable[[policy.Want], policy.Place | None],
) -> dict[str, Any]:
    named = resolve_refs(args.gpu_refs, ctx.slots) if args.gpu_refs else ()
    count = len(named) if named else (args.gpus or 1)
    item = Claim(
        uid=caller.uid,
        user=caller.user,
        group=ctx.rules.sched.group_of(caller.user, caller.groups, caller.group),
        gpus=count,
        wanted=json.dumps(list(named)),
        pool=args.pool,
        model=args.model,
        host_constraint=args.host,
        note=args.note,
        state="waiting",
        reason="Resources",
        created_at=ctx.now,
        max_duration_s=args.duration_s,
        idle_release_s=ctx.rules.claim_idle_s,
        session=session if args.session else None,
        project=args.project,
    )
    want = _want(
        "claim",
        0,
        count,
        pool=args.pool,
        host=args.host,
        model=args.model,
        named=named,
        user=caller.user,
    )
    check_feasible(want, ctx)
    place = place_now(want)
    if place is None and not args.wait:
        raise Refusal("busy", f"{count} GPU(s) asked for are not free now (use --wait to queue)")
    tx.add_claim(item)
    if place is not None:
        grant_claim(tx, item, place, ctx)
    ctx.changed = True
    return {"claim": claim_view(item)}


def resume_claim(
    tx: Tx, caller: Caller, claim_id: int, ctx: Context, *, session: str | None
) -> dict[str, Any]:
    """A ``gputui run`` that lost its connection (the head restarted) takes its claim
    back onto its new one: from now on the claim ends when this connection does."""
    item = tx.claim(claim_id)
    if item is None or not caller.owns(item.uid):
        raise Refusal("unknown-claim", f"no claim {claim_id} of yours")
    if item.state not in ("waiting", "active"):
        why = item.release_reason or item.state
        raise Refusal("bad-state", f"claim {claim_id} is {item.state} ({why})")
    if item.session is None and item.idle_release_s != 0:
        raise Refusal("bad-state", f"claim {claim_id} is not a gputui run session's")
    item.session = session
    item.idle_release_s = ctx.rules.claim_idle_s
    item.last_active_at = ctx.now
    tx.flush()
    return {"claim": claim_view(item)}


def grant_claim(tx: Tx, item: Claim, place: policy.Place, ctx: Context) -> None:
    tx.allocate(place.gpu_uuids, place.host, ctx.now, claim_id=item.id)
    item.state, item.reason = "active", ""
    item.host = place.host
    item.gpu_uuids = json.dumps(list(place.gpu_uuids))
    item.granted_at = item.last_active_at = ctx.now
    if item.max_duration_s is not None:
        item.expires_at = ctx.now + item.max_duration_s


def end_claim(tx: Tx, item: Claim, ctx: Context, state: str, why: str) -> None:
    if item.id is not None:
        tx.free(ctx.now, claim_id=item.id)
    item.state = state
    item.released_at = ctx.now
    item.release_reason = why
    ctx.changed = True


def release(tx: Tx, caller: Caller, args: ReleaseArgs, ctx: Context) -> dict[str, Any]:
    live = tx.claims(("waiting", "active"))
    chosen: list[Claim] = []
    if args.all:
        chosen = [c for c in live if c.uid == caller.uid]
    for claim_id in args.claim_ids:
        found = next((c for c in live if c.id == claim_id), None)
        if found is None:
            raise Refusal("unknown-claim", f"no active claim {claim_id}")
        chosen.append(found)
    if args.gpu_refs:
        uuids = set(resolve_refs(args.gpu_refs, ctx.slots))
        holding = [c for c in live if uuids & set(json.loads(c.gpu_uuids))]
        if not holding:
            raise Refusal("unknown-claim", "no claim holds " + ", ".join(args.gpu_refs))
        mine = [c for c in holding if c.uid == caller.uid]
        chosen.extend(mine or holding)
    if not chosen and not args.all:
        raise Refusal("bad-args", "release: name claims, GPUs, or --all")
    done: list[dict[str, Any]] = []
    for item in {c.id: c for c in chosen}.values():
        _authorize(tx, caller, ctx, "release", kind="claim", item=item, reason=args.reason)
        who = "" if caller.owns(item.uid) else f" by {caller.user}"
        end_claim(tx, item, ctx, "released", "released" + who)  # _authorize told the owner
        done.append(claim_view(item))
    tx.flush()
    return {"released": done}


def claims(tx: Tx, caller: Caller, args: ListArgs, *, private: bool = False) -> dict[str, Any]:
    """As ``queue``: a page of claims, oldest first, and ``next``."""
    states = None if args.all else ("waiting", "active")
    found = tx.claims(states, user=args.user, limit=args.limit + 1, after=args.after)
    page = found[: args.limit]
    return {
        "claims": [privacy.hide_claim(claim_view(c), caller, c.uid, private) for c in page],
        "next": _next(page, len(found)),
    }


def env_line(tx: Tx, caller: Caller, host: str | None) -> dict[str, Any]:
    mine = [c for c in tx.claims(("active",)) if c.uid == caller.uid]
    if host is not None:
        mine = [c for c in mine if c.host == host]
    uuids: list[str] = []
    for c in mine:
        uuids.extend(json.loads(c.gpu_uuids))
    hosts = sorted({c.host for c in mine if c.host})
    # No shell line: the client builds it from the UUIDs (gputui.common.gpu_env), so nothing
    # the head says is ever evaluated by a shell.
    return {"uuids": uuids, "hosts": hosts}


def audit_rows(tx: Tx, caller: Caller, since: float | None, limit: int) -> dict[str, Any]:
    rows = tx.audits(since, limit)
    if not caller.admin:
        rows = [r for r in rows if r.uid == caller.uid or owned_by(r.owner, caller.user)]
    return {"rows": [audit_view(r) for r in rows]}
