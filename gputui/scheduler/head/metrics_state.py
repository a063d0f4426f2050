"""What ``/metrics`` shows, as immutable values the head's loop hands out (``FleetView``).

A scrape never reads the database and never reads the loop's own dictionaries from
the HTTP thread. The HTTP thread asks the loop for a view (``MetricsFeed.view``, run
on the loop through ``call_soon_threadsafe``); the view holds only frozen values: the
hosts' latest samples (frozen pydantic models), copies of the small maps, and the
latest ``QueueFacts``. The collector (``metrics``) renders it on the HTTP thread.

``QueueFacts`` (the queue, who holds each GPU, the accounting's all-time totals) come
from the database, so they are read on the reader thread: after every commit that
changed the state and every ``metrics_refresh_s`` (for the hours that grow while
jobs run), one read at a time, exactly as ``cluster`` and ``report`` read them.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from gputui.scheduler.head.gpufacts import GpuFacts
from gputui.scheduler.head.views import json_list
from gputui.scheduler.policy import accounting
from gputui.scheduler.policy.meter import MAX_GAP_S, Metered, clamp_power
from gputui.scheduler.server import wire
from gputui.scheduler.store.api import Store, Tx
from gputui.telemetry import HostSnapshot
from gputui.wire.messages import GpuSample, Sample

log = logging.getLogger("gputui.scheduler.head.daemon")

LINK_COUNTERS = ("crc_flit_errors", "crc_data_errors", "replay_errors", "recovery_errors")
"""The NVLink error counters ``/metrics`` sums over a GPU's links."""
_counters = attrgetter(*LINK_COUNTERS)
MAX_REASON = 64
"""A waiting job's reason as a label value: cut to this many characters."""


@dataclass(frozen=True, slots=True)
class Holding:
    """A job or a claim that holds a GPU: its labels on that GPU's series."""

    kind: str
    id: int
    user: str


@dataclass(frozen=True, slots=True)
class QueueFacts:
    """The queue and the accounting as the database said at ``at``."""

    at: float
    waiting: Mapping[tuple[str, str], int]
    """(class, reason) -> waiting jobs (``queued`` and ``held``)."""
    running: int
    """Jobs in a live state (starting, running, killing, preempting, unknown)."""
    claims_active: int
    claims_waiting: int
    holders: Mapping[str, Holding]
    """GPU uuid -> the job or claim holding it."""
    alloc_gpu_h: float
    busy_gpu_h: float
    energy_kwh: float
    """All time, as ``report``'s ``cluster`` figures count them (stored, open, pending)."""


@dataclass(frozen=True, slots=True)
class HostView:
    name: str
    hostname: str
    """The name the host gives itself in its hello (its configured name until one came)."""
    live: bool
    sample: Sample | None
    readings: Mapping[str, GpuSample]
    """GPU uuid -> its latest health reading."""


@dataclass(frozen=True, slots=True)
class FleetView:
    hosts: tuple[HostView, ...]
    gpus: Mapping[str, GpuFacts]
    drained_hosts: frozenset[str]
    last_xid: Mapping[str, int]
    energy_mj: Mapping[str, float]
    """GPU uuid -> millijoules counted from its power samples since the head started."""
    queue: QueueFacts | None = None
    pools: Mapping[str, str] = field(default_factory=dict)
    links: Mapping[str, tuple[int | None, ...]] = field(default_factory=dict)
    """GPU uuid -> its NVLinks' error counters summed (``link_totals``)."""


def link_totals(health: GpuSample) -> tuple[int | None, ...]:
    """Each of ``LINK_COUNTERS`` summed over a GPU's links (None: no link has it)."""
    links = health.nvlinks
    if not links:
        return (None,) * len(LINK_COUNTERS)
    out: list[int | None] = []
    for column in zip(*map(_counters, links), strict=True):  # one counter, every link
        counts = [count for count in column if count is not None]
        out.append(sum(counts) if counts else None)
    return tuple(out)


def read_queue(tx: Tx, pending: Metered, now: float) -> QueueFacts:
    """The queue, the holders and the accounting, in one snapshot of the store."""
    # Waiting jobs are counted by the database (a queue may hold a million); the live
    # ones, which hold GPUs, are at most one a GPU.
    waiting: dict[tuple[str, str], int] = {}
    for (state, priority, reason), n in tx.job_counts(wire.PENDING_JOB_STATES).items():
        key = (priority, (reason or state)[:MAX_REASON])
        waiting[key] = waiting.get(key, 0) + n
    claims = tx.claims(("waiting", "active"))
    holders: dict[str, Holding] = {}
    running = 0
    for job in tx.jobs(wire.LIVE_JOB_STATES):
        running += 1
        for uuid in json_list(job.gpu_uuids):
            holders[uuid] = Holding("job", job.id or 0, job.user)
    active = 0
    for claim in claims:
        if claim.state == "active":
            active += 1
            for uuid in json_list(claim.gpu_uuids):
                holders[uuid] = Holding("claim", claim.id or 0, claim.user)
    since, until = 0.0, max(now, 0.0) + 3600.0
    stored = tx.usage.cluster_hours(since, until)
    opened = tx.usage.open_allocations()
    hours = accounting.gather_cluster(
        stored, opened, pending.cluster_rows(), since=since, until=until, now=now
    )
    _, alloc, busy, energy = (sum(v[i] for v in hours.values()) for i in range(4))
    return QueueFacts(
        at=now,
        waiting=waiting,
        running=running,
        claims_active=active,
        claims_waiting=len(claims) - active,
        holders=holders,
        alloc_gpu_h=alloc / 3600,
        busy_gpu_h=busy / 3600,
        energy_kwh=energy / 3.6e6,
    )


