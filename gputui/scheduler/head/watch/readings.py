"""What each GPU read lately, kept by the head for ``gputui incident``.

The head sees every sample of every host; once a ``every_s`` per host it keeps a
compact reading of each GPU (utilisation, memory, temperature, power, throttle
reasons, uncorrected ECC, state), the newest ``MAX_READINGS`` in all, shared out
per GPU (a day at a minute apart for up to ``MAX_READINGS // 1440`` GPUs, less per
GPU beyond), and none older than the head's ``keep_s``.

Each reading gets the next number of one sequence. ``History`` holds the readings
not stored yet (all of them, when nothing stores them); ``watch.history`` hands
them to the head's writer about once a minute, which stores them with the number
of the newest (``Tx.readings``) in one transaction. A read takes the stored
readings from a snapshot and adds the ones held here with a higher number than
that snapshot's: the same answer before and after a flush.

A host's readings never go back in time (a sample older than the host's previous
reading is not kept, across a restart too: ``load``), so a GPU's readings in
sequence order are in time order, and "the newest" is the same either way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Event

if TYPE_CHECKING:
    from gputui.scheduler.store.api import ReadingRow, Readings

EVERY_S = 60.0
MAX_READINGS = 500_000
PER_GPU = 1440
KEEP_S = 14 * 86400.0
"""Readings older than this (by the head's clock) go."""
MIN_SHARE = 10
PRUNE_TURNS = 64
"""Each host's GPUs are cut to their share once in this many flushes (a few hosts a
flush: a pass over a host's rows each, ~4 ms for 8 GPUs at 488 readings)."""
THROTTLE_MAX = 256
UUID_MAX = 96
EVENTS_PER_HOST = 500
"""The Xids and SXids the head received from a host that it holds (the newest; in
memory, since the head's start: a kernel log's history comes again with a reconnect)."""
GpuKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Reading:
    seq: int
    uuid: str
    time: float
    state: str
    util: int | None
    mem_mib: int | None
    temp_c: int | None
    power_mw: int | None
    throttle: str
    ecc_uncorrected: int | None

    def view(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "state": self.state,
            "util_gpu": self.util,
            "mem_used_mib": self.mem_mib,
            "temp_c": self.temp_c,
            "power_w": None if self.power_mw is None else self.power_mw / 1000,
            "throttle": self.throttle,
            "ecc_uncorrected": self.ecc_uncorrected,
        }

    def row(self, key: GpuKey) -> ReadingRow:
        host, gpu = key
        return (
            self.seq,
            host,
            gpu,
            self.uuid,
            self.time,
            self.state,
            self.util,
            self.mem_mib,
            self.temp_c,
            self.power_mw,
            self.throttle,
            self.ecc_uncorrected,
        )

    @classmethod
    def of_row(cls, row: ReadingRow) -> Reading:
        seq, _, _, uuid, at, state, util, mem, temp, power, throttle, ecc = row
        return cls(seq, uuid, at, state, util, mem, temp, power, throttle, ecc)


@dataclass(frozen=True, slots=True)
class Flush:
    """Readings for the writer to store: rows, the number of the newest, and what to
    prune on the way (the GPUs of ``hosts`` cut to ``share`` readings; all older than
    ``cutoff``)."""

    rows: list[ReadingRow]
    upto: int
    share: int
    hosts: list[str]
    cutoff: float | None


@dataclass(frozen=True, slots=True)
class Kept:
    """A copy of what ``History`` holds about one host, for a read off the loop."""

    host: str
    every_s: float
    started: float | None
    share: int
    unstored: dict[int, tuple[Reading, ...]] = field(default_factory=dict)
    """GPU index -> its readings not stored yet (known GPUs with none: empty)."""
    events: tuple[Event, ...] = ()
    """The Xids and SXids the head received from the host, oldest first."""


class History:
    """Per (host, GPU index): the readings not stored yet, oldest first."""

    def __init__(self, every_s: float = EVERY_S, budget: int = MAX_READINGS) -> None:
        self.every_s = every_s
        self.budget = budget
        self.started: float | None = None
        self._gpus: dict[GpuKey, deque[Reading]] = {}
        """Every GPU the head keeps readings of (stored ones too), with those unstored."""
        self._last: dict[str, float] = {}
        self._per = max(MIN_SHARE, min(PER_GPU, budget))
        self._longest = 0
        """No GPU holds more readings than this (an upper bound: ``_share``)."""
        self.seq = 0
        """The number of the newest reading."""
        self.stored = 0
        """Readings up to this number are in the store (or were pruned there)."""
        self.sending = 0
        """Readings up to this number are handed to the writer."""
        self._turn = 0
        self._events: dict[str, dict[tuple[object, ...], Event]] = {}
        self._events_from: dict[str, tuple[Event, ...]] = {}

    def load(self, seq: int, gpus: Iterable[tuple[str, int, float, float]]) -> None:
        """What the store holds: the newest number, and per GPU (host, index, the time of
        its oldest reading, of its newest)."""
        self.seq = self.stored = self.sending = max(self.seq, seq)
        for host, index, oldest, newest in gpus:
            self._gpus.setdefault((host, index), deque(maxlen=self._per))
            self._last[host] = max(self._last.get(host, newest), newest)
            self.started = oldest if self.started is None else min(self.started, oldest)
        self._share(len(self._gpus))

    @property
    def share(self) -> int:
        return self._per

    def record(self, snap: HostSnapshot) -> None:
        if snap.events and snap.events is not self._events_from.get(snap.name):
            self._hold_events(snap.name, snap.events)
        sample = snap.sample
        if sample is None or sample.time is None or snap.status is not HostStatus.LIVE:
            return
        last = self._last.get(snap.name)
        if last is not None and not sample.time - last >= self.every_s:
            return
        self._last[snap.name] = sample.time
        if self.started is None:
            self.started = sample.time
        for gpu in sample.gpus:
            key = (snap.name, gpu.index)
            kept = self._gpus.get(key)
            if kept is None:
                kept = self._gpus[key] = deque(maxlen=self._share(len(self._gpus) + 1))
            elif kept.maxlen != self._per:  # a new share, its readings already within it
                kept = self._gpus[key] = deque(kept, maxlen=self._per)
            self.seq += 1
            power = gpu.power_w
            kept.append(
                Reading(
                    self.seq,
                    gpu.uuid[:UUID_MAX],
                    sample.time,
                    gpu.state,
                    gpu.util_gpu,
                    gpu.mem_used_mib,
                    gpu.temp_c,
                    None if power is None else round(power * 1000),
                    "+".join(gpu.throttle or ())[:THROTTLE_MAX],
                    gpu.ecc_uncorrected,
                )
            )
            self._longest = max(self._longest, len(kept))

    def _hold_events(self, host: str, events: tuple[Event, ...]) -> None:
        """The host's Xids and SXids (its link sends the newest few hundred with every
        snapshot): each held once, the newest ``EVENTS_PER_HOST``."""
        self._events_from[host] = events
        held = self._events.setdefault(host, {})
        for e in events:
            if (e.xid is not None or e.sxid is not None) and e.time is not None:
                held.setdefault((e.time, e.source, e.xid, e.sxid, e.gpu_uuid, e.pci_bus_id), e)
        if len(held) > EVENTS_PER_HOST:
            newest = sorted(held.items(), key=lambda kv: kv[1].time or 0.0)[-EVENTS_PER_HOST:]
            self._events[host] = dict(newest)

    def _share(self, gpus: int) -> int:
        """Each GPU's share of the budget once there are ``gpus``; a smaller share cuts
        every GPU's readings kept so far to it (the oldest go). While a fleet
        connects, nearly every new GPU shrinks the share, but each GPU holds only the
        few readings not stored yet: the GPUs are cut only when one may hold more than
        the new share (``_longest``), not each time (that was quadratic). A GPU's
        deque takes the new share as its bound at its next reading."""
        share = max(MIN_SHARE, min(PER_GPU, self.budget // max(gpus, 1)))
        if share != self._per:
            self._per = share
            if share < self._longest:
                for key, kept in self._gpus.items():
                    self._gpus[key] = deque(kept, maxlen=share)
                self._longest = share
        return share

    # -- to the store and back ------------------------------------------------------------

    def unsent(self) -> int:
        """How many readings are held that the writer was not handed."""
        return self.seq - self.sending

    def take(self, cutoff: float | None, turns: int = PRUNE_TURNS) -> Flush:
        """The readings not handed to the writer yet (``resend`` hands them again when
        it did not store them), and the hosts whose GPUs to cut to their share this
        time: each host once in ``turns`` flushes."""
        rows = [
            reading.row(key)
            for key, kept in self._gpus.items()
            for reading in kept
            if reading.seq > self.sending
        ]
        hosts = sorted({host for host, _ in self._gpus})
        hosts = hosts[self._turn % max(turns, 1) :: max(turns, 1)]
        self._turn += 1
        self.sending = self.seq
        return Flush(rows, self.seq, self._per, hosts, cutoff)

    def stored_upto(self, upto: int) -> None:
        """The writer stored the readings up to ``upto``: they are no longer held here."""
        self.stored = max(self.stored, upto)
        longest = 0
        for kept in self._gpus.values():
            while kept and kept[0].seq <= self.stored:
                kept.popleft()
            longest = max(longest, len(kept))
        self._longest = longest

    def resend(self) -> None:
        """The writer did not store what it was handed: the next ``take`` has it again."""
        self.sending = self.stored

    def kept(self, host: str, gpu: int | None) -> Kept:
        unstored = {
            index: tuple(kept)
            for (name, index), kept in sorted(self._gpus.items())
            if name == host and (gpu is None or index == gpu)
        }
        events = sorted(self._events.get(host, {}).values(), key=lambda e: e.time or 0.0)
        if gpu is not None:
            events = [e for e in events if e.gpu_index in (None, gpu) or e.sxid is not None]
        return Kept(host, self.every_s, self.started, self._per, unstored, tuple(events))

    def readings(self, host: str, gpu: int | None, since: float) -> Iterator[tuple[int, Reading]]:
        """(GPU index, reading) held of ``host`` (one GPU of it, or all) since ``since``."""
        for index, reading in merged(self.kept(host, gpu), None):
            if reading.time >= since:
                yield index, reading


def merged(kept: Kept, stored: Readings | None) -> Iterator[tuple[int, Reading]]:
    """Each GPU's newest ``share`` readings, stored (in a snapshot's ``stored``) and
    held, oldest first."""
    stored_upto = stored.seq() if stored is not None else 0
    for index, unstored in kept.unstored.items():
        rows = (
            []
            if stored is None
            else [Reading.of_row(r) for r in stored.of_gpu(kept.host, index, kept.share)]
        )
        rows += [r for r in unstored if r.seq > stored_upto]
        for reading in rows[-kept.share :]:
            yield index, reading


def incident_view(
    history: History | Kept,
    host: str,
    gpu: int | None,
    since: float,
    *,
    stored: Readings | None = None,
    cutoff: float | None = None,
) -> dict[str, Any]:
    """The ``incident`` answer: the readings kept (none older than ``cutoff``), since
    when the head has kept any, and the Xids and SXids it received since ``since``."""
    kept = history.kept(host, gpu) if isinstance(history, History) else history
    start = since if cutoff is None else max(since, cutoff)
    started = kept.started
    if started is not None and cutoff is not None:
        started = max(started, cutoff)
    return {
        "every_s": kept.every_s,
        "kept_since": started,
        "readings": [
            {"gpu": index, **reading.view()}
            for index, reading in merged(kept, stored)
            if reading.time >= start
        ],
        "events": [
            {
                "time": e.time,
                "source": e.source,
                "gpu": e.gpu_index,
                "uuid": e.gpu_uuid,
                "xid": e.xid,
                "sxid": e.sxid,
                "bus_id": e.pci_bus_id,
                "text": e.text,
            }
            for e in kept.events
            if e.time is not None and e.time >= since
        ],
    }
