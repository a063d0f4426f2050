"""The store side of a force-free: what each step writes, in the head's writer.

Every function runs inside the writer's transaction (``daemon.Head.call_tx``) and
writes its ``Audit`` row (action ``force-free``, target ``HOST:GPU``, the step and
its outcome) in the same transaction as the change it records. Jobs on the card
are killed and claims on it released through the ordinary request path
(``actions.kill`` / ``claims.release``), so their owners get the same notice and
audit row as when an admin kills or releases one by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.head import actions, claims, drains
from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.op_args import DrainArgs, JobArgs, ReleaseArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Audit, Notice, owners_text
from gputui.wire.words import Words, joined, say, words_of

ACTION = "force-free"
OUTCOME_MAX = 256


def drain_gpu(tx: Tx, run: Run, ctx: Context, watch: HostWatch) -> Words:
    """Step 1: the admin's drain of the card (``drains.drain``, audited as a drain with
    the reason ``force-free: REASON``); a card drained already keeps its drain and the
    reason it was given. The outcome in words."""
    gpu = tx.gpu(run.uuid)
    if gpu is None:
        raise Refusal("unknown-gpu", say(N_("no GPU {target}"), target=run.target))
    if gpu.drained:
        if gpu.drained_by:
            return say(N_("already drained by {user}"), user=gpu.drained_by)
        return say(N_("already drained by an admin"))
    args = DrainArgs(target=run.target, reason=f"force-free: {run.reason}"[:512])
    done = drains.drain(tx, run.caller, args, ctx, watch, tell=False)
    said = words_of(done.get("outcome_words"))
    return said if said is not None else say(N_("drained"))


@dataclass(slots=True)
class Run:
    """One force-free under way: who, which card, why, and where its steps are told."""

    caller: Caller
    host: str
    index: int
    uuid: str
    reason: str
    want_reset: bool
    conn: Connection
    request_id: int
    rid: str | None
    steps: list[dict[str, Any]] = field(default_factory=list)
    owners: str = ""
    """Whose work was on the card (``owners_text``), once the stop step knows: each of
    its audit rows from then on names them, so they see it in ``gputui audit``."""

    @property
    def target(self) -> str:
        return f"{self.host}:{self.index}"


def audit_step(tx: Tx, run: Run, now: float, step: str, outcome: str) -> None:
    """One step's audit row: ``force-free`` of ``HOST:GPU``, ``STEP: OUTCOME``."""
    tx.audit(
        Audit(
            time=now,
            uid=run.caller.uid,
            user=run.caller.user[:64],
            action=ACTION,
            target=run.target[:128],
            owner=run.owners,
            reason=run.reason[:512],
            outcome=f"{step}: {outcome}"[:OUTCOME_MAX],
        )
    )


@dataclass(slots=True)
class Stray:
    """A process on the card that is no job's: signalled through the helper."""

    pid: int
    uid: int | None
    user: str | None
    start_ticks: int | None


@dataclass(slots=True)
class Stopped:
    """What the stop step did to the store."""

    jobs: list[int] = field(default_factory=list)
    claims: list[int] = field(default_factory=list)
    refused: list[Words] = field(default_factory=list)
    """Jobs or claims that could not be stopped, and why."""
    job_pids: set[int] = field(default_factory=set)
    """The main pids of the jobs killed (their host signals those itself)."""

    def outcome(self, strays: int) -> Words:
        """What the stop step did, in words: each part one item of a list; the English
        line the parts joined by "; "."""
        parts: list[Words] = []
        if self.jobs:
            jobs = ", ".join(str(j) for j in self.jobs)
            parts.append(say(N_("killing job {jobs}"), jobs=jobs))
        if self.claims:
            claims = ", ".join(str(c) for c in self.claims)
            parts.append(say(N_("released claim {claims}"), claims=claims))
        if strays:
            template = N_("{count} other process to signal")
            if strays != 1:
                template = N_("{count} other processes to signal")
            parts.append(say(template, count=strays))
        parts += self.refused
        if not parts:
            return say(N_("nothing ran there"))
        return joined(parts)


def stop_work(tx: Tx, run: Run, ctx: Context, strays: Sequence[Stray]) -> Stopped:
    """Kill every job on GPU ``uuid`` and release every claim on it (each owner told,
    as when an admin does so by hand), tell the owners of the other processes there
    that they get SIGTERM, and audit the step. The jobs' SIGTERM goes out once this
    is committed (``ctx.stops``), SIGKILL after the grace period."""
    caller, uuid, target, reason = run.caller, run.uuid, run.target, run.reason
    why = f"force-free {target}: {reason}"
    done = Stopped()
    live = [a for a in tx.live_allocations() if a.gpu_uuid == uuid]
    for job_id in sorted({a.job_id for a in live if a.job_id is not None}):
        try:
            with tx.savepoint():
                actions.kill(tx, caller, JobArgs(job_id=job_id, reason=why), ctx)
        except Refusal as refusal:
            said = refusal.words or refusal.message
            done.refused.append(say(N_("job {job} not killed: {why}"), job=job_id, why=said))
            continue
        done.jobs.append(job_id)
        job = tx.job(job_id)
        if job is not None and job.pid is not None:
            done.job_pids.add(job.pid)
    claim_ids = sorted({a.claim_id for a in live if a.claim_id is not None})
    for claim_id in claim_ids:
        try:
            with tx.savepoint():
                claims.release(tx, caller, ReleaseArgs(claim_ids=[claim_id], reason=why), ctx)
        except Refusal as refusal:
            said = refusal.words or refusal.message
            done.refused.append(
                say(N_("claim {claim} not released: {why}"), claim=claim_id, why=said)
            )
            continue
        done.claims.append(claim_id)
    told: set[int] = set()
    for proc in strays:
        if proc.uid is None or proc.uid in told or proc.uid == caller.uid:
            continue
        told.add(proc.uid)
        pids = ", ".join(str(p.pid) for p in strays if p.uid == proc.uid)
        text = say(
            N_("{target}: pid {pids} sent SIGTERM by {admin} (admin, force-free): {reason}"),
            target=target,
            pids=pids,
            admin=caller.user,
            reason=reason,
        )
        tx.notice(Notice.of(uid=proc.uid, time=ctx.now, kind="admin", text=text))
    others = [s for s in strays if s.pid not in done.job_pids]
    users = [job.user for j in done.jobs if (job := tx.job(j)) is not None]
    users += [claim.user for c in done.claims if (claim := tx.claim(c)) is not None]
    users += [s.user for s in others if s.user]
    run.owners = owners_text(users)
    audit_step(tx, run, ctx.now, "stop", done.outcome(len(others)).english())
    ctx.changed = True
    return done


def first_answer(tx: Tx, caller: Caller, rid: str | None) -> dict[str, Any] | None:
    """The stored answer of an earlier force-free with this request id (a retry)."""
    if rid is None:
        return None
    return tx.replay_many([(caller.uid, rid)]).get((caller.uid, rid))


def remember(tx: Tx, caller: Caller, rid: str | None, body: dict[str, Any], now: float) -> None:
    if rid is not None:
        tx.remember_many([(caller.uid, rid, body)], now)
