"""What one batch does to the store: each request and each piece of host news in it,
in one transaction, and the answers and the work to do once that is committed.

No I/O here. The daemon (``daemon.Head``) reads the socket and the hosts, hands
whatever has arrived to ``Batches.apply``, and acts on the ``After`` it returns
only once the commit is durable (answers, launches, signals).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputui.common.i18n import N_
from gputui.config.models import HealthThresholds
from gputui.scheduler.head import actions, bookings, claims, drains, lifecycle, notices, publish
from gputui.scheduler.head.actions import Context, Rules
from gputui.scheduler.head.standings import Standings
from gputui.scheduler.head.views import job_view
from gputui.scheduler.head.watch.flags import FlagWatch, Pending, ProcSignal
from gputui.scheduler.head.watch.health import HeadHealth, HealthWrite
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy import bookings as booking_rules
from gputui.scheduler.policy import model
from gputui.scheduler.policy.model import INF
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.api import Store, StoreFailure, Tx
from gputui.wire.words import say

log = logging.getLogger("gputui.scheduler.head.daemon")  # one logger for the head

REQUEST_LOG_KEEP_S = 7 * 86400.0
"""How long a request id is remembered (a retry later than this is a new request)."""


@dataclass(slots=True)
class Item:
    """One thing for the writer: a client request, or the head's own news."""

    kind: str
    conn: Connection | None = None
    request: wire.Request | None = None
    payload: Any = None
    done: asyncio.Future[Any] | None = None


@dataclass(slots=True)
class After:
    launches: list[lifecycle.Launch] = field(default_factory=list)
    stops: list[tuple[str, int]] = field(default_factory=list)
    kills: list[tuple[str, int]] = field(default_factory=list)
    forget: dict[str, list[int]] = field(default_factory=dict)
    launches_again: list[lifecycle.Launch] = field(default_factory=list)
    final_jobs: list[tuple[Connection, int, dict[str, Any]]] = field(default_factory=list)
    waits: list[tuple[int, Connection, int]] = field(default_factory=list)
    """(job id, connection, request id) of ``wait`` requests made in this batch:
    registered only once it is committed (``Batches.commit_done``)."""
    sessions: list[str] = field(default_factory=list)
    """``gputui run`` sessions whose claim this batch made."""
    signals: list[ProcSignal] = field(default_factory=list)
    """Flagged processes to signal (``scheduler.ownership.mode: enforce``)."""
    flagged: list[Pending] = field(default_factory=list)
    """What this batch's ownership ticks leave for ``FlagWatch`` to remember."""
    health: list[HealthWrite] = field(default_factory=list)
    """What this batch wrote of the health board (``HeadHealth.committed``)."""
    changed: bool = False
    moved: bool = False
    booked: bookings.Ticked | None = None
    """The bookings as this batch leaves them, good until their next edge."""
    ended: list[tuple[str, float]] = field(default_factory=list)
    """(GPU uuid, end) of the allocations this batch ended (``HeadMeter.ended``)."""
    """GPUs were given or freed (who holds what is read again once committed)."""


