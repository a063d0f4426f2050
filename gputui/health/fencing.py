"""Which GPUs the head fences off by itself: the critical hardware conditions.

A fenced GPU takes no new claim or job until its condition clears or an admin
clears the fence (kept apart from an admin's drain, as Slurm keeps DOWN apart from
DRAIN). Pure: the head calls ``fence_reasons`` with each host snapshot it takes in
and the latest health reading of each of its GPUs (``LatestReadings``).

Each condition is judged from the latest reading of it: the card lost and its ECC
count from the latest sample (every sample reads them), a remap, the NVSwitch
fabric and the NVLinks from the latest *health reading* (one sample in
``health_every_s`` carries one). A condition that could not be judged (no reading
yet, NVML failed to read it, the card lost) is *unjudged*: a fence or an admin's
waiver for it holds until a fresh reading shows it cleared.

``clears`` says how a fence may lift by itself: ``condition`` when a later reading
no longer shows it (a lost card back after a reboot, an ECC count reset by a
reset), ``reboot`` when the host's ``boot_time`` is later than the fence (an Xid
leaves no reading behind to watch).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from gputui.common.i18n import N_
from gputui.config.models import HealthThresholds
from gputui.health import words as w
from gputui.health.applicable import on_fabric
from gputui.health.checks import fabric_trouble, nvlinks_down
from gputui.health.xid import CATALOGUE, info
from gputui.telemetry import HostSnapshot
from gputui.wire.messages import GpuSample, Sample

Clears = Literal["condition", "reboot"]

FENCE_XIDS = frozenset(code for code, entry in CATALOGUE.items() if entry.fence)
"""48, 64, 74, 79, 95 and 140."""

CONDITIONS = ("lost", "ecc-uncorrected", "remap-failed", "fabric", "nvlink-down", "remap-pending")
"""The fence codes of conditions a reading shows (an Xid's code is ``xid-NN``), worst first."""
_FROM_HEALTH = frozenset({"remap-failed", "remap-pending", "fabric", "nvlink-down"})
"""The conditions only a health reading shows."""


@dataclass(frozen=True, slots=True)
class Fence:
    code: str
    """A short name: ``lost``, ``xid-79``, ``ecc-uncorrected``, ``remap-failed`` ..."""
    reason: str
    """One line for a person."""
    clears: Clears


def rank(code: str) -> int:
    """How bad a fence's condition is: lower is worse (``lost``, then any Xid, then
    the other conditions in ``CONDITIONS``' order)."""
    if code == "lost":
        return 0
    if code.startswith("xid-"):
        return 1
    return 2 + CONDITIONS.index(code) if code in CONDITIONS else len(CONDITIONS) + 2


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the latest readings say of one GPU's fencing conditions."""

    fences: tuple[Fence, ...] = ()
    """Every fencing condition it shows now, worst first."""
    unjudged: frozenset[str] = frozenset()
    """The conditions that could not be judged now: neither present nor cleared."""

    @property
    def worst(self) -> Fence | None:
        return self.fences[0] if self.fences else None

    def may_hold(self, code: str) -> bool:
        """Whether ``code``'s condition shows, or no fresh reading says it cleared."""
        return code in self.unjudged or any(f.code == code for f in self.fences)


NOTHING_KNOWN = Verdict((), frozenset(CONDITIONS))
"""A GPU its host's latest sample does not list: no condition can be judged."""


class LatestReadings:
    """The latest health reading of each GPU (the last sample of it with
    ``health_read``), kept per host by whoever judges a host's samples."""

    def __init__(self) -> None:
        self._by_uuid: dict[str, GpuSample] = {}

    def take(self, sample: Sample) -> None:
        for gpu in sample.gpus:
            if gpu.health_read:
                self._by_uuid[gpu.uuid] = gpu

    def get(self, uuid: str) -> GpuSample | None:
        return self._by_uuid.get(uuid)

    def read(self, uuids: Iterable[str]) -> bool:
        """Whether every one of ``uuids`` has had a health reading."""
        return all(u in self._by_uuid for u in uuids)

    def as_map(self) -> Mapping[str, GpuSample]:
        return self._by_uuid


def gpu_verdict(
    sample: GpuSample,
    health: GpuSample | None,
    thresholds: HealthThresholds,
    *,
    xids: Iterable[int] = (),
) -> Verdict:
    """One GPU's fencing conditions from its latest sample, its latest health reading
    (``health``; None: none yet) and the Xids it reported since its host booted."""
    found: list[Fence] = []
    unjudged: set[str] = set()
    lost = sample.state == "lost"
    if lost:
        found.append(Fence("lost", N_("the GPU is lost (NVML GpuIsLost)"), "condition"))
        unjudged.update(c for c in CONDITIONS if c != "lost")  # nothing else can be read
    for code in dict.fromkeys(xids):
        entry = info(code)
        if entry.fence:
            found.append(
                Fence(f"xid-{code}", w.FENCE_XID.format(code=code, meaning=entry.meaning), "reboot")
            )
    if lost:
        return Verdict(tuple(found), frozenset(unjudged))
    ecc = sample.ecc_uncorrected
    if ecc is None:
        unjudged.add("ecc-uncorrected")
    elif ecc > thresholds.ecc_uncorrected_max:
        found.append(
            Fence(
                "ecc-uncorrected",
                w.FENCE_ECC.format(n=ecc, most=thresholds.ecc_uncorrected_max),
                "condition",
            )
        )
    if health is None:
        unjudged.update(_FROM_HEALTH)
    else:
        found += _from_health(sample, health, thresholds, unjudged)
    found.sort(key=lambda f: rank(f.code))
    return Verdict(tuple(found), frozenset(unjudged))


def _from_health(
    sample: GpuSample, health: GpuSample, thresholds: HealthThresholds, unjudged: set[str]
) -> list[Fence]:
    out: list[Fence] = []
    if health.remap_failed is None:
        unjudged.add("remap-failed")
    elif health.remap_failed:
        out.append(
            Fence("remap-failed", N_("a memory row remap failed: replace the card"), "condition")
        )
    idle = not sample.processes and (sample.util_gpu or 0) == 0
    if health.remap_pending is None:
        unjudged.add("remap-pending")
    elif health.remap_pending and idle:
        out.append(
            Fence(
                "remap-pending",
                N_("a memory row remap waits for a reset and the card is idle"),
                "condition",
            )
        )
    if thresholds.fence_fabric:
        trouble = fabric_trouble(health)
        if health.fabric_state is None:
            unjudged.add("fabric")
        elif trouble is not None:
            out.append(Fence("fabric", w.FABRIC_NOT_READY.format(what=trouble), "condition"))
    if thresholds.fence_nvlink_down and on_fabric(health.fabric_state):
        down = nvlinks_down(health)
        if down:
            links = ", ".join(map(str, down))
            why = w.FENCE_NVLINK.format(links=links)
            out.append(Fence("nvlink-down", why, "condition"))
        elif health.nvlinks is None or any(link.active is None for link in health.nvlinks):
            unjudged.add("nvlink-down")
    elif thresholds.fence_nvlink_down and health.fabric_state is None:
        unjudged.add("nvlink-down")  # not known whether the card is on a fabric
    return out


def fence_reasons(
    snapshot: HostSnapshot,
    now: float,
    thresholds: HealthThresholds,
    readings: Mapping[str, GpuSample] | None = None,
) -> dict[str, Verdict]:
    """GPU uuid -> what its readings say, for every GPU of ``snapshot``'s sample
    (``now``: the head's clock; an Xid stamped later than it is still counted;
    ``readings``: the latest health reading of each GPU, by uuid).

    Only a live host's readings count: a host that does not answer is down, which
    keeps its GPUs off the schedule already, and its last readings are old."""
    sample = snapshot.sample
    if sample is None or snapshot.hello is None:
        return {}
    readings = readings or {}
    started = snapshot.hello.boot_time
    xids: dict[str, list[int]] = {}
    for event in snapshot.events:
        if event.xid is None or event.gpu_uuid is None:
            continue
        if started is not None and event.time is not None and event.time < started:
            continue  # before the last reboot: the reboot cleared it
        xids.setdefault(event.gpu_uuid, []).append(event.xid)
    return {
        gpu.uuid: gpu_verdict(
            gpu,
            gpu if gpu.health_read else readings.get(gpu.uuid),
            thresholds,
            xids=xids.get(gpu.uuid, ()),
        )
        for gpu in sample.gpus
    }
