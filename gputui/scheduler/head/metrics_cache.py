"""What a scrape of ``/metrics`` keeps for the next one (``ScrapeCache``).

Most readings of most GPUs do not change between two scrapes, and a GPU's labels
change only when a job or a claim takes or frees it. So the cache keeps, per host,
the text of its GPUs' lines in every family (one ``bytes`` per family), and per GPU
its label block and the value of each reading it last wrote. A scrape compares what
the view holds now with what it kept, group by group (the sample's readings: skipped
outright while the sample is the same object; the health reading likewise; the
NVLink sums; the head's own energy and Xid), writes again only the lines whose value
changed, and joins again only the families of a host that had one.

It is bounded by the fleet: a host that is no longer in the view (or no longer live)
is dropped at the end of the scrape, a GPU that left its host's sample with it. Not
thread-safe: one scrape at a time (the server holds a lock around it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from gputui.scheduler.head.metrics_dcgm import GPU_FIELDS, NO_HEALTH, NO_LINKS, GpuSeries
from gputui.scheduler.head.metrics_state import LINK_COUNTERS, FleetView, Holding, HostView
from gputui.scheduler.head.metrics_text import GPU_LABELS, block, number
from gputui.wire.messages import GpuSample

Value = float | int | bool | None

_NOW = [p for p, s in enumerate(GPU_FIELDS) if s.attr is not None and s.source == "now"]
_HEALTH = [p for p, s in enumerate(GPU_FIELDS) if s.attr is not None and s.source == "health"]
_DERIVED = [p for p, s in enumerate(GPU_FIELDS) if s.attr is None]
_LINKS = [(p, LINK_COUNTERS.index(s.attr or "")) for p, s in enumerate(GPU_FIELDS)
          if s.source == "links"]  # fmt: skip
_LINK_AT = tuple(p for p, _ in _LINKS)
_LINK_OF = tuple(k for _, k in _LINKS)
_OWN = {s.attr: p for p, s in enumerate(GPU_FIELDS) if s.source == "series"}
_ENERGY, _XID = _OWN.pop("energy_mj"), _OWN.pop("last_xid")
assert not _OWN, f"a GPU field read off the series the cache does not follow: {_OWN}"
_now_values = attrgetter(*(GPU_FIELDS[p].attr or "" for p in _NOW))
_health_values = attrgetter(*(GPU_FIELDS[p].attr or "" for p in _HEALTH))
_NAMES = [s.name.encode() for s in GPU_FIELDS]
_ALL = range(len(GPU_FIELDS))
_INDEX = attrgetter("index")


@dataclass(slots=True)
class _Gpu:
    """One GPU's lines as the last scrape wrote them."""

    key: tuple[object, ...]
    """What its labels are made of (index, uuid, model, host names, holder, pool)."""
    block: bytes
    now: GpuSample | None = None
    health: GpuSample | None = None
    now_values: tuple[Value, ...] = ()
    health_values: tuple[Value, ...] = ()
    links: tuple[int | None, ...] | None = None
    values: list[Value] = field(default_factory=lambda: [None] * len(GPU_FIELDS))
    tails: list[bytes] = field(default_factory=lambda: [b""] * len(GPU_FIELDS))
    """`` 42.0\\n`` per family (``b""``: no value, no line)."""


@dataclass(slots=True)
class _Host:
    sample: object
    gpus: list[GpuSample]
    """The sample's GPUs in index order."""
    lines: list[_Gpu]
    chunks: list[bytes] = field(default_factory=lambda: [b""] * len(GPU_FIELDS))
    """Per family, the lines of all its GPUs."""


