"""The console's picture of the cluster: snapshots in, rows and summaries out.

``ClusterModel`` keeps the latest ``HostSnapshot`` of every host, a bounded
history of each GPU's readings for the sparklines, and answers the questions the
screen asks: which rows to show for a filter and sort, what changed since the last
snapshot (so only those rows are redrawn), and the cluster totals for the header.
No Textual and no I/O here; it is plain data and easy to test.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from gputui.config import HealthThresholds
from gputui.protocol import Event, GpuInfo, GpuSample, Hello, ProcessSample
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.format import data_age, short_model

Severity = Literal["ok", "info", "warn", "crit", "muted"]

HISTORY_POINTS = 300
RECENT_EVENT_S = 600.0
# Xids that mean the card (or its memory) is in real trouble, not an application bug.
_SEVERE_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
_HW_THROTTLE = ("hw_slowdown", "hw_thermal", "hw_power_brake")
_SW_THROTTLE = ("sw_thermal",)


@dataclass(frozen=True, slots=True)
class HostRow:
    """A host's group header in the grid."""

    host: str


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One GPU in the grid, by host and NVML index."""

    host: str
    index: int


Row = HostRow | GpuRow


@dataclass(frozen=True, slots=True)
class Flag:
    """A short state marker for a GPU, e.g. ``LOST`` or ``Xid 79``, with how bad it is."""

    label: str
    severity: Severity


@dataclass(frozen=True, slots=True)
class GpuView:
    """One GPU's static facts and latest readings, merged; any part may be missing."""

    host: str
    index: int
    info: GpuInfo | None
    sample: GpuSample | None
    owners: tuple[str, ...]
    haystack: str

    @property
    def row(self) -> GpuRow:
        return GpuRow(self.host, self.index)

    @property
    def uuid(self) -> str:
        if self.sample is not None:
            return self.sample.uuid
        return self.info.uuid if self.info is not None else ""

    @property
    def model(self) -> str:
        return short_model(self.info.name if self.info is not None else None)

    @property
    def state(self) -> str:
        return self.sample.state if self.sample is not None else "ok"

    @property
    def processes(self) -> tuple[ProcessSample, ...]:
        return self.sample.processes if self.sample is not None else ()

    @property
    def util(self) -> int | None:
        return self.sample.util_gpu if self.sample is not None else None

    @property
    def mem_used(self) -> int | None:
        return self.sample.mem_used_mib if self.sample is not None else None

    @property
    def mem_total(self) -> int | None:
        if self.sample is not None and self.sample.mem_total_mib is not None:
            return self.sample.mem_total_mib
        return self.info.memory_total_mib if self.info is not None else None

    @property
    def mem_free(self) -> int | None:
        used, total = self.mem_used, self.mem_total
        return None if used is None or total is None else max(0, total - used)

    @property
    def mem_pct(self) -> float | None:
        used, total = self.mem_used, self.mem_total
        return None if used is None or not total else 100.0 * used / total

    @property
    def temp(self) -> int | None:
        return self.sample.temp_c if self.sample is not None else None

    @property
    def power(self) -> float | None:
        return self.sample.power_w if self.sample is not None else None

    @property
    def power_limit(self) -> float | None:
        if self.sample is not None and self.sample.power_limit_w is not None:
            return self.sample.power_limit_w
        return self.info.power_limit_w if self.info is not None else None

    @property
    def fan(self) -> int | None:
        return self.sample.fan_pct if self.sample is not None else None

    @property
    def busy(self) -> bool:
        util = self.util
        return bool(self.processes) or (util is not None and util >= 5)


@dataclass(slots=True)
class GpuHistory:
    """The last few minutes of one GPU, newest last, for the detail sparklines."""

    util: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    mem: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    temp: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    power: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))

    def record(self, gpu: GpuView) -> None:
        # Runs for every GPU on every sample: read the sample's fields directly.
        sample = gpu.sample
        if sample is None:
            return
        total = sample.mem_total_mib or (gpu.info.memory_total_mib if gpu.info else None)
        used = sample.mem_used_mib
        self.util.append(float(sample.util_gpu or 0))
        self.mem.append(100.0 * used / total if used is not None and total else 0.0)
        self.temp.append(float(sample.temp_c or 0))
        self.power.append(sample.power_w or 0.0)


