"""Which GPUs the head fences off by itself: the critical hardware conditions.

A fenced GPU takes no new claim or job until its condition clears or an admin
clears the fence (kept apart from an admin's drain, as Slurm keeps DOWN apart from
DRAIN). Pure: the head calls ``fence_reasons`` with each host snapshot it takes in.

``clears`` says how a fence may lift by itself: ``condition`` when a later sample
no longer shows it (a lost card back after a reboot, an ECC count reset by a
reset), ``reboot`` when the host's ``boot_time`` is later than the fence (an Xid
leaves no reading behind to watch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gputui.config import HealthThresholds
from gputui.protocol import GpuSample
from gputui.telemetry import HostSnapshot

from .xid import CATALOGUE, info

Clears = Literal["condition", "reboot"]

FENCE_XIDS = frozenset(code for code, entry in CATALOGUE.items() if entry.fence)
"""48, 64, 74, 79, 95 and 140."""


@dataclass(frozen=True, slots=True)
class Fence:
    code: str
    """A short name: ``lost``, ``xid-79``, ``ecc-uncorrected``, ``remap-failed`` ..."""
    reason: str
    """One line for a person."""
    clears: Clears


def gpu_fence(
    sample: GpuSample, thresholds: HealthThresholds, *, xids: tuple[int, ...] = ()
) -> Fence | None:
    """The worst fencing condition of one GPU now (None: none), given the Xids it
    reported since the helper started."""
    if sample.state == "lost":
        return Fence("lost", "the GPU is lost (NVML GpuIsLost)", "condition")
    for code in xids:
        entry = info(code)
        if entry.fence:
            return Fence(f"xid-{code}", f"Xid {code}: {entry.meaning}", "reboot")
    ecc = sample.ecc_uncorrected
    if ecc is not None and ecc > thresholds.ecc_uncorrected_max:
        return Fence(
            "ecc-uncorrected",
            f"{ecc} uncorrected ECC errors (more than {thresholds.ecc_uncorrected_max})",
            "condition",
        )
    if sample.remap_failed:
        return Fence("remap-failed", "a memory row remap failed: replace the card", "condition")
    idle = not sample.processes and (sample.util_gpu or 0) == 0
    if sample.remap_pending and idle:
        return Fence(
            "remap-pending",
            "a memory row remap waits for a reset and the card is idle",
            "condition",
        )
    return None


def fence_reasons(
    snapshot: HostSnapshot, now: float, thresholds: HealthThresholds
) -> dict[str, Fence]:
    """GPU uuid -> why it should be fenced, for the GPUs of ``snapshot`` that should
    (``now``: the head's clock; an Xid stamped later than it is still counted).

    Only a live host's readings count: a host that does not answer is down, which
    keeps its GPUs off the schedule already, and its last readings are old."""
    sample = snapshot.sample
    if sample is None or snapshot.hello is None:
        return {}
    started = snapshot.hello.boot_time
    xids: dict[str, list[int]] = {}
    for event in snapshot.events:
        if event.xid is None or event.gpu_uuid is None:
            continue
        if started is not None and event.time is not None and event.time < started:
            continue  # before the last reboot: the reboot cleared it
        xids.setdefault(event.gpu_uuid, []).append(event.xid)
    out: dict[str, Fence] = {}
    for gpu in sample.gpus:
        fence = gpu_fence(gpu, thresholds, xids=tuple(xids.get(gpu.uuid, ())))
        if fence is not None:
            out[gpu.uuid] = fence
    return out