class MetricsFeed:
    """The loop's side of ``/metrics``: what it keeps beyond the head's other parts
    (the Xids, each host's own name, the energy) and the latest ``QueueFacts``."""

    def __init__(
        self,
        store: Store,
        read: Callable[[Callable[[], Any]], Awaitable[Any]],
        pending: Callable[[], Metered],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._read = read
        self._pending = pending
        self._clock = clock
        self.queue: QueueFacts | None = None
        self._hostnames: dict[str, str] = {}
        self._last_xid: dict[str, tuple[float, int]] = {}
        self._energy_mj: dict[str, float] = {}
        self._sampled: dict[str, Sample] = {}
        """Host -> its last sample counted."""
        self._at: dict[str, float] = {}
        """GPU uuid -> when its last sample was counted."""
        self._links: dict[str, tuple[int | None, ...]] = {}
        self._stale = False
        self._refresh: asyncio.Task[None] | None = None

    def observe(self, snap: HostSnapshot) -> None:
        """A host's snapshot (on the loop): its own name, its Xids, its GPUs' energy."""
        if snap.hello is not None:
            self._hostnames[snap.name] = snap.hello.hostname
        for event in snap.events:
            if event.xid is None or event.gpu_uuid is None:
                continue
            at = event.time if event.time is not None else -math.inf
            seen = self._last_xid.get(event.gpu_uuid)
            if seen is None or at >= seen[0]:
                self._last_xid[event.gpu_uuid] = (at, event.xid)
        sample = snap.sample
        if sample is None:
            return
        if self._sampled.get(snap.name) is sample:
            return  # the same sample again (a snapshot re-sent): counted once
        self._sampled[snap.name] = sample
        now = self._clock()
        cap = MAX_GAP_S if snap.stale_after_s is None else min(MAX_GAP_S, snap.stale_after_s)
        counted_at, energy = self._at, self._energy_mj
        for gpu in sample.gpus:
            uuid = gpu.uuid
            if gpu.health_read:  # once a reading, not once a scrape
                self._links[uuid] = link_totals(gpu)
            last = counted_at.get(uuid)
            counted_at[uuid] = now
            if last is None or gpu.state == "lost":
                continue
            dt = min(now - last, cap)
            if dt > 0:
                joules = clamp_power(gpu.power_w) * dt
                energy[uuid] = energy.get(uuid, 0.0) + joules * 1000

    # -- the queue's figures, from the store on the reader thread ---------------------

    def changed(self) -> None:
        """A commit changed the state (or the timer says the hours grew): read again,
        one read at a time (a change during one reads again after it)."""
        self._stale = True
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.get_running_loop().create_task(self._read_queue())

    async def _read_queue(self) -> None:
        while self._stale:
            self._stale = False
            try:
                self.queue = await self._read(self._reader(self._pending(), self._clock()))
            except Exception as exc:  # the next change (or tick) reads again
                log.error("head: could not read the queue for /metrics: %s", exc)
                return

    def _reader(self, pending: Metered, now: float) -> Callable[[], QueueFacts]:
        def read() -> QueueFacts:
            with self._store.snapshot() as tx:
                return read_queue(tx, pending, now)

        return read

    async def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
            await asyncio.gather(self._refresh, return_exceptions=True)

    # -- the view -------------------------------------------------------------------

    def view(
        self,
        samples: Mapping[str, tuple[bool, Sample | None, Mapping[str, GpuSample]]],
        gpus: Mapping[str, GpuFacts],
        drained_hosts: frozenset[str],
        pools: Mapping[str, str],
    ) -> FleetView:
        """A frozen view of the fleet (``samples``: host -> live, latest sample, its
        health readings, each already a copy or frozen)."""
        hosts = tuple(
            HostView(name, self._hostnames.get(name, name), live, sample, readings)
            for name, (live, sample, readings) in sorted(samples.items())
        )
        return FleetView(
            hosts=hosts,
            gpus=dict(gpus),
            drained_hosts=drained_hosts,
            last_xid={u: xid for u, (_, xid) in self._last_xid.items()},
            energy_mj=dict(self._energy_mj),
            queue=self.queue,
            pools=dict(pools),
            links=dict(self._links),
        )