@dataclass(slots=True)
class HostEntry:
    """What the model holds for one host."""

    snapshot: HostSnapshot
    gpus: dict[int, GpuView] = field(default_factory=dict)
    events: dict[int, tuple[Event, ...]] = field(default_factory=dict)
    haystack: str = ""

    @property
    def name(self) -> str:
        return self.snapshot.name

    @property
    def hello(self) -> Hello | None:
        return self.snapshot.hello


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


def host_severity(snapshot: HostSnapshot, now: float, health: HealthThresholds) -> Severity:
    """How worried a person should be about a host, from its status and data age."""
    status = snapshot.status
    if status is HostStatus.LIVE:
        age = snapshot.age(now)
        return "warn" if age is not None and age > health.stale_after_s else "ok"
    if status is HostStatus.CONNECTING:
        return "info"
    if status is HostStatus.STOPPED:
        return "muted"
    if status is HostStatus.STALE:
        return "warn"
    return "crit"


def host_status_text(snapshot: HostSnapshot, now: float, health: HealthThresholds) -> str:
    """``live 1.2s`` / ``stale 42s`` / ``unreachable``: the status word and the data age."""
    status = snapshot.status
    age = snapshot.age(now)
    if status is HostStatus.LIVE:
        if age is not None and age > health.stale_after_s:
            return f"stale {data_age(age)}"
        return f"live {data_age(age)}"
    if status is HostStatus.STALE:
        return f"stale {data_age(age)}"
    return str(status.value)


