"""``HeadBackend``: the ``SchedulerBackend`` that is gputui's own head.

Each method is one request to the head, its arguments those of the head's wire.
The same class serves the CLI and the console: over the blocking client
(``sync.HeadClient``) each method returns the answer; over the asyncio one
(``aio.AsyncHeadClient``) it returns an awaitable of it (``console_backend``).

Two extensions belong to the head alone, outside ``SchedulerBackend`` (as
``SessionBackend``'s claim holding does): ``submit``'s ``env`` (the job's own
environment variables) and ``cluster`` (the state now, without subscribing). The
demo, which starts a head of its own, seeds it with them; a caller that holds only a
``SchedulerBackend`` cannot reach them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic

from gputui.common.jobenv import JobSetup
from gputui.scheduler.client.backend import (
    ANSWER_WITHIN_S,
    CAPABILITIES,
    Answer,
    AsyncBackend,
    Call,
    P_co,
    R_co,
    Transport,
)

if TYPE_CHECKING:
    from gputui.scheduler.client.aio import AsyncHeadClient


class HeadBackend(Generic[R_co, P_co]):
    """The head, reached through ``transport`` (a blocking or an asyncio client)."""

    def __init__(self, transport: Transport[R_co, P_co], *, local: bool = True) -> None:
        self._transport = transport
        self._local = local

    @property
    def name(self) -> str:
        return "head"

    @property
    def local(self) -> bool:
        return self._local

    def supports(self, capability: str) -> bool:
        return capability in CAPABILITIES

    def _send(
        self,
        op: str,
        args: Answer,
        timeout: float | None,
        *,
        bound: bool = False,
        on_push: Callable[[Answer], None] | None = None,
    ) -> R_co:
        return self._transport.send(Call(op, args, timeout, bound, on_push))

    # -- the queue ----------------------------------------------------------------------

    def queue(
        self,
        *,
        all: bool = False,
        user: str | None = None,
        limit: int | None = None,
        after: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        return self._send("queue", _listing(all, user, limit, after), timeout)

    def submit(
        self,
        *,
        argv: Sequence[str],
        gpus: int = 1,
        cwd: str | None = None,
        preemptible: bool = False,
        pool: str | None = None,
        host: str | None = None,
        name: str | None = None,
        time_limit_s: float | None = None,
        priority: str | None = None,
        project: str | None = None,
        after: Sequence[int] | None = None,
        after_ok: bool = False,
        setup: JobSetup | None = None,
        array: str | None = None,
        script: str | None = None,
        output: str | None = None,
        env: Mapping[str, str] | None = None,
        booking: int | None = None,
        mig: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        """``setup``: its environment variables, Python environment and container;
        ``env``: more environment variables (over ``setup``'s); ``booking``: run on that
        booking's cards (``--booking ID``)."""
        body: Answer = {"argv": list(argv), "gpus": gpus}
        if cwd is not None:
            body["cwd"] = cwd
        body["preemptible"] = preemptible
        optional = {
            "pool": pool,
            "host": host,
            "name": name,
            "time_limit_s": time_limit_s,
            "priority": priority,
            "project": project,
            "array": array,
            "script": script,
            "output": output,
            "mig": mig,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        if after:
            body["after"] = list(after)
            body["after_ok"] = after_ok
        if setup:
            body.update(setup.args())
        if env:
            body["env"] = {**body.get("env", {}), **env}
        if booking is not None:
            body["booking"] = booking
        return self._send("submit", body, timeout)

    def cancel(
        self,
        job_id: int,
        *,
        reason: str | None = None,
        task: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        """``task``: one task of array ``job_id`` (``cancel 12_7``); without it, an
        array's id cancels all of it that has not ended."""
        body = _act(job_id, reason)
        if task is not None:
            body["task"] = task
        return self._send("cancel", body, timeout)

    def kill(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("kill", _act(job_id, reason), timeout)

    def preempt(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("preempt", _act(job_id, reason), timeout)

    def hold(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("hold", _act(job_id, reason), timeout)

    def release_hold(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("release_hold", _act(job_id, reason), timeout)

    def requeue(
        self,
        job_id: int,
        *,
        reason: str | None = None,
        force: bool = False,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body = _act(job_id, reason)
        if force:
            body["force"] = True
        return self._send("requeue", body, timeout)

    def show(self, job_id: int, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("show", {"job_id": job_id}, timeout)

    def logs(
        self,
        job_id: int,
        *,
        offset: int = 0,
        max_bytes: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"job_id": job_id, "offset": offset}
        if max_bytes is not None:
            body["max_bytes"] = max_bytes
        return self._send("logs", body, timeout)

    def wait(self, job_id: int, *, timeout: float | None = None) -> R_co:
        return self._send("wait", {"job_id": job_id}, timeout)

    def explain(self, job_id: int, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("explain", {"job_id": job_id}, timeout)

    def estimates(self, *, limit: int = 100, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        """The estimated start and end of the first ``limit`` requests in line."""
        return self._send("estimates", {"limit": limit}, timeout)

    # -- claims ------------------------------------------------------------------------

    def claims(
        self,
        *,
        all: bool = False,
        user: str | None = None,
        limit: int | None = None,
        after: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        return self._send("claims", _listing(all, user, limit, after), timeout)

    def claim(
        self,
        *,
        gpus: int | None = None,
        gpu_refs: Sequence[str] = (),
        pool: str | None = None,
        model: str | None = None,
        host: str | None = None,
        project: str | None = None,
        duration_s: float | None = None,
        note: str = "",
        wait: bool = True,
        mig: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"note": note, "wait": wait}
        if gpu_refs:
            body["gpu_refs"] = list(gpu_refs)
        if gpus is not None:
            body["gpus"] = gpus
        named = {"pool": pool, "model": model, "host": host, "project": project, "mig": mig}
        body.update({key: value for key, value in named.items() if value})
        if duration_s:
            body["duration_s"] = duration_s
        return self._send("claim", body, timeout)

    def book(
        self,
        *,
        start: float,
        duration_s: float,
        gpus: int | None = None,
        gpu_refs: Sequence[str] = (),
        pool: str | None = None,
        model: str | None = None,
        host: str | None = None,
        note: str = "",
        maint: bool = False,
        reason: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"start": start, "duration_s": duration_s, "note": note, "maint": maint}
        if gpu_refs:
            body["gpu_refs"] = list(gpu_refs)
        if gpus is not None:
            body["gpus"] = gpus
        named = {"pool": pool, "model": model, "host": host, "reason": reason}
        body.update({key: value for key, value in named.items() if value})
        return self._send("book", body, timeout)

    def unbook(
        self,
        booking_id: int,
        *,
        reason: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"booking_id": booking_id}
        if reason:
            body["reason"] = reason
        return self._send("unbook", body, timeout)

    def bookings(
        self,
        *,
        all: bool = False,
        since: float | None = None,
        until: float | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"all": all}
        if since is not None:
            body["since"] = since
        if until is not None:
            body["until"] = until
        return self._send("bookings", body, timeout)

    def release(
        self,
        *,
        claim_ids: Sequence[int] = (),
        gpu_refs: Sequence[str] = (),
        all: bool = False,
        reason: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"claim_ids": list(claim_ids), "gpu_refs": list(gpu_refs), "all": all}
        if reason:
            body["reason"] = reason
        return self._send("release", body, timeout)

    def env(self, host: str | None = None, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("env", {} if host is None else {"host": host}, timeout)

    def hosts(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("hosts", {}, timeout)

    # -- accounting --------------------------------------------------------------------

    def quota(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("quota", {}, timeout)

    def usage(
        self,
        *,
        since: float,
        until: float,
        by: str = "user",
        hourly: bool = False,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"since": since, "until": until, "by": by}
        if hourly:
            body["hourly"] = True
        return self._send("usage", body, timeout)

    def report(
        self, *, since: float, until: float, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("report", {"since": since, "until": until}, timeout)

    def slurm_energy(
        self, *, since: float, until: float, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        """What a head that relays Slurm metered of Slurm's jobs (``usage`` on Slurm)."""
        return self._send("slurm_energy", {"since": since, "until": until}, timeout)

    def history(
        self,
        *,
        since: float,
        until: float,
        user: str | None = None,
        all_users: bool = False,
        states: Sequence[str] = (),
        limit: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"since": float(since), "until": float(until)}
        if user is not None:
            body["user"] = user
        if all_users:
            body["all_users"] = True
        if states:
            body["states"] = list(states)
        if limit is not None:
            body["limit"] = limit
        return self._send("history", body, timeout)

    # -- the cards (admins) --------------------------------------------------------------

    def drain(
        self, target: str, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("drain", _target(target, reason), timeout)

    def undrain(
        self, target: str, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("undrain", _target(target, reason), timeout)

    def unfence(
        self, target: str, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("unfence", _target(target, reason), timeout)

    def force_free(
        self,
        *,
        host: str,
        gpu: str,
        reason: str,
        reset: bool = False,
        on_step: Callable[[Any], None] | None = None,
        timeout: float | None = None,
    ) -> R_co:
        def step(push: Answer) -> None:
            if on_step is not None and push.get("push") == "force-free":
                on_step(push.get("step"))

        body: Answer = {"host": host, "gpu": gpu, "reason": reason, "reset": reset}
        # Its steps come as pushes on this connection: never sent again on another.
        return self._send("force_free", body, timeout, bound=True, on_push=step)

    # -- records -------------------------------------------------------------------------

    def audit(
        self,
        *,
        since: float | None = None,
        limit: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {}
        if since is not None:
            body["since"] = since
        if limit is not None:
            body["limit"] = limit
        return self._send("audit", body, timeout)

    def whoami(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("whoami", {}, timeout)

    def notices(self, *, all: bool = False, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("notices", {"all": all}, timeout)

    def notify_set(
        self,
        url: str,
        *,
        secret: str | None = None,
        events: Sequence[str] | None = None,
        name: str = "default",
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"url": url, "name": name}
        if secret is not None:
            body["secret"] = secret
        if events is not None:
            body["events"] = list(events)
        return self._send("notify_set", body, timeout)

    def notify_clear(
        self, name: str | None = None, *, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("notify_clear", {} if name is None else {"name": name}, timeout)

    def notify_show(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("notify_show", {}, timeout)

    def notify_test(
        self, name: str | None = None, *, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("notify_test", {} if name is None else {"name": name}, timeout)

    def health(
        self, hosts: Sequence[str] | None = None, *, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co:
        return self._send("health", {} if hosts is None else {"hosts": list(hosts)}, timeout)

    def health_ack(self, key: str, note: str, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("health_ack", {"key": key, "note": note}, timeout)

    def gpus(
        self,
        *,
        pool: str | None = None,
        free: bool = False,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"free": free}
        if pool is not None:
            body["pool"] = pool
        return self._send("gpus", body, timeout)

    def incident(
        self,
        host: str,
        *,
        since: float,
        gpu: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        body: Answer = {"host": host, "since": since}
        if gpu is not None:
            body["gpu"] = gpu
        return self._send("incident", body, timeout)

    # -- the state as it changes -----------------------------------------------------------

    def subscribe(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        return self._send("subscribe", {}, timeout)

    def pushes(self) -> P_co:
        return self._transport.pushes()

    def cluster(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        """The head's state now, as ``subscribe`` answers it, but without subscribing:
        no pushes follow, and the notices kept for this user stay kept for their
        console (the head's own extension)."""
        return self._send("cluster", {}, timeout)


def _listing(all: bool, user: str | None, limit: int | None, after: int | None) -> Answer:
    body: Answer = {"all": all}
    if limit is not None:
        body["limit"] = limit
    if user:
        body["user"] = user
    if after is not None:
        body["after"] = after
    return body


def _act(job_id: int, reason: str | None) -> Answer:
    body: Answer = {"job_id": job_id}
    if reason:
        body["reason"] = reason
    return body


def _target(target: str, reason: str | None) -> Answer:
    body: Answer = {"target": target}
    if reason is not None:
        body["reason"] = reason
    return body


def console_backend(client: AsyncHeadClient, *, local: bool) -> AsyncBackend:
    """The head over the console's asyncio connection (``local``: on this machine)."""
    return HeadBackend(client, local=local)
