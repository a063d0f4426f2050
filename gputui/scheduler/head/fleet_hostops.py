"""``FleetHosts``: the head's ``HostOps`` served by a ``Fleet`` of helper sessions.

Every helper is started with ``--jobs NS`` (the database's namespace), so it pushes
the state of the head's runs itself: after its ``hello`` and whenever a run
changes. Snapshots reach the daemon through the fleet's coalescing stream (the
newest per host), so a slow database never stalls a host nor grows memory. A
launch that goes unanswered is settled by asking the host (``Fleet.launch``),
never by launching again blindly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from gputui.config.models import Config
from gputui.fleet.fleet import Fleet
from gputui.fleet.stream import SnapshotStream
from gputui.fleet.terminal import open_pty
from gputui.scheduler.head.hostops import GpuProcess, HostAnswer, TerminalLine
from gputui.scheduler.head.lifecycle import HostJob, Launch
from gputui.telemetry import HostSnapshot, RequestOutcome
from gputui.wire.messages import (
    JobLogRequest,
    JobsForgetRequest,
    JobSignalRequest,
    JobState,
    LaunchRequest,
    Pty,
    SignalRequest,
)
from gputui.wire.ops import ClocksRequest, HelperRequest, HoldersRequest, ResetRequest


def host_job(state: JobState) -> HostJob:
    return HostJob(
        key=state.job_id,
        state=state.state,
        pid=state.pid,
        exit_code=state.exit_code,
        signal=state.signal,
        started_at=state.started_at,
        ended_at=state.ended_at,
        timed_out=state.timed_out,
        idle_out=state.idle_out,
        log_path=state.log_path or None,
        error=state.error,
        container_id=state.container_id,
    )


_R = TypeVar("_R", bound=BaseModel)
PTY_CONNECT_WAIT_S = 10.0
"""How long an attach waits for its host's connection (the client waits 30 s)."""


def _answer(outcome: RequestOutcome[object]) -> HostAnswer:
    if outcome.ok:
        return HostAnswer(True, value=outcome.value)
    return HostAnswer(False, code=outcome.code or "refused", message=outcome.message)