class ClusterModel:
    """Latest snapshots, per-GPU history and derived rows for the whole cluster."""

    def __init__(self, health: HealthThresholds | None = None) -> None:
        self.health = health or HealthThresholds()
        self.hosts: dict[str, HostEntry] = {}
        self._history: dict[GpuRow, GpuHistory] = {}
        self._last_seq: dict[str, tuple[int, float]] = {}

    # -- updates -----------------------------------------------------------------

    def apply(self, snapshot: HostSnapshot) -> HostChange:
        """Take a host's new snapshot; say which of its rows changed."""
        old = self.hosts.get(snapshot.name)
        gpus = self._build_gpus(snapshot, old)
        entry = HostEntry(
            snapshot=snapshot,
            gpus=gpus,
            events=self._events_by_index(snapshot, old),
            haystack=f"{snapshot.name}\n{snapshot.pool}".lower(),
        )
        self.hosts[snapshot.name] = entry
        if old is None:
            changed = frozenset(gpus)
            structure = True
        else:
            structure = list(old.gpus) != list(gpus)
            restyle = old.snapshot.status != snapshot.status
            changed = frozenset(
                index
                for index, gpu in gpus.items()
                if restyle
                or (before := old.gpus.get(index)) is None
                or before.sample != gpu.sample
                or before.info != gpu.info
                or old.events.get(index) != entry.events.get(index)
            )
        self._record_history(entry)
        return HostChange(snapshot.name, changed, structure)

    def _build_gpus(self, snapshot: HostSnapshot, old: HostEntry | None) -> dict[int, GpuView]:
        infos = {g.index: g for g in snapshot.hello.gpus} if snapshot.hello else {}
        samples = {g.index: g for g in snapshot.sample.gpus} if snapshot.sample else {}
        result: dict[int, GpuView] = {}
        for index in sorted(set(infos) | set(samples)):
            info, sample = infos.get(index), samples.get(index)
            before = old.gpus.get(index) if old is not None else None
            if (
                before is not None
                and before.sample is sample
                and before.info is info
                and old is not None
                and old.snapshot.pool == snapshot.pool
            ):
                result[index] = before
                continue
            owners = tuple(sorted({p.user for p in (sample.processes if sample else ()) if p.user}))
            model = short_model(info.name if info else None)
            haystack = "\n".join((snapshot.name, snapshot.pool, model, *owners)).lower()
            result[index] = GpuView(snapshot.name, index, info, sample, owners, haystack)
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
        for gpu in entry.gpus.values():
            history = self._history.get(gpu.row)
            if history is None:
                history = self._history[gpu.row] = GpuHistory()
            history.record(gpu)

    # -- queries -----------------------------------------------------------------

    def gpu(self, row: GpuRow) -> GpuView | None:
        entry = self.hosts.get(row.host)
        return entry.gpus.get(row.index) if entry is not None else None

    def history(self, row: GpuRow) -> GpuHistory | None:
        return self._history.get(row)

    def events(self, row: GpuRow) -> tuple[Event, ...]:
        entry = self.hosts.get(row.host)
        return entry.events.get(row.index, ()) if entry is not None else ()

    def flags(self, gpu: GpuView, now: float) -> list[Flag]:
        """What is wrong with a GPU, worst first; empty means it is fine."""
        flags: list[Flag] = []
        sample = gpu.sample
        if sample is not None and sample.state == "lost":
            flags.append(Flag("LOST", "crit"))
        elif sample is not None and sample.state == "error":
            flags.append(Flag("ERROR", "crit"))
        if sample is not None:
            if (
                sample.ecc_uncorrected is not None
                and sample.ecc_uncorrected > self.health.ecc_uncorrected_max
            ):
                flags.append(Flag(f"ECC {sample.ecc_uncorrected}", "crit"))
            throttle = sample.throttle or ()
            if any(reason in _HW_THROTTLE for reason in throttle):
                flags.append(Flag("THRTL", "crit"))
            elif any(reason in _SW_THROTTLE for reason in throttle):
                flags.append(Flag("THRTL", "warn"))
        for event in reversed(self.events(gpu.row)):
            if event.xid is not None and now - event.time <= RECENT_EVENT_S:
                severity: Severity = "crit" if event.xid in _SEVERE_XIDS else "warn"
                flags.append(Flag(f"Xid {event.xid}", severity))
                break
        return flags

    def temp_severity(self, temp: int | None) -> Severity:
        if temp is None:
            return "muted"
        if temp >= self.health.temp_crit_c:
            return "crit"
        if temp >= self.health.temp_warn_c:
            return "warn"
        return "ok"

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
            gpus = [g for g in entry.gpus.values() if _matches_text(g.haystack, terms)]
            if terms and not gpus and not _matches_text(entry.haystack, terms):
                continue
            rows.append(HostRow(entry.name))
            if entry.name not in folded:
                rows.extend(g.row for g in _sorted(gpus, sort))
        return rows

    def summary(self, now: float) -> ClusterSummary:
        live = gpus = busy = used = total = problems = 0
        for entry in self.hosts.values():
            severity = host_severity(entry.snapshot, now, self.health)
            if entry.snapshot.status is HostStatus.LIVE:
                live += 1
            if severity in ("warn", "crit"):
                problems += 1
            for index, gpu in entry.gpus.items():
                gpus += 1
                busy += gpu.busy
                used += gpu.mem_used or 0
                total += gpu.mem_total or 0
                if severity != "ok":
                    continue
                sample = gpu.sample
                if sample is not None and self._gpu_has_problem(sample, entry, index, gpu, now):
                    problems += 1
        return ClusterSummary(live, len(self.hosts), gpus, busy, used, total, problems)

    def _gpu_has_problem(
        self, sample: GpuSample, entry: HostEntry, index: int, gpu: GpuView, now: float
    ) -> bool:
        if sample.temp_c is not None and sample.temp_c >= self.health.temp_warn_c:
            return True
        # Only a GPU that could have a flag pays for working the flags out.
        could_flag = (
            sample.state != "ok"
            or sample.ecc_uncorrected
            or sample.throttle
            or entry.events.get(index)
        )
        return bool(could_flag and self.flags(gpu, now))

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
