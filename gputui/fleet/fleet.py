"""``Fleet``: every configured host, as one ``TelemetrySource`` and ``HostControl``.

One ``HostLink`` (one SSH connection and one long-lived helper, or for a ``local``
host the helper as a child process) per host, each in its own task on the loop the
fleet was started in (the Textual app's, the head's, or a headless benchmark's).
Connection set-up is bounded fleet-wide so a thousand hosts never trip sshd's
``MaxStartups``. Listeners get every new snapshot, on the loop; a daemon reads
``updates()`` instead, which a slow consumer cannot clog. Requests to helpers go
through ``request`` (typed, one model per op) and ``launch`` (which settles an
unanswered launch by asking the host).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gputui.common.tasks import cancel_and_wait
from gputui.config.models import Config, ResolvedHost
from gputui.fleet.backoff import LinkTiming
from gputui.fleet.hostkeys import GLOBAL_KNOWN_HOSTS, KnownHostsCache
from gputui.fleet.jumps import JumpPool
from gputui.fleet.link import HostLink
from gputui.fleet.stream import SnapshotStream
from gputui.telemetry import HostSnapshot, Listener, R, RequestOutcome
from gputui.wire.messages import (
    NAMESPACE,
    HelperRequest,
    IntervalRequest,
    IntervalResult,
    JobsRequest,
    JobState,
    LaunchRequest,
    ProcessSample,
    Signal,
    SignalRequest,
    SignalResult,
)

log = logging.getLogger(__name__)


__all__ = ["Fleet", "FleetSettings"]


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """What a fleet takes of hosts.yaml, read once where the fleet is built: below the
    ``Fleet``, the links and their timing get plain values and never read the
    configuration (a host is a ``ResolvedHost``: its own data, defaults applied)."""

    hosts: tuple[ResolvedHost, ...]
    interval: float
    """Seconds between samples (``refresh_interval``)."""
    stale_after_s: float
    """``health.stale_after_s``; each link raises it for a slow interval."""
    health_every_s: float
    """Seconds between a helper's health readings."""
    connect_concurrency: int
    """Connection set-ups in flight at once, fleet-wide."""

    @classmethod
    def of(cls, config: Config) -> FleetSettings:
        return cls(
            hosts=tuple(config.resolved()),
            interval=config.refresh_interval,
            stale_after_s=config.health.stale_after_s,
            health_every_s=config.health_every_s,
            connect_concurrency=config.connect_concurrency,
        )


