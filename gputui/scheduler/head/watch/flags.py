"""``FlagWatch``: ownership flags, their enforcement, and idle jobs, in the head's writer.

Once a tick the daemon posts an ``ownership`` item; the writer's batch hands it to
``FlagWatch.tick`` inside its transaction. That reads the live allocations, takes
the processes and utilisation of every GPU from the hosts' latest samples
(``HostWatch``), asks the pure rules (``ownership``) what they make of them, and
writes what follows: notices, audit rows, a job's idle columns (only when they
change). Signals go out only after the commit (``After.signals``); their outcome
comes back as a ``signalled`` item and is written into the audit row.

What is known of each flagged process (first seen, told, signalled) lives in memory
and is taken on only once its batch is committed (``commit``): after a restart of
the head every flagged process is new again, so its grace starts again and its
owner is told again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputui.common.durations import coarse_text
from gputui.common.i18n import N_
from gputui.config.scheduler import Ownership
from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.hostops import GpuProcess, HostAnswer, signal_outcome
from gputui.scheduler.head.views import json_list
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy import ownership
from gputui.scheduler.policy.ownership import Flag, GpuProc, Holding, HostPart, Offence, Step
from gputui.scheduler.server.peer import HEAD_ACTOR
from gputui.scheduler.server.wire import LIVE_JOB_STATES
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit, Notice
from gputui.wire.words import Words, say

NOTICE_PIDS = 6
"""Processes named in one notice; the rest are counted."""
_SIGNAL_NAMES = {"TERM": "SIGTERM", "KILL": "SIGKILL"}


@dataclass(frozen=True, slots=True)
class ProcSignal:
    """A verified signal to send to a flagged process once the batch is committed."""

    host: str
    process: GpuProcess
    gpu_index: int
    signal: str
    audit_id: int | None


@dataclass(frozen=True, slots=True)
class Pending:
    """What a batch's tick leaves to take on once it is committed."""

    step: Step


def flag_view(flag: Flag) -> dict[str, Any]:
    p = flag.proc
    return {
        "host": p.host,
        "gpu_uuid": p.gpu_uuid,
        "gpu_index": p.gpu_index,
        "pid": p.pid,
        "uid": p.uid,
        "user": p.user,
        "name": p.name[:128],
        "kind": flag.kind,
        "since": flag.since,
        "signal_at": flag.signal_at,
        "next_signal": flag.next_signal,
        "signalled": flag.signalled,
    }


