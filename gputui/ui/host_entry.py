"""What the model holds for one host, and the one pass over its GPUs per snapshot.

Every host's snapshot arrives once a second, thousands of GPUs in all, so taking a
snapshot reads each GPU's sample once (history point and host totals in the same
loop) and builds nothing else. ``GpuView`` objects and the set of GPUs that changed
are worked out only when something asks: in practice for the few hosts on screen.
Plain data, no Textual.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace

from gputui.common.gpu_label import model_label
from gputui.config.models import HealthThresholds
from gputui.health import (
    ORPHAN_MEMORY_MIB,
    RECENT_EVENT_S,
    has_standing_problem,
    last_xid_time,
)
from gputui.telemetry import HostSnapshot
from gputui.ui.format import short_model
from gputui.ui.gpu_view import GpuHistory, GpuView
from gputui.wire.fields import wire_fields
from gputui.wire.messages import Event, GpuInfo, GpuSample, Hello

IDLE_UTIL_PCT = 5
"""A GPU with no process under this utilisation is idle (and not busy)."""


def gpu_is_idle(gpu: GpuSample) -> bool:
    """No process, utilisation under ``IDLE_UTIL_PCT``, no memory held without a process
    (under ``ORPHAN_MEMORY_MIB``) and nothing wrong reported: a job could start on it.
    Free is this and held by no job or claim (``ClusterModel.is_free``)."""
    util = gpu.util_gpu
    return (
        not gpu.processes
        and util is not None
        and util < IDLE_UTIL_PCT
        and (gpu.mem_used_mib or 0) < ORPHAN_MEMORY_MIB
        and gpu.state == "ok"
    )


@dataclass(frozen=True, slots=True)
class HostTotals:
    """One host's sums for the summary line, worked out once per snapshot."""

    gpus: int
    busy: int
    mem_used_mib: int
    mem_total_mib: int
    problems: int
    """GPUs with a problem that does not fade (hot, lost, ECC, throttled)."""
    xids: tuple[float, ...]
    """For each other GPU that had an Xid: when its newest one happened."""
    idle: tuple[str, ...] = ()
    """The uuids of the GPUs that are idle (``gpu_is_idle``): free unless someone holds them."""

    def problem_gpus(self, now: float) -> int:
        if not self.xids:  # the usual case, once per host per second
            return self.problems
        return self.problems + sum(1 for t in self.xids if now - t <= RECENT_EVENT_S)


class HostEntry:
    """One host's latest snapshot with what the console derives from it.

    ``indices``, ``totals`` and ``events`` are ready when the entry is made; the
    per-GPU ``gpus`` views and ``samples`` are built on first use, reusing the
    views of an earlier snapshot where nothing the filter searches changed.
    """

    __slots__ = (
        "_base",
        "_gpus",
        "_samples",
        "_seen",
        "events",
        "haystack",
        "indices",
        "infos",
        "snapshot",
        "totals",
    )

    def __init__(
        self,
        snapshot: HostSnapshot,
        *,
        infos: dict[int, GpuInfo],
        events: dict[int, tuple[Event, ...]],
        haystack: str,
        indices: tuple[int, ...],
        totals: HostTotals,
        seen: tuple[int, ...],
        base: dict[int, GpuView],
    ) -> None:
        self.snapshot = snapshot
        self.infos = infos
        self.events = events
        self.haystack = haystack
        """Lower-case host name and pool: what the filter searches for the header."""
        self.indices = indices
        """Every GPU of the host (from ``hello`` and the sample), in index order."""
        self.totals = totals
        self._seen = seen
        self._base = base
        self._gpus: dict[int, GpuView] | None = None
        self._samples: dict[int, GpuSample] | None = None

    @property
    def name(self) -> str:
        return self.snapshot.name

    @property
    def hello(self) -> Hello | None:
        return self.snapshot.hello

    @property
    def samples(self) -> dict[int, GpuSample]:
        """This snapshot's GPU readings by index."""
        if self._samples is None:
            sample = self.snapshot.sample
            self._samples = {g.index: g for g in sample.gpus} if sample is not None else {}
        return self._samples

    @property
    def gpus(self) -> dict[int, GpuView]:
        """Every GPU as a ``GpuView``, in index order (built on first use)."""
        if self._gpus is None:
            self._gpus = self._build_views()
            self._base = {}
        return self._gpus

    @property
    def views(self) -> dict[int, GpuView]:
        """The newest views built for this host: what the next snapshot may reuse."""
        return self._gpus if self._gpus is not None else self._base

    def _build_views(self) -> dict[int, GpuView]:
        snapshot, infos, samples, base = self.snapshot, self.infos, self.samples, self._base
        name = snapshot.name
        parents = snapshot.sample.parents if snapshot.sample is not None else ()
        result: dict[int, GpuView] = {}
        for index in self.indices:
            info, sample = infos.get(index), samples.get(index)
            before = base.get(index)
            if (
                before is not None
                and before.info is info
                and before.sample is sample
                and before.parents is parents
            ):
                result[index] = before
                continue
            procs = sample.processes if sample is not None else ()
            owners = tuple(sorted({p.user for p in procs if p.user}))
            if before is not None and before.info is info and before.owners == owners:
                haystack = before.haystack
            else:
                model = short_model(info.name if info else None)
                label = model_label(info.name, info.memory_total_mib) if info else ""
                haystack = "\n".join((name, snapshot.pool, model, label, *owners)).lower()
            result[index] = GpuView(name, index, info, sample, owners, haystack, parents)
        return result


