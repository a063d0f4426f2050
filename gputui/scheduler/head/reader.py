"""The head's read-only requests that never wait for the writer: ``explain``,
``estimates``, ``quota``, ``usage``, ``report``, ``gpus``, ``history`` and ``logs``,
each read from a WAL snapshot on the reader thread (``logs`` then asks the job's host
for its output).

``SnapshotReads`` is one part of ``daemon.Head``, given what it reads from (the store,
the head's reader thread, its host watch, meter, hosts and standing figures) and
answering on the caller's connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gputui.common.i18n import N_
from gputui.scheduler.head import actions, explain_reads, gpu_table, history_reads, usage_reads
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.read_args import LogArgs
from gputui.wire.words import say

if TYPE_CHECKING:
    from gputui.scheduler.head.batch import Batches
    from gputui.scheduler.head.hostops import HostOps
    from gputui.scheduler.head.settings import HeadSettings
    from gputui.scheduler.head.watch.hosts import HostWatch
    from gputui.scheduler.head.watch.meter import HeadMeter
    from gputui.scheduler.store.api import Store

log = logging.getLogger(__name__)

ESTIMATES_KEPT_S = 10.0
"""How long one ``estimates`` answer serves the requests that follow it."""


class SnapshotReads:
    """The read-only requests, each answered from a snapshot off the writer."""

    def __init__(
        self,
        *,
        store: Store,
        settings: HeadSettings,
        watch: HostWatch,
        meter: HeadMeter,
        hosts: HostOps,
        batch: Batches,
        clock: Callable[[], float],
        read: Callable[[Callable[[], Any]], Awaitable[Any]],
    ) -> None:
        self.store = store
        self.settings = settings
        self.watch = watch
        self.meter = meter
        self.hosts = hosts
        self.batch = batch
        self.clock = clock
        self._read = read
        """Runs a snapshot read on the head's reader thread (``Head._read``)."""
        self._estimates: tuple[float, int, dict[str, Any]] | None = None
        """The last ``estimates`` answer: when, for how many, what."""

    async def snapshot_read(self, conn: Connection, request: wire.Request) -> None:
        """``explain``, ``estimates``, ``quota``, ``usage``, ``report``, ``gpus`` and
        ``history``: from a snapshot, off the writer."""
        rules, slots, now = self.settings.rules, self.watch.slots(), self.clock()
        if request.op == "estimates" and (kept := self._kept_estimates(request, now)) is not None:
            conn.send(wire.response(request.id, kept))
            return
        problems = self.watch.card_problems() if request.op == "explain" else {}
        exempt = rules.sched.ownership.exempt_users
        flags = self.batch.flags.flags
        seen = gpu_table.Seen.now(self.watch, exempt, flags) if request.op == "gpus" else None
        metered = request.op in usage_reads.OPS or request.op == "history"
        counted = self.meter.pending() if metered else None
        standing = self.batch.standings.current  # the scheduler's own figures

        def answer() -> dict[str, Any]:
            with self.store.snapshot() as tx:
                if seen is not None:
                    return gpu_table.answer(tx, request.args, seen, rules.sched.placement)
                if counted is not None and request.op == "history":
                    private = rules.sched.private_data
                    args, caller = request.args, conn.caller
                    return history_reads.history(tx, caller, args, counted, now, private=private)
                if counted is not None and request.op == "usage":
                    return usage_reads.usage(tx, request.args, rules.sched, counted, now)
                if counted is not None:
                    sched = rules.sched
                    return usage_reads.report(
                        tx, request.args, sched, counted, now, standing=standing
                    )
                if request.op == "explain":
                    return explain_reads.explain_job(
                        tx,
                        conn.caller,
                        request.args,
                        config=rules.sched,
                        slots=slots,
                        now=now,
                        grace_s=rules.kill_grace_s,
                        standing=standing,
                        problems=problems,
                    )
                if request.op == "estimates":
                    return explain_reads.estimates(
                        tx,
                        request.args,
                        config=rules.sched,
                        slots=slots,
                        now=now,
                        grace_s=rules.kill_grace_s,
                        standing=standing,
                    )
                return explain_reads.quota_table(standing)

        try:
            body = await self._read(answer)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        except Exception:  # a bug or the store: say so, never leave the caller waiting
            log.exception("head: %s failed", request.op)
            conn.send(wire.error(request.id, "internal", say(N_("{op} failed"), op=request.op)))
            return
        if request.op == "estimates":
            self._estimates = (now, request.args.limit, body)
        conn.send(wire.response(request.id, body))

    def _kept_estimates(self, request: wire.Request, now: float) -> dict[str, Any] | None:
        """The last ``estimates`` answer, cut to this request's place in line, while it is under
        ``ESTIMATES_KEPT_S`` old and was made for as many or more: every console's
        week view asks each minute, and one projection serves them all."""
        if self._estimates is None:
            return None
        at, limit, body = self._estimates
        if not 0 <= now - at < ESTIMATES_KEPT_S or request.args.limit > limit:
            return None
        shown = [e for e in body["estimates"] if e["position"] <= request.args.limit]
        return {**body, "estimates": shown}

    async def logs(self, conn: Connection, request: wire.Request) -> None:
        args: LogArgs = request.args

        def target() -> tuple[str | None, int, int, str]:
            with self.store.snapshot() as tx:
                job = tx.job(args.job_id)
                if job is None:
                    raise wire.Refusal("unknown-job", say(N_("no job {job}"), job=args.job_id))
                caller = conn.caller
                if not (caller.owns(job.uid) or caller.admin):
                    raise wire.Refusal(
                        "denied",
                        say(N_("job {id} belongs to {user}"), id=job.id or 0, user=job.user),
                    )
                return job.host, job.id or 0, job.launches, job.state

        try:
            host, job_id, launch, state = await self._read(target)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        except Exception as exc:  # the store failed: say so, never leave the caller waiting
            log.error("head: log lookup failed: %s", exc)
            conn.send(wire.error(request.id, "store", say(N_("could not read the job"))))
            return
        if host is None or launch == 0:
            conn.send(
                wire.response(
                    request.id,
                    {
                        "data": "",
                        "offset": 0,
                        "ended": state in wire.FINAL_JOB_STATES,
                        "size": 0,
                        "state": state,
                        "run": launch,
                    },
                )
            )
            return
        answer = await self.hosts.job_log(
            host, actions.run_key(job_id, launch), args.offset, args.max_bytes
        )
        if not answer.ok:
            conn.send(wire.error(request.id, answer.code or "host", answer.message))
            return
        body = dict(answer.value)
        body["state"] = state
        body["run"] = launch  # which run's log this is: a requeued job's next run starts at 0
        conn.send(wire.response(request.id, body))
        await conn.drain()
