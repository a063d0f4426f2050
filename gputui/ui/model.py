"""The console's picture of the cluster: snapshots in, rows and summaries out.

``ClusterModel`` keeps the latest ``HostSnapshot`` of every host, a bounded
history of each GPU's readings for the sparklines, and answers the questions the
screen asks: which rows to show for a filter and sort, what changed since the last
snapshot (so only those rows are redrawn), and the cluster totals for the header.
No Textual and no I/O here; it is plain data and easy to test.

Every host's snapshot passes through ``apply`` once a second, so that path does
per GPU only what cannot wait (history, change detection); anything else is
worked out when asked, at most once per snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from gputui.config import HealthThresholds
from gputui.protocol import Event, GpuInfo, GpuSample, Hello
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.format import short_model
from gputui.ui.gpu_view import GpuHistory, GpuRow, GpuView, HostRow, Row
from gputui.ui.health import (
    RECENT_EVENT_S,
    Flag,
    Severity,
    gpu_flags,
    has_standing_problem,
    host_severity,
    last_xid_time,
    temp_severity,
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

    def problem_gpus(self, now: float) -> int:
        if not self.xids:  # the usual case, once per host per second
            return self.problems
        return self.problems + sum(1 for t in self.xids if now - t <= RECENT_EVENT_S)


@dataclass(slots=True)
class HostEntry:
    """What the model holds for one host."""

    snapshot: HostSnapshot
    gpus: dict[int, GpuView] = field(default_factory=dict)
    events: dict[int, tuple[Event, ...]] = field(default_factory=dict)
    haystack: str = ""
    infos: dict[int, GpuInfo] = field(default_factory=dict)
    health: HealthThresholds = field(default_factory=HealthThresholds)
    _totals: HostTotals | None = None

    @property
    def name(self) -> str:
        return self.snapshot.name

    @property
    def hello(self) -> Hello | None:
        return self.snapshot.hello

    @property
    def totals(self) -> HostTotals:
        if self._totals is None:
            self._totals = self._sum()
        return self._totals

    def _sum(self) -> HostTotals:
        busy = used = total = problems = 0
        xids: list[float] = []
        health, events = self.health, self.events
        warm = health.temp_warn_c
        # Once per host per snapshot, over every GPU: plain attribute reads, and the
        # full problem check only for a GPU that shows a sign of one.
        for index, gpu in self.gpus.items():
            sample = gpu.sample
            if sample is None:
                total += gpu.mem_total or 0
                continue
            util = sample.util_gpu
            busy += bool(sample.processes) or (util is not None and util >= 5)  # is_busy
            total += sample.mem_total_mib or gpu.mem_total or 0
            used += sample.mem_used_mib or 0
            temp = sample.temp_c
            suspect = (
                (temp is not None and temp >= warm)
                or sample.state != "ok"
                or sample.ecc_uncorrected
                or sample.throttle
            )
            if suspect and has_standing_problem(sample, health):
                problems += 1
            elif index in events and (when := last_xid_time(events[index])) is not None:
                xids.append(when)
        return HostTotals(len(self.gpus), busy, used, total, problems, tuple(xids))


@dataclass(frozen=True, slots=True)
class HostChange:
    """What one snapshot changed: the grid redraws exactly this."""

    host: str
    gpus: frozenset[int]
    structure: bool
    """GPUs appeared or disappeared, or the host is new: rows must be rebuilt."""


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    hosts_live: int
    hosts_total: int
    gpus: int
    busy: int
    mem_used_mib: int
    mem_total_mib: int
    problems: int


@dataclass(frozen=True, slots=True)
class SortKey:
    """One way to order GPUs; ``value`` is sorted largest first, ``None`` last."""

    name: str
    label: str
    value: Callable[[GpuView], float] | None


def _num(value: float | None) -> float:
    return -math.inf if value is None else float(value)


SORT_KEYS: tuple[SortKey, ...] = (
    SortKey("host", "host order", None),
    SortKey("util", "utilisation", lambda g: _num(g.util)),
    SortKey("mem", "memory used", lambda g: _num(g.mem_used)),
    SortKey("temp", "temperature", lambda g: _num(g.temp)),
    SortKey("power", "power", lambda g: _num(g.power)),
    SortKey("free", "free memory", lambda g: _num(g.mem_free)),
)


def _same_readings(a: GpuSample | None, b: GpuSample | None) -> bool:
    # Field by field on the models' dicts: pydantic's own ``==`` costs several
    # times more, and this runs for every GPU of every sample.
    if a is b:
        return True
    return a is not None and b is not None and a.__dict__ == b.__dict__


def _gpu_differs(before: GpuView, after: GpuView) -> bool:
    if before.info is not after.info and before.info != after.info:
        return True
    return not _same_readings(before.sample, after.sample)


class ClusterModel:
    """Latest snapshots, per-GPU history and derived rows for the whole cluster."""

    def __init__(self, health: HealthThresholds | None = None) -> None:
        self.health = health or HealthThresholds()
        self.hosts: dict[str, HostEntry] = {}
        self._history: dict[str, dict[int, GpuHistory]] = {}
        self._last_seq: dict[str, tuple[int, float]] = {}

    # -- updates -----------------------------------------------------------------

    def apply(self, snapshot: HostSnapshot) -> HostChange:
        """Take a host's new snapshot; say which of its rows changed."""
        old = self.hosts.get(snapshot.name)
        if old is not None and old.snapshot.hello is snapshot.hello:
            infos = old.infos
        else:
            infos = {g.index: g for g in snapshot.hello.gpus} if snapshot.hello else {}
        entry = HostEntry(
            snapshot=snapshot,
            events=self._events_by_index(snapshot, old),
            haystack=f"{snapshot.name}\n{snapshot.pool}".lower(),
            infos=infos,
            health=self.health,
        )
        entry.gpus = gpus = self._build_gpus(entry, old)
        self.hosts[snapshot.name] = entry
        if old is None:
            changed = frozenset(gpus)
            structure = True
        else:
            old_gpus, old_events, events = old.gpus, old.events, entry.events
            structure = old_gpus.keys() != gpus.keys()
            if old.snapshot.status != snapshot.status:  # every line restyles
                changed = frozenset(gpus)
            else:
                events_moved = old_events is not events
                changed = frozenset(
                    index
                    for index, gpu in gpus.items()
                    if (before := old_gpus.get(index)) is None
                    or (before is not gpu and _gpu_differs(before, gpu))
                    or (events_moved and old_events.get(index) != events.get(index))
                )
        self._record_history(entry)
        return HostChange(snapshot.name, changed, structure)

    def _build_gpus(self, entry: HostEntry, old: HostEntry | None) -> dict[int, GpuView]:
        snapshot, infos = entry.snapshot, entry.infos
        samples = {g.index: g for g in snapshot.sample.gpus} if snapshot.sample else {}
        indices = infos.keys() | samples.keys()
        same_pool = old is not None and old.snapshot.pool == snapshot.pool
        old_gpus = old.gpus if old is not None and same_pool else {}
        name = snapshot.name
        result: dict[int, GpuView] = {}
        for index in sorted(indices):
            info, sample = infos.get(index), samples.get(index)
            before = old_gpus.get(index)
            if before is not None and before.info is info:
                if before.sample is sample:
                    result[index] = before
                    continue
                if not (sample is not None and sample.processes) and not before.owners:
                    # Nothing the filter searches changed: keep the haystack.
                    result[index] = GpuView(name, index, info, sample, (), before.haystack)
                    continue
            procs = sample.processes if sample is not None else ()
            owners = tuple(sorted({p.user for p in procs if p.user}))
            if before is not None and before.info is info and before.owners == owners:
                haystack = before.haystack
            else:
                model = short_model(info.name if info else None)
                haystack = "\n".join((name, snapshot.pool, model, *owners)).lower()
            result[index] = GpuView(name, index, info, sample, owners, haystack)
        return result

    @staticmethod
    def _events_by_index(
        snapshot: HostSnapshot, old: HostEntry | None
    ) -> dict[int, tuple[Event, ...]]:
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

    def _record_history(self, entry: HostEntry) -> None:
        sample = entry.snapshot.sample
        if sample is None:
            return
        mark = (sample.seq, sample.time)
        if self._last_seq.get(entry.name) == mark:
            return
        self._last_seq[entry.name] = mark
        histories = self._history.setdefault(entry.name, {})
        infos = entry.infos
        # Every GPU, every sample: one tuple appended (``GpuHistory.Reading``), no calls.
        for gpu in sample.gpus:
            history = histories.get(gpu.index)
            if history is None:
                history = histories[gpu.index] = GpuHistory()
            total = gpu.mem_total_mib
            if total is None and (info := infos.get(gpu.index)) is not None:
                total = info.memory_total_mib
            history.readings.append(
                (gpu.util_gpu, gpu.mem_used_mib, total, gpu.temp_c, gpu.power_w)
            )

    # -- queries -----------------------------------------------------------------

    def gpu(self, row: GpuRow) -> GpuView | None:
        entry = self.hosts.get(row.host)
        return entry.gpus.get(row.index) if entry is not None else None

    def history(self, row: GpuRow) -> GpuHistory | None:
        return self._history.get(row.host, {}).get(row.index)

    def events(self, row: GpuRow) -> tuple[Event, ...]:
        entry = self.hosts.get(row.host)
        return entry.events.get(row.index, ()) if entry is not None else ()

    def flags(self, gpu: GpuView, now: float) -> list[Flag]:
        """What is wrong with a GPU, worst first; empty means it is fine."""
        return gpu_flags(gpu.sample, self.events(gpu.row), now, self.health)

    def temp_severity(self, temp: int | None) -> Severity:
        return temp_severity(temp, self.health)

    def rows(
        self,
        query: str = "",
        sort: SortKey = SORT_KEYS[0],
        *,
        grouped: bool = True,
        collapsed: Iterable[str] = (),
    ) -> list[Row]:
        """The grid's rows for a filter (all words must match) and a sort order."""
        terms = query.lower().split()
        folded = set(collapsed)
        rows: list[Row] = []
        if not grouped:
            flat = [g for e in self.hosts.values() for g in e.gpus.values() if _matches(g, terms)]
            rows.extend(g.row for g in _sorted(flat, sort))
            return rows
        for entry in self.hosts.values():
            if not terms and sort.value is None:  # the usual case: no GpuView needed
                rows.append(HostRow(entry.name))
                if entry.name not in folded:
                    rows.extend(GpuRow(entry.name, index) for index in entry.gpus)
                continue
            gpus = [g for g in entry.gpus.values() if _matches(g, terms)]
            if terms and not gpus and not _matches_text(entry.haystack, terms):
                continue
            rows.append(HostRow(entry.name))
            if entry.name not in folded:
                rows.extend(g.row for g in _sorted(gpus, sort))
        return rows

    def summary(self, now: float) -> ClusterSummary:
        live = gpus = busy = used = total = problems = 0
        for entry in self.hosts.values():
            snapshot = entry.snapshot
            severity = host_severity(snapshot, now, self.health)
            if snapshot.status is HostStatus.LIVE:
                live += 1
            if severity in ("warn", "crit"):
                problems += 1
            totals = entry.totals
            gpus += totals.gpus
            busy += totals.busy
            used += totals.mem_used_mib
            total += totals.mem_total_mib
            if severity == "ok":  # a host in trouble counts once, not once per GPU
                problems += totals.problem_gpus(now)
        return ClusterSummary(live, len(self.hosts), gpus, busy, used, total, problems)

    def iter_gpus(self) -> Iterator[GpuView]:
        for entry in self.hosts.values():
            yield from entry.gpus.values()


def _matches_text(haystack: str, terms: list[str]) -> bool:
    return all(term in haystack for term in terms)


def _matches(gpu: GpuView, terms: list[str]) -> bool:
    return _matches_text(gpu.haystack, terms)


def _sorted(gpus: list[GpuView], sort: SortKey) -> list[GpuView]:
    if sort.value is None:
        return gpus
    key = sort.value
    return sorted(gpus, key=lambda g: -key(g))