class FleetHosts:
    """The head's hosts over SSH (or local helpers): one ``Fleet``."""

    def __init__(self, config: Config, namespace: str, *, fleet: Fleet | None = None) -> None:
        self.namespace = namespace
        self.fleet = fleet or Fleet(config, jobs_namespace=namespace)
        self._stream: SnapshotStream | None = None
        self._converted: dict[str, tuple[object, tuple[HostJob, ...]]] = {}

    async def start(self) -> None:
        self._stream = self.fleet.updates()
        await self.fleet.start()

    async def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        await self.fleet.close()

    async def updates(self) -> AsyncIterator[HostSnapshot]:
        assert self._stream is not None, "start() first"
        async for snapshot in self._stream:
            yield snapshot

    def reports(self, snapshot: HostSnapshot) -> tuple[HostJob, ...] | None:
        """The host's runs as ``HostJob``s; the same tuple while its list is unchanged."""
        if snapshot.jobs_seen_at is None:
            return None
        seen = self._converted.get(snapshot.name)
        if seen is not None and seen[0] is snapshot.jobs:
            return seen[1]
        jobs = tuple(host_job(j) for j in snapshot.jobs)
        self._converted[snapshot.name] = (snapshot.jobs, jobs)
        return jobs

    def login_user(self, host: str) -> str | None:
        link = self.fleet.links.get(host)
        return None if link is None else link.login_user

    async def launch(self, spec: Launch) -> HostAnswer:
        request = LaunchRequest(
            ns=self.namespace,
            job_id=spec.key,
            user=spec.user,
            uid=spec.uid,
            argv=list(spec.argv),
            cwd=spec.cwd,
            env={**spec.env, "GPUTUI_JOB_ID": str(spec.job_id)},
            gpu_uuids=list(spec.gpu_uuids),
            time_limit_s=spec.time_limit_s,
            grace_s=spec.grace_s,
            conda=spec.conda,
            venv=spec.venv,
            image=spec.image,
            runtime=spec.runtime,
            script=spec.script,
            output=spec.output,
            pty=spec.pty,
            idle_s=spec.idle_s,
        )
        outcome = await self.fleet.launch(spec.host, request)
        if outcome.ok and outcome.value is not None:
            return HostAnswer(True, value=host_job(outcome.value))
        if outcome.code == "unknown-job":
            # The host has not heard of it: unconfirmed, and safe to send again.
            return HostAnswer(False, code="offline", message=outcome.message)
        return HostAnswer(False, code=outcome.code or "refused", message=outcome.message)

    async def signal_job(
        self, host: str, key: int, signal: str, grace_s: float | None
    ) -> HostAnswer:
        request = JobSignalRequest(ns=self.namespace, job_id=key, signal=signal, grace_s=grace_s)
        return _answer(await self.fleet.request(host, request))

    async def signal_process(self, host: str, process: GpuProcess, signal: str) -> HostAnswer:
        try:
            request = SignalRequest.model_validate(
                {
                    "pid": process.pid,
                    "signal": signal,
                    "gpu_uuid": process.gpu_uuid,
                    "uid": process.uid,
                    "start_ticks": process.start_ticks,
                }
            )
        except ValidationError as exc:
            why = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
            return HostAnswer(False, code="bad-request", message=f"not sent: {why}")
        outcome = await self.fleet.request(host, request)
        if outcome.ok and outcome.value is not None:
            return HostAnswer(True, value={"method": outcome.value.method, "pid": process.pid})
        return _answer(outcome)

    async def job_log(self, host: str, key: int, offset: int, max_bytes: int) -> HostAnswer:
        request = JobLogRequest(ns=self.namespace, job_id=key, offset=offset, max_bytes=max_bytes)
        outcome = await self.fleet.request(host, request)
        if not outcome.ok or outcome.value is None:
            return _answer(outcome)
        v = outcome.value
        return HostAnswer(
            True, value={"data": v.data, "offset": v.offset, "size": v.size, "ended": v.ended}
        )

    async def holders(self, host: str, index: int) -> HostAnswer:
        return await self._dumped(host, HoldersRequest, {"index": index})

    async def reset_gpu(self, host: str, index: int, uuid: str) -> HostAnswer:
        return await self._dumped(host, ResetRequest, {"index": index, "uuid": uuid})

    async def clocks(self, host: str, index: int, uuid: str, action: str) -> HostAnswer:
        args = {"index": index, "uuid": uuid, "action": action}
        return await self._dumped(host, ClocksRequest, args)

    async def _dumped(
        self, host: str, kind: type[HelperRequest[_R]], args: dict[str, object]
    ) -> HostAnswer:
        """A request about one GPU (``index``, and ``uuid`` where it acts) made from
        ``args``, sent, and its result as JSON values; or why not (a bad value, a uuid
        that is not one, is never sent: it is named)."""
        try:
            request = kind.model_validate(args)
        except ValidationError as exc:
            loc = exc.errors()[0]["loc"] if exc.errors() else ()
            name = str(loc[0]) if loc else "request"
            return HostAnswer(
                False, code="bad-request", message=f"not sent: bad {name} {args.get(name)!r}"
            )
        outcome = await self.fleet.request(host, request)
        if not outcome.ok or outcome.value is None:
            return _answer(outcome)
        return HostAnswer(True, value=outcome.value.model_dump(mode="json"))

    async def forget(self, host: str, keys: Sequence[int]) -> HostAnswer:
        if not keys:
            return HostAnswer(True, value=None)
        request = JobsForgetRequest(ns=self.namespace, job_ids=list(keys))
        return _answer(await self.fleet.request(host, request))

    async def open_pty(
        self, host: str, key: int, rows: int, cols: int, listener: Callable[[Pty], None]
    ) -> tuple[HostAnswer, TerminalLine | None]:
        link = self.fleet.links.get(host)
        if link is None:
            return HostAnswer(False, code="unknown-host", message=f"no host named {host!r}"), None
        # Someone at a keyboard, perhaps just after the head (re)started: the host's
        # connection gets a moment to come up rather than an "offline" at once.
        await link.wait_session(PTY_CONNECT_WAIT_S)
        outcome, line = await open_pty(
            link, self.namespace, job_id=key, rows=rows, cols=cols, listener=listener
        )
        if line is None:
            return _answer(outcome), None
        return HostAnswer(True, value={"aid": line.aid}), line
