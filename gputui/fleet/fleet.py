"""``Fleet``: every configured host over SSH, as one ``TelemetrySource``.

One ``HostLink`` (one connection, one long-lived helper) per host, each in its own
task on the loop the fleet was started in (the Textual app's, or a headless
benchmark's). Connection set-up is bounded fleet-wide so a thousand hosts never
trip sshd's ``MaxStartups``. Listeners get every new snapshot, on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from gputui.config import Config
from gputui.protocol import ProcessSample, Signal
from gputui.telemetry import HostSnapshot, Listener, SignalOutcome

from .backoff import LinkTiming
from .hostkeys import GLOBAL_KNOWN_HOSTS, KnownHostsCache
from .jumps import JumpPool
from .link import HostLink

log = logging.getLogger(__name__)


__all__ = ["Fleet"]


class Fleet:
    """All hosts of a ``Config``, kept connected; implements ``TelemetrySource``."""

    def __init__(
        self,
        config: Config,
        *,
        timing: LinkTiming | None = None,
        connect_options: Mapping[str, Any] | None = None,
        global_known_hosts: str | None = GLOBAL_KNOWN_HOSTS,
    ) -> None:
        """``timing``, ``connect_options`` (extra asyncssh options) and
        ``global_known_hosts`` (OpenSSH's GlobalKnownHostsFile) exist for tests."""
        self.config = config
        self._timing = timing or LinkTiming()
        self._connect_options = dict(connect_options or {})
        self._listeners: tuple[Listener, ...] = ()
        self._tasks: list[asyncio.Task[None]] = []
        self._links: dict[str, HostLink] = {}
        self._gate: asyncio.Semaphore | None = None
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
                for h in self.config.resolved()
            }
        return {name: link.snapshot for name, link in self._links.items()}

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

        return unsubscribe

    async def start(self) -> None:
        """Create one task per host on the running loop; returns at once."""
        if self._started:
            return
        self._started = True
        self._gate = asyncio.Semaphore(self.config.connect_concurrency)
        interval = self.config.refresh_interval
        # Each link raises stale_after_s to 2.5 sample intervals and its hung limit to
        # at least 4 (backoff.thresholds): a slow refresh must not look like a fault.
        stale_after = self.config.health.stale_after_s
        for host in self.config.resolved():
            self._links[host.name] = HostLink(
                host,
                interval=interval,
                stale_after=stale_after,
                publish=self._dispatch,
                gate=self._gate,
                known_hosts=self._known_hosts,
                jumps=self.jumps,
                timing=self._timing,
                connect_options=self._connect_options,
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
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []
        await self.jumps.close()
        for link in links:
            link.mark_stopped()

    async def signal_process(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> SignalOutcome:
        link = self._links.get(host)
        if link is None:
            return SignalOutcome(False, f"no host named {host!r}", "unknown-host")
        return await link.signal(gpu_uuid, process, signal)

    # -- extras ------------------------------------------------------------------------

    @property
    def links(self) -> Mapping[str, HostLink]:
        return self._links

    def samples_received(self) -> dict[str, int]:
        """Decoded samples per host since start (cheap counters for benchmarks)."""
        return {name: link.samples_received for name, link in self._links.items()}

    def retry_now(self, host: str | None = None) -> None:
        """Reconnect ``host`` (or every host that is waiting) without the backoff wait."""
        for name, link in self._links.items():
            if host is None or name == host:
                link.retry_now()

    async def set_refresh_interval(self, seconds: float) -> dict[str, SignalOutcome]:
        """Ask every connected helper to sample every ``seconds``."""
        names = list(self._links)
        results = await asyncio.gather(
            *(self._links[n].set_interval(seconds) for n in names), return_exceptions=True
        )
        return {
            name: r if isinstance(r, SignalOutcome) else SignalOutcome(False, str(r))
            for name, r in zip(names, results, strict=True)
        }

    def _dispatch(self, snapshot: HostSnapshot) -> None:
        for listener in self._listeners:
            try:
                listener(snapshot)
            except Exception:  # one bad listener must not stop the others or the link
                log.exception("snapshot listener failed")