class ScrapeCache:
    MAX_TAILS = 100_000

    def __init__(self) -> None:
        self._hosts: dict[str, _Host] = {}
        self.tails: dict[Value, bytes] = {}
        self._bodies: list[bytes] = []

    def __len__(self) -> int:
        """How many hosts it keeps."""
        return len(self._hosts)

    def bodies(self, view: FleetView, heads: Sequence[bytes]) -> list[bytes]:
        """Per GPU family (``GPU_FIELDS`` order), its text: ``heads[p]`` and every live
        host's lines in host order (``b""`` when no GPU has the reading). A family in
        which no line changed is the same ``bytes`` as last time."""
        if len(self.tails) >= self.MAX_TAILS:
            self.tails = {}
        kept: dict[str, _Host] = {}
        holders = view.queue.holders if view.queue is not None else {}
        changed: set[int] = set()
        for host in view.hosts:
            if host.live and host.sample is not None:
                kept[host.name] = self._host(view, host, holders, changed)
        if list(kept) != list(self._hosts) or len(self._bodies) != len(heads):
            changed.update(_ALL)
            self._bodies = [b""] * len(heads)
        self._hosts = kept
        hosts = list(kept.values())
        for p in changed:
            column = [h.chunks[p] for h in hosts]
            self._bodies[p] = b"".join([heads[p], *column]) if any(column) else b""
        return self._bodies

    def _host(
        self, view: FleetView, host: HostView, holders: Mapping[str, Holding], changed: set[int]
    ) -> _Host:
        name, hostname, sample, readings = host.name, host.hostname, host.sample, host.readings
        assert sample is not None
        entry = self._hosts.get(name)
        dirty: set[int] = set()
        if entry is None or entry.sample is not sample:
            gpus = sorted(sample.gpus, key=_INDEX)
            old = entry.lines if entry is not None else []
            if entry is None or len(gpus) != len(old):
                entry = _Host(sample, gpus, [_Gpu((), b"") for _ in gpus])
                dirty.update(_ALL)
            entry.sample, entry.gpus = sample, gpus
        facts, pools, tails = view.gpus, view.pools, self.tails
        energy, xids, links = view.energy_mj, view.last_xid, view.links
        for gpu, e in zip(entry.gpus, entry.lines, strict=True):
            uuid = gpu.uuid
            held: Holding | None = holders.get(uuid)
            known = facts.get(uuid)
            model = known.model if known is not None else ""
            pool = (known.pool if known is not None else pools.get(name, "")) if held else ""
            key = (gpu.index, uuid, model, hostname, name, held, pool)
            if key != e.key:
                row = (str(gpu.index), uuid, model, hostname, hostname, name,
                       f"{held.kind}:{held.id}" if held else "",
                       held.user if held else "", pool)  # fmt: skip
                e.key, e.block = key, block(GPU_LABELS, row).encode()
                dirty.update(_ALL)  # (its values' text stands)
            health = readings.get(uuid, NO_HEALTH)
            moved = False
            if gpu is not e.now:
                e.now = gpu
                got = _now_values(gpu)
                if got != e.now_values:
                    e.now_values, moved = got, True
                    _update(e, _NOW, got, dirty, tails)
            if health is not e.health:
                e.health = health
                got = _health_values(health)
                if got != e.health_values:
                    e.health_values, moved = got, True
                    _update(e, _HEALTH, got, dirty, tails)
            if moved and _DERIVED:
                series = GpuSeries(name, hostname, gpu.index, uuid, model, gpu, health,
                                   None, None, NO_LINKS)  # fmt: skip
                _update(e, _DERIVED, [GPU_FIELDS[p].read(series) for p in _DERIVED], dirty, tails)
            summed = links.get(uuid, NO_LINKS)
            if summed != e.links:
                e.links = summed
                _update(e, _LINK_AT, [summed[k] for k in _LINK_OF], dirty, tails)
            values = e.values
            v = energy.get(uuid)  # (new with every sample: no call for it)
            if v != values[_ENERGY]:
                values[_ENERGY] = v
                e.tails[_ENERGY] = b"" if v is None else f" {number(v + 0.0)}\n".encode()
                dirty.add(_ENERGY)
            v = xids.get(uuid)
            if v != values[_XID]:
                _update(e, (_XID,), (v,), dirty, tails)
        chunks, lines = entry.chunks, entry.lines
        for p in dirty:
            head = _NAMES[p]
            chunks[p] = b"".join(
                [b for e in lines if e.tails[p] for b in (head, e.block, e.tails[p])]
            )
        changed |= dirty
        return entry


Tails = dict[Value, bytes]


def _update(
    e: _Gpu, at: Sequence[int], got: Sequence[Value], dirty: set[int], tails: Tails
) -> None:
    """The values of families ``at``: the lines of those that changed written again
    (values that compare equal write the same text: ``_tail`` writes -0.0 as 0.0)."""
    values, out = e.values, e.tails
    for p, v in zip(at, got, strict=True):
        if v != values[p]:
            values[p] = v
            out[p] = b"" if v is None else (tails.get(v) or _tail(v, tails))
            dirty.add(p)


def _tail(value: float | int | bool, into: dict[Value, bytes]) -> bytes:
    # (True == 1 == 1.0 share a key: all three are written "1.0"; -0.0 and 0.0: "0.0")
    found = into[value] = f" {number(value + 0.0)}\n".encode()
    return found


def tail(value: float | int | bool, into: dict[Value, bytes]) -> bytes:
    """`` VALUE\\n`` as ``render`` writes it (kept in ``into``)."""
    return into.get(value) or _tail(value, into)
