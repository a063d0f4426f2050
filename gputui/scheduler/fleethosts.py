"""``FleetHosts``: the head's ``HostOps`` served by a ``Fleet`` of helper sessions.

Snapshots reach the daemon through a per-host mailbox that keeps only the
newest one, so a slow database never stalls a host's stream nor grows memory.
Each live host is asked for its runs (``jobs``) every ``poll_s`` and whenever
it (re)connects; a launch that times out is settled by asking ``jobs`` too,
never by launching again blindly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from gputui.config import Config
from gputui.fleet.fleet import Fleet
from gputui.protocol import Result
from gputui.telemetry import HostSnapshot, HostStatus

from .hosts import HostAnswer
from .lifecycle import HostJob, Launch

LAUNCH_TIMEOUT_S = 15.0


def _job(obj: Any) -> HostJob | None:
    """A helper JobState dict -> ``HostJob`` (None for anything malformed)."""
    if not isinstance(obj, dict):
        return None
    key = obj.get("job_id")
    state = obj.get("state")
    if isinstance(key, bool) or not isinstance(key, int) or not isinstance(state, str):
        return None

    def num(name: str) -> float | None:
        value = obj.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if 0 <= value < 1e10 else None

    def small(name: str) -> int | None:
        value = obj.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value if 0 <= value < 2**31 else None

    def text(name: str, cap: int) -> str | None:
        value = obj.get(name)
        return value[:cap] if isinstance(value, str) else None

    return HostJob(
        key=key,
        state=state[:32],
        pid=small("pid"),
        exit_code=small("exit_code"),
        signal=text("signal", 16),
        started_at=num("started_at"),
        ended_at=num("ended_at"),
        timed_out=obj.get("timed_out") is True,
        log_path=text("log_path", 4096),
        error=text("error", 512),
    )


class FleetHosts:
    """The head's hosts over SSH (or local helpers), one ``Fleet``."""

    def __init__(
        self, config: Config, namespace: str, *, poll_s: float = 1.0, fleet: Fleet | None = None
    ) -> None:
        self.namespace = namespace
        self.fleet = fleet or Fleet(config)
        self.poll_s = poll_s
        self._latest: dict[str, HostSnapshot] = {}
        self._ready: asyncio.Event | None = None
        self._unsubscribe: Any = None
        self._poller: asyncio.Task[None] | None = None
        self._jobs: dict[str, tuple[Any, ...]] = {}

    async def start(self) -> None:
        self._ready = asyncio.Event()
        self._unsubscribe = self.fleet.subscribe(self._on_snapshot)
        await self.fleet.start()
        self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(BaseException):
                await self._poller
        if self._unsubscribe is not None:
            self._unsubscribe()
        await self.fleet.close()

    def _on_snapshot(self, snap: HostSnapshot) -> None:
        self._latest[snap.name] = snap
        if self._ready is not None:
            self._ready.set()

    async def updates(self) -> AsyncIterator[HostSnapshot]:
        assert self._ready is not None
        while True:
            await self._ready.wait()
            self._ready.clear()
            batch, self._latest = self._latest, {}
            for snap in batch.values():
                yield snap

    def login_user(self, host: str) -> str | None:
        link = self.fleet.links.get(host)
        if link is None:
            return None
        connector = getattr(link, "_connector", None)
        user = getattr(connector, "user", None)
        return user if isinstance(user, str) else None

    async def _ask(
        self, host: str, op: str, timeout: float | None = None, **fields: Any
    ) -> HostAnswer:
        link = self.fleet.links.get(host)
        if link is None:
            return HostAnswer(False, code="unknown-host", message=f"no host named {host!r}")
        body = {"type": "request", "op": op, "ns": self.namespace, **fields}

        def line_for(rid: int) -> str:
            return json.dumps({"id": rid, **body}, separators=(",", ":")) + "\n"

        try:
            answer = await (
                asyncio.wait_for(link.request(line_for), timeout)
                if timeout
                else link.request(line_for)
            )
        except asyncio.TimeoutError:
            return HostAnswer(False, code="timeout", message=f"{host} did not answer {op}")
        if isinstance(answer, Result):
            if answer.ok:
                return HostAnswer(True, value=answer.value or {})
            return HostAnswer(
                False, code=answer.code or "refused", message=(answer.error or "refused")[:300]
            )
        return HostAnswer(False, code=answer.code or "offline", message=answer.message)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            for name, link in list(self.fleet.links.items()):
                if link.snapshot.status not in (HostStatus.LIVE, HostStatus.STALE):
                    continue
                answer = await self._ask(name, "jobs", job_ids=None)
                if not answer.ok:
                    continue
                raw = answer.value.get("jobs") if isinstance(answer.value, dict) else None
                jobs = tuple(j for j in (_job(x) for x in (raw or [])[:4096]) if j is not None)
                if jobs != self._jobs.get(name):
                    self._jobs[name] = jobs
                    self._on_snapshot(link.snapshot)

    def reports(self, snap: HostSnapshot) -> tuple[HostJob, ...] | None:
        return self._jobs.get(snap.name)

    async def launch(self, spec: Launch) -> HostAnswer:
        answer = await self._ask(
            spec.host,
            "launch",
            job_id=spec.key,
            user=spec.user,
            argv=list(spec.argv),
            cwd=spec.cwd,
            env=dict(spec.env),
            gpu_uuids=list(spec.gpu_uuids),
            time_limit_s=spec.time_limit_s,
            grace_s=spec.grace_s,
        )
        if answer.ok:
            job = _job(answer.value)
            if job is None:
                return HostAnswer(
                    False, code="protocol", message="the helper's launch answer is malformed"
                )
            return HostAnswer(True, value=job)
        if answer.code in ("timeout", "offline"):
            settled = await self._ask(spec.host, "jobs", job_ids=[spec.key])
            if settled.ok:
                found = [
                    j
                    for j in (_job(x) for x in settled.value.get("jobs", []))
                    if j is not None and j.key == spec.key
                ]
                if found:
                    return HostAnswer(True, value=found[0])
        return answer

    async def signal_job(
        self, host: str, key: int, signal: str, grace_s: float | None
    ) -> HostAnswer:
        return await self._ask(host, "job_signal", job_id=key, signal=signal, grace_s=grace_s)

    async def job_log(self, host: str, key: int, offset: int, max_bytes: int) -> HostAnswer:
        return await self._ask(host, "job_log", job_id=key, offset=offset, max_bytes=max_bytes)

    async def forget(self, host: str, keys: Sequence[int]) -> HostAnswer:
        return await self._ask(host, "jobs_forget", job_ids=list(keys))