def take_snapshot(
    snapshot: HostSnapshot,
    old: HostEntry | None,
    health: HealthThresholds,
    histories: dict[int, GpuHistory] | None,
) -> HostEntry:
    """The entry for ``snapshot`` following ``old``; ``histories`` (if given) gets a point."""
    if old is not None and old.snapshot.hello is snapshot.hello:
        infos = old.infos
    else:
        infos = {g.index: g for g in snapshot.hello.gpus} if snapshot.hello else {}
    events = _events_by_index(snapshot, old)
    same_pool = old is not None and old.snapshot.pool == snapshot.pool
    if old is not None and same_pool:
        haystack, base = old.haystack, old.views
    else:
        haystack, base = f"{snapshot.name}\n{snapshot.pool}".lower(), {}
    if (
        old is not None
        and old.snapshot.sample is snapshot.sample
        and old.infos is infos
        and old.events is events
    ):
        indices, totals, seen = old.indices, old.totals, old._seen
    else:
        seen, totals = _scan(snapshot, infos, events, health, histories)
        if old is not None and old.infos is infos and old._seen == seen:
            indices = old.indices
        else:
            indices = tuple(sorted(infos.keys() | set(seen)))
        if len(indices) > len(seen):  # GPUs without readings: their memory still counts
            seen_set = set(seen)
            extra = sum(
                infos[i].memory_total_mib or 0 for i in indices if i not in seen_set and i in infos
            )
            totals = replace(totals, gpus=len(indices), mem_total_mib=totals.mem_total_mib + extra)
    return HostEntry(
        snapshot,
        infos=infos,
        events=events,
        haystack=haystack,
        indices=indices,
        totals=totals,
        seen=seen,
        base=base,
    )


def _scan(
    snapshot: HostSnapshot,
    infos: dict[int, GpuInfo],
    events: dict[int, tuple[Event, ...]],
    health: HealthThresholds,
    histories: dict[int, GpuHistory] | None,
) -> tuple[tuple[int, ...], HostTotals]:
    """One pass over the sample's GPUs: their indices, the host totals, history points."""
    sample = snapshot.sample
    if sample is None:
        return (), HostTotals(0, 0, 0, 0, 0, ())
    busy = used = total = problems = 0
    xids: list[float] = []
    idle: list[str] = []
    seen: list[int] = []
    warm = health.temp_warn_c
    # Per GPU per second: plain attribute reads, one tuple appended to the history,
    # and the full problem check only for a GPU that shows a sign of one.
    for gpu in sample.gpus:
        index = gpu.index
        seen.append(index)
        util, mem_used, temp = gpu.util_gpu, gpu.mem_used_mib, gpu.temp_c
        mem_total = gpu.mem_total_mib
        if mem_total is None and (info := infos.get(index)) is not None:
            mem_total = info.memory_total_mib
        if gpu.processes or (util is not None and util >= IDLE_UTIL_PCT):
            busy += 1
        elif gpu_is_idle(gpu):
            idle.append(gpu.uuid)
        used += mem_used or 0
        total += mem_total or 0
        suspect = (
            (temp is not None and temp >= warm)
            or gpu.state != "ok"
            or gpu.ecc_uncorrected
            or gpu.throttle
            or (not gpu.processes and (mem_used or 0) >= ORPHAN_MEMORY_MIB)
        )
        if suspect and has_standing_problem(gpu, health):
            problems += 1
        elif index in events and (when := last_xid_time(events[index])) is not None:
            xids.append(when)
        if histories is not None:
            history = histories.get(index)
            if history is None:
                history = histories[index] = GpuHistory()
            history.readings.append((util, mem_used, mem_total, temp, gpu.power_w))
    totals = HostTotals(len(seen), busy, used, total, problems, tuple(xids), tuple(idle))
    return tuple(seen), totals


def _events_by_index(snapshot: HostSnapshot, old: HostEntry | None) -> dict[int, tuple[Event, ...]]:
    if old is not None and old.snapshot.events is snapshot.events:
        return old.events
    uuids = {}
    if snapshot.hello is not None:
        uuids = {g.uuid: g.index for g in snapshot.hello.gpus}
    grouped: dict[int, list[Event]] = {}
    for event in snapshot.events:
        index = event.gpu_index
        if index is None and event.gpu_uuid is not None:
            index = uuids.get(event.gpu_uuid)
        if index is not None:
            grouped.setdefault(index, []).append(event)
    return {index: tuple(events) for index, events in grouped.items()}


def changed_gpus(old: HostEntry | None, new: HostEntry) -> frozenset[int]:
    """The GPUs whose line looks different in ``new`` than in ``old``."""
    if old is None or old.snapshot.status != new.snapshot.status:  # every line restyles
        return frozenset(new.indices)
    if (
        old.snapshot.sample is new.snapshot.sample
        and old.infos is new.infos
        and old.events is new.events
    ):
        return frozenset()
    before, after = old.samples, new.samples
    old_infos, new_infos = old.infos, new.infos
    old_events, new_events = old.events, new.events
    events_moved = old_events is not new_events
    known = set(old.indices)
    changed = set()
    for index in new.indices:
        if index not in known:
            changed.add(index)
            continue
        a, b = old_infos.get(index), new_infos.get(index)
        if (
            (a is not b and a != b)
            or not same_readings(before.get(index), after.get(index))
            or (events_moved and old_events.get(index) != new_events.get(index))
        ):
            changed.add(index)
    return frozenset(changed)


def same_readings(a: GpuSample | None, b: GpuSample | None) -> bool:
    # Field by field, all read in C (the dataclass's own ``==`` reads them in Python).
    if a is b:
        return True
    return a is not None and b is not None and _readings(a) == _readings(b)


_readings: Callable[[GpuSample], tuple[object, ...]] = operator.attrgetter(*wire_fields(GpuSample))
"""Every field of a GPU's readings, in order."""