class Fleet:
    """All hosts of a ``Config``, kept connected; a ``TelemetrySource`` and a ``HostControl``."""

    def __init__(
        self,
        config: Config,
        *,
        timing: LinkTiming | None = None,
        connect_options: Mapping[str, Any] | None = None,
        global_known_hosts: str | None = GLOBAL_KNOWN_HOSTS,
        jobs_namespace: str | None = None,
        helper_args: Sequence[str] = (),
    ) -> None:
        """``jobs_namespace``: the head's namespace token; every helper then watches its
        jobs (``--jobs NS``) and pushes them, so each snapshot carries the host's job
        list. ``helper_args``: more arguments for every helper, after the others.

        ``timing``, ``connect_options`` (extra asyncssh options) and
        ``global_known_hosts`` (OpenSSH's GlobalKnownHostsFile) exist for tests.
        A namespace that is not ``[a-z0-9]{8,32}`` raises ``ValueError``.
        """
        args = list(helper_args)
        if jobs_namespace is not None:
            if not NAMESPACE.fullmatch(jobs_namespace):
                raise ValueError(
                    f"jobs namespace must be 8 to 32 of a-z and 0-9, not {jobs_namespace!r}"
                )
            args += ["--jobs", jobs_namespace]
        self.helper_args: tuple[str, ...] = tuple(args)
        """What every helper is started with, after its sim and interval arguments."""
        self.settings = FleetSettings.of(config)
        self._timing = timing or LinkTiming()
        self._connect_options = dict(connect_options or {})
        self._listeners: tuple[Listener, ...] = ()
        self._tasks: list[asyncio.Task[None]] = []
        self._links: dict[str, HostLink] = {}
        self._gate: asyncio.Semaphore | None = None
        self._streams: set[SnapshotStream] = set()
        self._known_hosts = KnownHostsCache(global_known_hosts)
        self.jumps = JumpPool()
        """Shared bastion connections (one per ProxyJump destination)."""
        self._started = False

    # -- TelemetrySource ---------------------------------------------------------------

    def snapshots(self) -> Mapping[str, HostSnapshot]:
        if not self._links:
            return {
                h.name: HostSnapshot(
                    name=h.name, address=h.address, pool=h.pool, labels=dict(h.labels)
                )
                for h in self.settings.hosts
            }
        return {name: link.snapshot for name, link in self._links.items()}

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

        return unsubscribe

    def updates(self, *, initial: bool = True) -> SnapshotStream:
        """Every host's changes as an async iterator of snapshots, for a daemon.

        A slow consumer gets each host's latest snapshot when it comes back for more,
        never a backlog: at most one per host is held (see ``SnapshotStream``). With
        ``initial``, every host's current snapshot is pending from the start. The
        stream ends when closed (``async with fleet.updates() as updates: async for
        snapshot in updates: ...``) or when the fleet closes, after the STOPPED ones.
        """
        stream = SnapshotStream(self.snapshots().values() if initial else ())
        unsubscribe = self.subscribe(stream.put)
        self._streams.add(stream)

        def on_close() -> None:
            unsubscribe()
            self._streams.discard(stream)

        stream.on_close(on_close)
        return stream

    async def start(self) -> None:
        """Create one task per host on the running loop; returns at once."""
        if self._started:
            return
        self._started = True
        settings = self.settings
        self._gate = asyncio.Semaphore(settings.connect_concurrency)
        # Each link raises stale_after_s to 2.5 sample intervals and its hung limit to
        # at least 4 (backoff.thresholds): a slow refresh must not look like a fault.
        for host in settings.hosts:
            self._links[host.name] = HostLink(
                host,
                interval=settings.interval,
                stale_after=settings.stale_after_s,
                publish=self._dispatch,
                gate=self._gate,
                known_hosts=self._known_hosts,
                jumps=self.jumps,
                timing=self._timing,
                connect_options=self._connect_options,
                helper_args=self.helper_args,
                health_every=settings.health_every_s,
            )
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(link.run(), name=f"gputui-host-{name}")
            for name, link in self._links.items()
        ]

    async def close(self) -> None:
        """Stop every link: helpers get stdin EOF, connections close, tasks end."""
        links = list(self._links.values())
        results = await asyncio.gather(*(link.close() for link in links), return_exceptions=True)
        for link, result in zip(links, results, strict=True):
            if isinstance(result, Exception):
                log.warning("host %s: error while closing: %s", link.name, result)
        await cancel_and_wait(self._tasks)
        self._tasks = []
        await self.jumps.close()
        for link in links:
            link.mark_stopped()
        for stream in list(self._streams):
            stream.close()

    # -- extras ------------------------------------------------------------------------

    @property
    def links(self) -> Mapping[str, HostLink]:
        return self._links

    def samples_received(self) -> dict[str, int]:
        """Decoded samples per host since start (cheap counters for benchmarks)."""
        return {name: link.samples_received for name, link in self._links.items()}

    # -- HostControl ------------------------------------------------------------------

    def retry_now(self, host: str | None = None) -> None:
        """Reconnect ``host`` (or every host that is waiting) without the backoff wait."""
        for name, link in self._links.items():
            if host is None or name == host:
                link.retry_now()

    async def request(self, host: str, request: HelperRequest[R]) -> RequestOutcome[R]:
        """Send ``request`` to ``host``'s helper: its typed result, or why there is none.

        See ``HostLink.request`` for what ``timeout`` and ``lost`` mean; a launch is
        better sent with ``launch``, which resolves them.
        """
        link = self._links.get(host)
        if link is None:
            return RequestOutcome(False, f"no host named {host!r}", "unknown-host")
        return await link.request(request)

    async def signal_process(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> RequestOutcome[SignalResult]:
        request = SignalRequest(
            pid=process.pid,
            signal=signal,
            gpu_uuid=gpu_uuid,
            uid=process.uid,
            start_ticks=process.start_ticks,
        )
        return await self.request(host, request)

    async def set_refresh_interval(
        self, seconds: float
    ) -> dict[str, RequestOutcome[IntervalResult]]:
        """Ask every connected helper to sample every ``seconds``."""
        names = list(self._links)
        try:
            IntervalRequest(seconds=seconds)
        except ValidationError:
            refused: RequestOutcome[IntervalResult] = RequestOutcome(
                False, f"{seconds!r} is not an interval in seconds", "bad-request"
            )
            return dict.fromkeys(names, refused)
        results = await asyncio.gather(
            *(self._links[n].set_interval(seconds) for n in names), return_exceptions=True
        )
        return {
            name: r if isinstance(r, RequestOutcome) else RequestOutcome(False, str(r))
            for name, r in zip(names, results, strict=True)
        }

    async def launch(self, host: str, request: LaunchRequest) -> RequestOutcome[JobState]:
        """Launch a job, and settle an unanswered launch by asking the host.

        A launch is keyed by its job id on the host (never started twice), so when its
        answer does not come (``timeout``, ``lost``) this asks ``jobs`` for that id
        and returns what the host says, with code ``resolved``: the job's state if it
        lists it, ``unknown-job`` if it does not (not started, or not yet: launching
        again is safe), or ``unknown`` if that question went unanswered too (ask again
        once the host is back). It never guesses.
        """
        outcome = await self.request(host, request)
        if outcome.code not in ("timeout", "lost"):
            return outcome
        job = request.job_id
        asked = await self.request(host, JobsRequest(ns=request.ns, job_ids=[job]))
        if not asked.ok or asked.value is None:
            text = (
                f"launch of job {job} on {host} went unanswered ({outcome.message}), and so "
                f"did the question after it ({asked.message}): its state is unknown"
            )
            return RequestOutcome(False, text, "unknown")
        found = next((j for j in asked.value.jobs if j.job_id == job), None)
        if found is None:
            text = (
                f"launch of job {job} on {host} went unanswered; {host} lists no job {job}"
                " (not started, or not yet): launching it again is safe"
            )
            return RequestOutcome(False, text, "unknown-job")
        text = f"launch of job {job} on {host} went unanswered; {host} says it is {found.state}"
        return RequestOutcome(True, text, "resolved", found)

    def _dispatch(self, snapshot: HostSnapshot) -> None:
        for listener in self._listeners:
            try:
                listener(snapshot)
            except Exception:  # one bad listener must not stop the others or the link
                log.exception("snapshot listener failed")
