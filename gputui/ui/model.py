"""The console's picture of the cluster: snapshots in, rows and summaries out.

``ClusterModel`` keeps the latest ``HostSnapshot`` of every host, a bounded
history of each GPU's readings for the sparklines, and answers the questions the
screen asks: which rows to show for a filter and sort, what changed since the last
snapshot (so only those rows are redrawn), and the cluster totals for the header.
No Textual and no I/O here; it is plain data and easy to test.

Every host's snapshot passes through ``apply`` once a second, so that path reads
each GPU once (history and host totals, ``host_entry``); views of GPUs and what
changed are worked out when asked, which in practice is for the hosts on screen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from gputui.common.i18n import N_
from gputui.config.models import HealthThresholds
from gputui.health import Flag, Severity, gpu_flags, host_severity, temp_severity
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.gpu_view import GpuHistory, GpuRow, GpuView, HostRow, Row
from gputui.ui.head.flags import OwnerFlag
from gputui.ui.head.view import Holder
from gputui.ui.host_entry import (
    HostEntry,
    HostTotals,
    changed_gpus,
    gpu_is_idle,
    take_snapshot,
)
from gputui.wire.messages import Event

__all__ = [
    "SORT_KEYS",
    "ClusterModel",
    "ClusterSummary",
    "HostChange",
    "HostEntry",
    "HostTotals",
    "SortKey",
]


class HostChange:
    """What one snapshot changed: the grid redraws exactly this.

    ``gpus`` is worked out on first use: the grid asks only for hosts it has drawn.
    """

    __slots__ = ("_gpus", "_new", "_old", "host", "status", "structure")

    def __init__(self, host: str, structure: bool, old: HostEntry | None, new: HostEntry) -> None:
        self.host = host
        self.structure = structure
        """GPUs appeared or disappeared, or the host is new: rows must be rebuilt."""
        self.status = old is None or old.snapshot.status is not new.snapshot.status
        """The host's status moved (live, unreachable ...): the summary's counts did too."""
        self._old: HostEntry | None = old
        self._new: HostEntry | None = new
        self._gpus: frozenset[int] | None = None

    @property
    def gpus(self) -> frozenset[int]:
        """The GPUs whose lines look different now."""
        if self._gpus is None:
            assert self._new is not None
            self._gpus = changed_gpus(self._old, self._new)
            self._old = self._new = None
        return self._gpus

    def __repr__(self) -> str:
        return f"HostChange({self.host!r}, structure={self.structure})"


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    hosts_live: int
    hosts_total: int
    gpus: int
    busy: int
    mem_used_mib: int
    mem_total_mib: int
    problems: int
    free: int = 0
    """GPUs held by nobody and idle (``ClusterModel.is_free``)."""


@dataclass(frozen=True, slots=True)
class SortKey:
    """One way to order GPUs; ``value`` is sorted largest first, ``None`` last
    (``free_first``: the free GPUs first, each part by ``value``)."""

    name: str
    label: str
    value: Callable[[GpuView], float] | None
    free_first: bool = False


def _num(value: float | None) -> float:
    return -math.inf if value is None else float(value)


SORT_KEYS: tuple[SortKey, ...] = (
    SortKey("host", N_("host order"), None),
    SortKey("util", N_("utilisation"), lambda g: _num(g.util)),
    SortKey("mem", N_("memory used"), lambda g: _num(g.mem_used)),
    SortKey("temp", N_("temperature"), lambda g: _num(g.temp)),
    SortKey("power", N_("power"), lambda g: _num(g.power)),
    SortKey("free", N_("free (unclaimed and idle) first"), lambda g: _num(g.mem_free), True),
)

FREE_WORD = "free"
CLOCKS_LOW = "CLK-LOW"
"""The STATE marker of a GPU whose clocks the head locked low (held but idle)."""
"""This word in the filter keeps the free GPUs (``ClusterModel.is_free``), not the text."""


class ClusterModel:
    """Latest snapshots, per-GPU history and derived rows for the whole cluster."""

    def __init__(self, health: HealthThresholds | None = None) -> None:
        self.health = health or HealthThresholds()
        self.hosts: dict[str, HostEntry] = {}
        self._history: dict[str, dict[int, GpuHistory]] = {}
        self._last_seq: dict[str, tuple[int, float | None]] = {}
        self.holders: dict[str, Holder] = {}
        """GPU uuid -> the job or claim holding it, as the scheduler's head last said."""
        self.owner_flags: dict[str, tuple[OwnerFlag, ...]] = {}
        self.head_states: dict[str, str] = {}
        """GPU uuid -> ``unhealthy`` (fenced by the head) or ``drained`` (an admin)."""
        """GPU uuid -> its processes that its owner holds nothing for (the head's flags)."""
        self.clock_locks: frozenset[str] = frozenset()
        """GPUs held but idle whose clocks the head locked low (``power.mode: lock``)."""

    # -- updates -----------------------------------------------------------------

    def apply(self, snapshot: HostSnapshot) -> HostChange:
        """Take a host's new snapshot; say which of its rows changed."""
        name = snapshot.name
        old = self.hosts.get(name)
        entry = take_snapshot(snapshot, old, self.health, self._new_point(snapshot))
        self.hosts[name] = entry
        structure = old is None or old.indices != entry.indices
        return HostChange(name, structure, old, entry)

    def _new_point(self, snapshot: HostSnapshot) -> dict[int, GpuHistory] | None:
        """The host's histories if this snapshot's sample is one they do not have yet."""
        sample = snapshot.sample
        if sample is None:
            return None
        mark = (sample.seq, sample.time)
        if self._last_seq.get(snapshot.name) == mark:
            return None
        self._last_seq[snapshot.name] = mark
        return self._history.setdefault(snapshot.name, {})

    def set_holders(self, holders: dict[str, Holder]) -> list[GpuRow]:
        """Take who holds which GPU now; the rows whose holder changed."""
        old, self.holders = self.holders, holders
        moved = {u for u in old.keys() | holders.keys() if old.get(u) != holders.get(u)}
        if not moved:
            return []
        return [g.row for g in self.iter_gpus() if g.uuid in moved]

    def set_owner_flags(self, flags: dict[str, tuple[OwnerFlag, ...]]) -> list[GpuRow]:
        """Take the head's ownership flags; the rows whose flags changed."""
        old, self.owner_flags = self.owner_flags, flags
        moved = {u for u in old.keys() | flags.keys() if old.get(u) != flags.get(u)}
        if not moved:
            return []
        return [g.row for g in self.iter_gpus() if g.uuid in moved]

    def set_head_states(self, states: dict[str, str]) -> list[GpuRow]:
        """Take which GPUs the head fenced or an admin drained; the rows that changed."""
        old, self.head_states = self.head_states, states
        moved = {u for u in old.keys() | states.keys() if old.get(u) != states.get(u)}
        if not moved:
            return []
        return [g.row for g in self.iter_gpus() if g.uuid in moved]

    def set_clock_locks(self, locked: frozenset[str]) -> list[GpuRow]:
        """Take which GPUs the head has locked low; the rows that changed."""
        moved, self.clock_locks = self.clock_locks ^ locked, locked
        if not moved:
            return []
        return [g.row for g in self.iter_gpus() if g.uuid in moved]

    # -- queries -----------------------------------------------------------------

    def flagged(self, gpus: Iterable[GpuView]) -> frozenset[tuple[str, int]]:
        """(GPU uuid, pid) of the processes the head flags on these GPUs."""
        flags = self.owner_flags
        return frozenset((f.gpu_uuid, f.pid) for g in gpus for f in flags.get(g.uuid, ()))

    def gpu(self, row: GpuRow) -> GpuView | None:
        entry = self.hosts.get(row.host)
        return entry.gpus.get(row.index) if entry is not None else None

    def history(self, row: GpuRow) -> GpuHistory | None:
        return self._history.get(row.host, {}).get(row.index)

    def events(self, row: GpuRow) -> tuple[Event, ...]:
        entry = self.hosts.get(row.host)
        return entry.events.get(row.index, ()) if entry is not None else ()

    def flags(self, gpu: GpuView, now: float) -> list[Flag]:
        """What is wrong with a GPU, worst first; empty means it is fine. The head's
        fence comes first (``FENCE``), its drain (``DRAIN``) and ownership flags last:
        ``ROGUE`` / ``STRAY``, critical once ``enforce`` will signal (or has
        signalled) the process; ``CLK-LOW`` (held but idle, its clocks locked low by
        the head) after them all."""
        flags = gpu_flags(gpu.sample, self.events(gpu.row), now, self.health)
        state = self.head_states.get(gpu.uuid)
        if state == "unhealthy":
            flags.insert(0, Flag("FENCE", "crit"))
        elif state == "drained":
            flags.append(Flag("DRAIN", "info"))
        owned = self.owner_flags.get(gpu.uuid)
        if owned:
            for label in dict.fromkeys(f.label for f in owned):
                enforced = any(f.enforced for f in owned if f.label == label)
                flags.append(Flag(label, "crit" if enforced else "warn"))
        if gpu.uuid in self.clock_locks:
            flags.append(Flag(CLOCKS_LOW, "info"))
        return flags

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
        free = FREE_WORD in terms
        if free:
            terms = [t for t in terms if t != FREE_WORD]
        folded = set(collapsed)
        rows: list[Row] = []

        def wanted(gpu: GpuView) -> bool:
            return _matches(gpu, terms) and (not free or self.is_free(gpu))

        if not grouped:
            flat = [g for e in self.hosts.values() for g in e.gpus.values() if wanted(g)]
            for g in self._sorted(flat, sort):
                rows.append(g.row)
                rows.extend(g.slice_rows())  # a MIG card's slices, under it
            return rows
        for entry in self.hosts.values():
            if not terms and not free and sort.value is None:  # the usual case: no GpuView
                rows.append(HostRow(entry.name))
                if entry.name not in folded:
                    for index in entry.indices:
                        rows.append(GpuRow(entry.name, index))
                        gpu = entry.gpus.get(index)
                        if gpu is not None and gpu.slices:
                            rows.extend(gpu.slice_rows())
                continue
            gpus = [g for g in entry.gpus.values() if wanted(g)]
            if not gpus and (free or (terms and not _matches_text(entry.haystack, terms))):
                continue
            rows.append(HostRow(entry.name))
            if entry.name not in folded:
                for g in self._sorted(gpus, sort):
                    rows.append(g.row)
                    rows.extend(g.slice_rows())
        return rows

    def is_free(self, gpu: GpuView) -> bool:
        """Free: held by no job or claim, not fenced or drained, on a live host, and idle
        (no process, low utilisation, no memory held: ``gpu_is_idle``). Not free memory."""
        sample = gpu.sample
        if sample is None or not gpu_is_idle(sample):
            return False
        uuid = gpu.uuid
        if uuid in self.holders or uuid in self.head_states:
            return False
        entry = self.hosts.get(gpu.host)
        return entry is not None and entry.snapshot.status is HostStatus.LIVE

    def _sorted(self, gpus: list[GpuView], sort: SortKey) -> list[GpuView]:
        if sort.value is None:
            return gpus
        key = sort.value
        if sort.free_first:
            is_free = self.is_free
            return sorted(gpus, key=lambda g: (not is_free(g), -key(g)))
        return sorted(gpus, key=lambda g: -key(g))

    def summary(self, now: float) -> ClusterSummary:
        live = gpus = busy = used = total = problems = free = 0
        held, states = self.holders, self.head_states
        for entry in self.hosts.values():
            snapshot = entry.snapshot
            severity = host_severity(snapshot, now, self.health)
            totals = entry.totals
            if snapshot.status is HostStatus.LIVE:
                live += 1
                free += sum(1 for u in totals.idle if u not in held and u not in states)
            if severity in ("warn", "crit"):
                problems += 1
            gpus += totals.gpus
            busy += totals.busy
            used += totals.mem_used_mib
            total += totals.mem_total_mib
            if severity == "ok":  # a host in trouble counts once, not once per GPU
                problems += totals.problem_gpus(now)
        return ClusterSummary(live, len(self.hosts), gpus, busy, used, total, problems, free)

    def iter_gpus(self) -> Iterator[GpuView]:
        for entry in self.hosts.values():
            yield from entry.gpus.values()


def _matches_text(haystack: str, terms: list[str]) -> bool:
    return all(term in haystack for term in terms)


def _matches(gpu: GpuView, terms: list[str]) -> bool:
    return _matches_text(gpu.haystack, terms)