class Batches:
    """Applies batches to the store; keeps what requests leave behind between them
    (who waits for which job, which ``gputui run`` sessions are alive, which launches
    are in flight), shared with the daemon that owns the connections."""

    def __init__(
        self,
        store: Store,
        rules: Rules,
        watch: HostWatch,
        host_pools: dict[str, str],
        decide: model.Policy,
        *,
        logins: Callable[[], dict[str, str | None]],
        state: Callable[[Tx, Caller], dict[str, Any]],
        state_seq: Callable[[], int],
        run_as_login_user: bool = False,
        health: HeadHealth | None = None,
    ) -> None:
        """``logins``: host -> the user the head logs in as (``run_as_login_user``: run
        every job as that user); ``state``/``state_seq``: the pushed state, its number."""
        self.store = store
        self.rules = rules
        self.run_as_login_user = run_as_login_user
        self.watch = watch
        self.host_pools = host_pools
        self.decide = decide
        self.logins = logins
        self.state = state
        self.state_seq = state_seq
        self.waits: dict[int, list[tuple[Connection, int]]] = {}
        self.sessions_alive: set[str] = set()
        self.launching: set[int] = set()
        self.standings = Standings(lambda: self.rules.sched)
        """The standing figures every pass, ``explain`` and ``quota`` use."""
        self.flags = FlagWatch(watch)
        self.booked: bookings.Ticked | None = None
        """The bookings as the last committed batch left them (None: not read yet)."""
        self.health = health or HeadHealth(HealthThresholds(), host_pools, clock=lambda: 0.0)

    def context(self, slots: tuple[model.GpuSlot, ...], now: float) -> Context:
        known = {g.host for g in self.watch.present_gpus()}
        return Context(
            now=now,
            slots=slots,
            unknown_hosts=frozenset(set(self.host_pools) - known),
            # The hosts' pools, and the pools cards have of their own (AMD's: vendors).
            pools=frozenset(self.host_pools.values()) | {g.pool for g in slots},
            hosts=frozenset(self.host_pools),
            rules=self.rules,
        )

    def apply(
        self, batch: list[Item], slots: tuple[model.GpuSlot, ...], now: float
    ) -> tuple[list[dict[str, Any] | None], After]:
        ctx = self.context(slots, now)
        after = After()
        answers: list[dict[str, Any] | None] = []
        with self.store.batch() as tx:
            keys = [
                (item.conn.caller.uid, item.request.rid)
                for item in batch
                if item.conn is not None
                and item.request is not None
                and item.request.rid is not None
                and item.request.op in wire.MUTATING
            ]
            replays = tx.replay_many(keys)
            remember: list[tuple[int, str, dict[str, Any]]] = []
            submits: list[tuple[int, list[dict[str, Any]]]] = []
            earlier: dict[tuple[int, str], int] = {}
            repeats: list[tuple[int, int, int]] = []
            for item in batch:
                request = item.request
                if item.kind == "request" and request is not None and item.conn is not None:
                    uid = item.conn.caller.uid
                    first = replays.get((uid, request.rid or ""))
                    if request.op in wire.MUTATING and first is not None:
                        answers.append({**first, "id": request.id})
                        continue
                    if request.op in wire.MUTATING:
                        # The same request twice in one batch (a retry racing its first
                        # send) is applied once; the second gets the first's answer.
                        key = (uid, request.rid or "")
                        if key in earlier:
                            repeats.append((len(answers), earlier[key], request.id))
                            answers.append(None)
                            continue
                        earlier[key] = len(answers)
                    if request.op == "submit":
                        try:
                            row = actions.submit_row(item.conn.caller, request.args, ctx, tx)
                        except wire.Refusal as refusal:
                            body = wire.refused(request.id, refusal)
                            remember.append((uid, request.rid or "", body))
                            answers.append(body)
                        else:
                            rows = actions.task_rows(tx, row, request.args, now)
                            submits.append((len(answers), rows))
                            answers.append(None)
                        continue
                answers.append(self._apply_one(tx, item, ctx, after, remember))
            firsts = actions.insert_submissions(tx, [rows for _, rows in submits])
            for (index, rows), first in zip(submits, firsts, strict=True):
                ctx.new_jobs.extend(rows)
                item = batch[index]
                assert item.request is not None and item.conn is not None
                body = wire.response(item.request.id, actions.submitted(first))
                answers[index] = body
                remember.append((item.conn.caller.uid, item.request.rid or "", body))
            for index, source, request_id in repeats:
                copied = answers[source]
                answers[index] = None if copied is None else {**copied, "id": request_id}
            tx.remember_many(remember, now)
            standing, rejudged = self.standings.at(tx, now)
            ctx.changed = ctx.changed or rejudged
            booked = self._bookings(tx, ctx, after)
            after.launches = lifecycle.schedule(
                tx,
                ctx,
                self.decide,
                self.logins(),
                run_as_login_user=self.run_as_login_user,
                standing=standing,
                bookings=booked,
            )
            after.launches.extend(after.launches_again)
            after.stops = list(ctx.stops)
            if ctx.changed or ctx.new_jobs or after.launches:
                after.changed = True
                after.final_jobs = self.final_waits(tx, after.waits)
            after.moved, after.ended = tx.moved, list(tx.ended)
        return answers, after

    def _bookings(self, tx: Tx, ctx: Context, after: After) -> tuple[model.Booked, ...]:
        """The bookings the pass honours: those the last batch left while none has an
        edge due and none changed since (most batches), else ``bookings.tick``'s.
        Whatever in a batch moves bookings (a request, the timer's claim expiry) is
        applied before this; the pass after it ends no claim."""
        known = self.booked
        if known is None or ctx.bookings_moved or ctx.now >= known.due:
            known = bookings.tick(tx, ctx)
        after.booked = known
        return known.booked

    def _apply_one(
        self,
        tx: Tx,
        item: Item,
        ctx: Context,
        after: After,
        remember: list[tuple[int, str, dict[str, Any]]],
    ) -> dict[str, Any] | None:
        if item.kind == "request":
            assert item.conn is not None and item.request is not None
            return self._request(tx, item.conn, item.request, ctx, after=after, remember=remember)
        try:
            with tx.savepoint():
                self._internal(tx, item, ctx, after)
        except (wire.Refusal, StoreFailure, ValueError, KeyError) as exc:
            log.warning("head: %s not applied: %s", item.kind, exc)
        return None

    def _request(
        self,
        tx: Tx,
        conn: Connection,
        request: wire.Request,
        ctx: Context,
        *,
        after: After,
        remember: list[tuple[int, str, dict[str, Any]]],
    ) -> dict[str, Any] | None:
        caller = conn.caller
        try:
            with tx.savepoint():
                result = self._handle(tx, conn, caller, request, ctx=ctx, after=after)
        except wire.Refusal as refusal:
            body = wire.refused(request.id, refusal)
        else:
            if result is None:
                return None
            body = wire.response(request.id, result)
        if request.op in wire.MUTATING and request.rid is not None:
            remember.append((caller.uid, request.rid, body))
        return body

    def _handle(
        self,
        tx: Tx,
        conn: Connection,
        caller: Caller,
        request: wire.Request,
        *,
        ctx: Context,
        after: After,
    ) -> dict[str, Any] | None:
        op, args = request.op, request.args
        # "submit" never gets here: _apply takes a batch's submissions in one statement.
        if op in ("cancel", "kill", "preempt", "requeue", "hold", "release_hold"):
            handler = getattr(actions, op)
            result: dict[str, Any] = handler(tx, caller, args, ctx)
            return result
        if op == "claim":
            if args.resume is not None and not args.session:
                raise wire.Refusal(
                    "bad-args", say(N_("claim: resume is for a run's session claim"))
                )
            if args.session:
                after.sessions.append(conn.session)
            if args.resume is not None:
                return claims.resume_claim(tx, caller, args.resume, ctx, session=conn.session)
            return claims.claim(
                tx,
                caller,
                args,
                ctx,
                session=conn.session,
                place_now=lambda w: self._place_now(tx, w, ctx),
            )
        if op == "release":
            return claims.release(tx, caller, args, ctx)
        if op == "book":
            return bookings.book(tx, caller, args, ctx)
        if op == "unbook":
            return bookings.unbook(tx, caller, args, ctx)
        if op == "bookings":
            return bookings.listing(tx, args, ctx.now)
        if op == "health_ack":
            return self.health.acknowledge(tx, caller, args, ctx.now)
        if op in drains.OPS:
            return drains.HANDLERS[op](tx, caller, args, ctx, self.watch)
        if op == "show":
            return actions.show(
                tx, caller, args.job_id, ctx.rules.sched, private=self.rules.sched.private_data
            )
        if op == "queue":
            queued = actions.queue(tx, caller, args)
            return {**queued, **self.flags.state(), **drains.unavailable(self.watch)}
        if op == "claims":
            return claims.claims(tx, caller, args, private=self.rules.sched.private_data)
        if op == "env":
            return claims.env_line(tx, caller, args.host)
        if op == "audit":
            return actions.audit_rows(tx, caller, args.since, args.limit)
        if op == "whoami":
            return publish.whoami(caller)
        if op == "cluster":
            return self.state(tx, caller)
        if op == "subscribe":
            conn.subscribed = True
            conn.last_notice = tx.last_notice_id()
            told = notices.on_connect(tx, caller, ctx.now)  # what came while away
            return {"seq": self.state_seq(), "state": self.state(tx, caller), "notices": told}
        if op == "notices":
            return notices.deliver(tx, caller, args, ctx.now)
        if op == "wait":
            job = tx.job(args.job_id)
            if job is None:
                raise wire.Refusal("unknown-job", say(N_("no job {job}"), job=args.job_id))
            if job.state in wire.FINAL_JOB_STATES:
                return {"job": job_view(job)}
            after.waits.append((args.job_id, conn, request.id))
            return None
        raise wire.Refusal("unknown-op", say(N_("unknown op {op}"), op=repr(op)))

    def _place_now(self, tx: Tx, want: model.Want, ctx: Context) -> model.Place | None:
        busy = {a.gpu_uuid for a in tx.live_allocations()}
        live = [bookings.as_policy(b) for b in tx.bookings(bookings.LIVE, ending_after=ctx.now)]
        if live:  # cards a booking keeps from it count as taken
            end = INF if want.time_limit_s is None else ctx.now + want.time_limit_s
            cards = booking_rules.by_card(live, ctx.now)
            busy |= booking_rules.barred(want, end, ctx.now, cards, list(cards))
        hosts: dict[str, list[model.GpuSlot]] = {}
        for s in ctx.slots:
            slot = s.held(s.uuid in busy)
            hosts.setdefault(s.host, []).append(slot)
        return model.best_fit(want, hosts, set())

    def _internal(self, tx: Tx, item: Item, ctx: Context, after: After) -> None:
        kind, payload = item.kind, item.payload
        if kind == "launched":
            spec, answer = payload
            if answer.ok:
                forget = lifecycle.on_report(tx, ctx, spec.host, [answer.value])
                after.forget.setdefault(spec.host, []).extend(forget)
            else:
                lifecycle.on_launch_failed(
                    tx,
                    ctx,
                    spec.job_id,
                    spec.launch,
                    code=answer.code or "",
                    message=answer.message,
                )
        elif kind == "reports":
            host, reports = payload
            forget = lifecycle.on_report(
                tx,
                ctx,
                host,
                reports,
                complete=True,
                in_flight=frozenset(self.launching),
                relaunch=after.launches_again,
            )
            if forget:
                after.forget.setdefault(host, []).extend(forget)
        elif kind == "host-down":
            host, why = payload
            lifecycle.on_host_down(tx, ctx, host, why)
        elif kind == "inventory":
            host, gpus = payload
            self.watch.put_inventory(tx, host, gpus)
        elif kind == "fences":  # the health rules' verdict on a host's GPUs (fences)
            self.watch.put_fences(tx, payload, ctx.now)
            ctx.changed = True
        elif kind == "tick":
            active, orphans = payload
            lifecycle.expire_claims(tx, ctx, active, orphans)
            for job in tx.jobs(("killing", "preempting")):
                if (
                    job.stop_deadline is not None
                    and ctx.now >= job.stop_deadline
                    and job.host
                    and job.id
                ):
                    after.kills.append((job.host, actions.run_key(job.id, job.launches)))
                    job.stop_deadline = ctx.now + self.rules.kill_grace_s
            tx.forget_requests_before(ctx.now - REQUEST_LOG_KEEP_S)
        elif kind == "ownership":
            self.flags.tick(tx, ctx, after.flagged, after.signals)
        elif kind == "health":  # the head's own findings, and what changed on the board
            flags, idle_after = self.flags.flags, self.flags.idle_after_s
            if self.health.refresh(tx, ctx.now, self.watch, flags, idle_after):
                ctx.changed = True
            after.health.append(self.health.write(tx, ctx.now))
        elif kind == "signalled":
            sig, answer = payload
            self.flags.signalled(tx, sig, answer)
        elif kind == "call":  # a step of a longer request (force-free): its own store work
            payload(tx, ctx)
        elif kind == "meter":  # busy time and energy counted from samples (metering)
            tx.usage.add_metered(
                payload.usage_rows(),
                payload.cluster_rows(),
                payload.job_rows(),
                payload.idle_rows(),
            )
        elif kind == "slurm-meter":  # Slurm's jobs' time and energy (a relaying head)
            tx.usage.add_slurm_energy(payload.rows())
        elif kind == "notices-read":  # pushed to an open console: delivered
            uid, ids = payload
            tx.mark_read(uid, ids, ctx.now)
        elif kind == "session-closed":
            lifecycle.expire_claims(tx, ctx, self.watch.active_users(), {payload})
        elif kind == "resume":
            # Jobs left starting or unknown are settled by their host's next jobs
            # list (see lifecycle.on_report); nothing is launched blindly here.
            for job in tx.jobs(("killing", "preempting")):
                if job.host and job.id:
                    after.kills.append((job.host, actions.run_key(job.id, job.launches)))

    def final_waits(
        self, tx: Tx, pending: list[tuple[int, Connection, int]]
    ) -> list[tuple[Connection, int, dict[str, Any]]]:
        """The waiters whose job has ended (those registered, and ``pending``: this
        batch's own), with its view. Nothing is taken off or put on the list until
        the batch is committed (``commit_done``)."""
        candidates = {job_id: list(waiters) for job_id, waiters in self.waits.items()}
        for job_id, conn, rid in pending:
            candidates.setdefault(job_id, []).append((conn, rid))
        done: list[tuple[Connection, int, dict[str, Any]]] = []
        for job_id, waiters in candidates.items():
            if not waiters:
                continue
            job = tx.job(job_id)
            if job is not None and job.state in wire.FINAL_JOB_STATES:
                view = job_view(job)
                done.extend((conn, rid, view) for conn, rid in waiters)
        return done

    def commit_done(self, after: After) -> None:
        """After the commit: this batch's waits and run sessions count now, and the
        waits it answered are over."""
        self.sessions_alive.update(after.sessions)
        self.booked = after.booked
        self.flags.commit(after.flagged)
        for written in after.health:
            self.health.committed(written)
        for job_id, conn, rid in after.waits:
            self.waits.setdefault(job_id, []).append((conn, rid))
        sent = {(id(conn), rid) for conn, rid, _ in after.final_jobs}
        for job_id, waiters in list(self.waits.items()):
            waiters[:] = [w for w in waiters if (id(w[0]), w[1]) not in sent]
            if not waiters:
                self.waits.pop(job_id, None)