def _same(a: Sequence[Flag], b: Sequence[Flag]) -> bool:
    """Whether two lists of flags are the same objects (a settled host's are kept)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _shown(flag: Flag) -> tuple[object, ...]:
    """``flag_view``'s values in its order: what a console is shown of the flag
    (compared each tick; a tuple costs less than the dict)."""
    p = flag.proc
    return (
        p.host,
        p.gpu_uuid,
        p.gpu_index,
        p.pid,
        p.uid,
        p.user,
        p.name[:128],
        flag.kind,
        flag.since,
        flag.signal_at,
        flag.next_signal,
        flag.signalled,
    )


def _where(proc: GpuProc) -> Words:
    return say(
        N_("pid {pid} on {host} GPU {gpu}"), pid=proc.pid, host=proc.host, gpu=proc.gpu_index
    )


_TOLD_ONE = {
    (True, True): N_(
        "pid {pid} on {host} GPU {gpu} ({name}) runs outside the GPUs of {owner}'s jobs and"
        " claims there; each gets SIGTERM {grace} after it was first seen"
    ),
    (True, False): N_(
        "pid {pid} on {host} GPU {gpu} ({name}) runs outside the GPUs of {owner}'s jobs and"
        " claims there; claim the GPU (gputui claim HOST:GPU) or stop it"
    ),
    (False, True): N_(
        "pid {pid} on {host} GPU {gpu} ({name}) runs with no job or claim of {owner} there;"
        " each gets SIGTERM {grace} after it was first seen"
    ),
    (False, False): N_(
        "pid {pid} on {host} GPU {gpu} ({name}) runs with no job or claim of {owner} there;"
        " claim the GPU (gputui claim HOST:GPU) or stop it"
    ),
}
"""A notice of one flagged process: (outside its owner's GPUs, enforced) -> template."""

_TOLD_MANY = {
    (False, True): N_(
        "{n} processes of {owner} run on GPUs not given to them: {shown}; each gets SIGTERM"
        " {grace} after it was first seen"
    ),
    (False, False): N_(
        "{n} processes of {owner} run on GPUs not given to them: {shown}; claim the GPU"
        " (gputui claim HOST:GPU) or stop it"
    ),
    (True, True): N_(
        "{n} processes of {owner} run on GPUs not given to them: {shown} and {more} more;"
        " each gets SIGTERM {grace} after it was first seen"
    ),
    (True, False): N_(
        "{n} processes of {owner} run on GPUs not given to them: {shown} and {more} more;"
        " claim the GPU (gputui claim HOST:GPU) or stop it"
    ),
}
"""A notice of several: (more than are named, enforced) -> template."""


def _told(mine: list[Offence], enforce: bool, grace_s: float) -> Words:
    """The notice to one owner of their newly flagged processes."""
    first = mine[0]
    owner, grace = first.proc.owner, coarse_text(grace_s)
    if len(mine) == 1:
        proc = first.proc
        return say(
            _TOLD_ONE[first.kind == "outside-allocation", enforce],
            pid=proc.pid, host=proc.host, gpu=proc.gpu_index, name=proc.name or "?",
            owner=owner, grace=grace,
        )  # fmt: skip
    shown = tuple(_where(o.proc) for o in mine[:NOTICE_PIDS])
    more = len(mine) - NOTICE_PIDS
    return say(
        _TOLD_MANY[more > 0, enforce],
        n=len(mine), owner=owner, shown=shown, more=more, grace=grace,
    )  # fmt: skip


def _why(kind: str, owner: str) -> str:
    if kind == "outside-allocation":
        return f"outside the GPUs of {owner}'s jobs and claims there"
    return f"with no job or claim of {owner} there"


class FlagWatch:
    """Flags of the processes that should not be on their GPUs, and of idle jobs."""

    def __init__(self, watch: HostWatch) -> None:
        self.watch = watch
        self.seen: dict[ownership.ProcKey, ownership.Watched] = {}
        self.flags: list[Flag] = []
        self.parts: dict[str, HostPart] = {}
        """Each live host's part of the last committed tick (``ownership.step_hosts``)."""
        self.idle_after_s = 3600.0
        self.ticks = 0
        """Ticks committed (for tests: a condition to wait on)."""

    # -- what consoles and ``gputui queue`` are shown --------------------------------

    def state(self) -> dict[str, Any]:
        return {"flags": [flag_view(f) for f in self.flags], "idle_after_s": self.idle_after_s}

    # -- in the writer's transaction ------------------------------------------------

    def tick(self, tx: Tx, ctx: Context, pending: list[Pending], signals: list[ProcSignal]) -> None:
        """One tick: idle jobs, then flags. What to remember goes to ``pending`` (taken
        on at ``commit``; a later tick in the same batch starts from it), what to
        signal after the commit to ``signals``; both only once everything it wrote
        is written, so a tick that fails leaves neither."""
        sched = ctx.rules.sched
        self.idle_after_s = sched.idle_job_minutes * 60
        base = pending[-1].step if pending else Step(self.seen, self.flags, parts=self.parts)
        self._idle(tx, ctx)
        mine: list[ProcSignal] = []
        step = self._ownership(tx, ctx, sched.ownership, base, mine)
        pending.append(Pending(step))
        signals.extend(mine)

    def commit(self, pending: Sequence[Pending]) -> None:
        """The batch is durable: its last tick's memory is the memory now."""
        self.ticks += len(pending)
        if pending:
            last = pending[-1].step
            self.seen, self.flags, self.parts = last.seen, last.flags, last.parts

    def signalled(self, tx: Tx, sig: ProcSignal, answer: HostAnswer) -> None:
        """A signal's answer: into the audit row written when it was decided."""
        if sig.audit_id is None:
            return
        row = tx.audit_row(sig.audit_id)
        if row is None:
            return
        row.outcome = signal_outcome(_SIGNAL_NAMES.get(sig.signal, sig.signal), answer)
        method = answer.value.get("method") if isinstance(answer.value, dict) else None
        if answer.ok and method:
            row.outcome += f" (verified by {method})"

    # -- idle jobs ------------------------------------------------------------------

    def _idle(self, tx: Tx, ctx: Context) -> None:
        """Idle columns of the running jobs, written only when they change (a new run
        starts with them cleared: ``lifecycle.schedule`` does that as it places a job)."""
        running = tx.jobs(("running",))
        # Every GPU's utilisation, only when a job runs to read it.
        util = self.watch.gpu_util() if running else {}
        for job in running:
            change = ownership.idle_step(
                [str(u) for u in json_list(job.gpu_uuids)],
                util,
                idle_since=job.idle_since,
                told=job.idle_told,
                now=ctx.now,
                idle_after_s=self.idle_after_s,
            )
            if change is None:
                continue
            job.idle_since = change.idle_since
            ctx.changed = True
            if change.tell and change.idle_since is not None:
                job.idle_told = True
                gpus = len(json_list(job.gpu_uuids))
                text = say(
                    N_(
                        "job {id} ({name}) on {host} has used none of its {n} GPU for {span}"
                        " (0% utilisation): cancel it if it is done (gputui cancel {id})"
                    )
                    if gpus == 1
                    else N_(
                        "job {id} ({name}) on {host} has used none of its {n} GPUs for {span}"
                        " (0% utilisation): cancel it if it is done (gputui cancel {id})"
                    ),
                    id=job.id or 0,
                    name=job.name,
                    host=str(job.host),
                    n=gpus,
                    span=coarse_text(ctx.now - change.idle_since),
                )
                tx.notice(
                    Notice.of(uid=job.uid, time=ctx.now, kind="idle", text=text, job_id=job.id)
                )

    # -- ownership --------------------------------------------------------------------

    def _ownership(
        self, tx: Tx, ctx: Context, rules: Ownership, last: Step, signals: list[ProcSignal]
    ) -> Step:
        if rules.mode == "off":
            if last.flags:
                ctx.changed = True
            return Step(seen={})
        procs = self.watch.gpu_processes_by_host()
        exempt = rules.exempt_users
        holdings: list[Holding] = []
        if any(not ownership.exempt(p, exempt) for mine in procs.values() for p in mine):
            holdings = _holdings(tx)
        marks = {name: count for name, (count, _) in self.watch.samples().items()}
        enforce = rules.mode == "enforce"
        step = ownership.step_hosts(
            last, procs, holdings, marks, ctx.now,
            exempt_users=exempt, enforce=enforce, grace_s=rules.grace_s,
        )  # fmt: skip
        self._tell(tx, ctx, step.tell, enforce, rules.grace_s)
        for offence, signal in step.signals:
            signals.append(self._enforce(tx, ctx, offence, signal, step))
        if not _same(step.flags, last.flags) and (
            [_shown(f) for f in step.flags] != [_shown(f) for f in last.flags]
        ):
            ctx.changed = True
        return step

    def _tell(
        self, tx: Tx, ctx: Context, told: list[Offence], enforce: bool, grace_s: float
    ) -> None:
        """One notice per owner a tick, naming their newly flagged processes."""
        by_uid: dict[int, list[Offence]] = {}
        for offence in told:
            if offence.proc.uid is not None:
                by_uid.setdefault(offence.proc.uid, []).append(offence)
        for uid, mine in by_uid.items():
            tx.notice(
                Notice.of(
                    uid=uid, time=ctx.now, kind="ownership", text=_told(mine, enforce, grace_s)
                )
            )

    def _enforce(
        self, tx: Tx, ctx: Context, offence: Offence, signal: str, step: Step
    ) -> ProcSignal:
        proc = offence.proc
        name = _SIGNAL_NAMES[signal]
        watched = step.seen[proc.key]
        if signal == "TERM":
            reason = (
                f"{offence.kind}: ran {coarse_text(ctx.now - watched.since)} "
                f"{_why(offence.kind, proc.owner)}"
            )
        else:
            after = coarse_text(ctx.now - (watched.term_at or ctx.now))
            reason = f"{offence.kind}: still there {after} after SIGTERM"
        row = Audit(
            time=ctx.now,
            uid=0,
            user=HEAD_ACTOR,
            action="enforce",
            target=_where(proc).english()[:128],
            owner=proc.owner[:64],
            reason=f"{reason} ({proc.name or '?'})"[:512],
            outcome=f"{name} sent",
        )
        tx.audit(row)
        tx.flush()
        if proc.uid is not None:
            if signal != "TERM":
                template = N_(
                    "pid {pid} on {host} GPU {gpu} ({name}) was sent {signal}: {kind}: still"
                    " there {span} after SIGTERM"
                )
                span = coarse_text(ctx.now - (watched.term_at or ctx.now))
            else:
                template = (
                    N_(
                        "pid {pid} on {host} GPU {gpu} ({name}) was sent {signal}: {kind}: ran"
                        " {span} outside the GPUs of {owner}'s jobs and claims there"
                    )
                    if offence.kind == "outside-allocation"
                    else N_(
                        "pid {pid} on {host} GPU {gpu} ({name}) was sent {signal}: {kind}: ran"
                        " {span} with no job or claim of {owner} there"
                    )
                )
                span = coarse_text(ctx.now - watched.since)
            text = say(
                template,
                pid=proc.pid, host=proc.host, gpu=proc.gpu_index, name=proc.name or "?",
                signal=name, kind=offence.kind, span=span, owner=proc.owner,
            )  # fmt: skip
            tx.notice(Notice.of(uid=proc.uid, time=ctx.now, kind="ownership", text=text))
        ctx.changed = True
        process = GpuProcess(proc.gpu_uuid, proc.pid, proc.uid, proc.start_ticks)
        return ProcSignal(proc.host, process, proc.gpu_index, signal, row.id)


def _holdings(tx: Tx) -> list[Holding]:
    """Every live allocation with the users its processes may run as."""
    jobs = {j.id: j for j in tx.jobs(LIVE_JOB_STATES)}
    claims = {c.id: c for c in tx.claims(("active",))}
    out: list[Holding] = []
    for a in tx.live_allocations():
        if a.job_id is not None:
            job = jobs.get(a.job_id) or tx.job(a.job_id)
            if job is None or job.id is None:
                continue
            users = frozenset(u for u in (job.user, job.run_as) if u)
            boxes = frozenset({job.container_id}) if job.container_id else frozenset()
            out.append(Holding(a.gpu_uuid, a.host, "job", job.id, job.uid, users, boxes))
        elif a.claim_id is not None:
            claim = claims.get(a.claim_id) or tx.claim(a.claim_id)
            if claim is None or claim.id is None:
                continue
            out.append(
                Holding(a.gpu_uuid, a.host, "claim", claim.id, claim.uid, frozenset({claim.user}))
            )
    return out
