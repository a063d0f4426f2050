"""The simulated NVML's health readings, in pynvml's shapes, and the faults behind them.

Functions of one card (``SimDevice``), which ``engine.SimNvml`` calls with the
card its handle names. Each answers as ``pynvml``'s function does (a tuple for
remapped rows, a list of page addresses for retired pages, an int for a state, a
struct filled through ``byref`` for the fabric) and raises ``NotSupported`` where
the model cannot (``spec.HEALTH``): a GeForce card has no ECC, remapping or
NVLink; an A100 or H100 remaps rows and has no page retirement; only Hopper SXM
has a fabric state.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

from ..nvml import NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml_error

if TYPE_CHECKING:
    from .device import SimDevice

FABRIC_IN_PROGRESS_SAMPLES = 3
"""Samples a ``fabric`` fault reads in progress before it reads not started."""
_PAGE = 0x1000
RESET_CLEARS = ("remap-pending", "orphan", "phantom")
"""Faults a GPU reset clears (with the ECC counts); the rest need the card itself fixed."""


class c_nvmlGpuFabricInfo_t(ctypes.Structure):
    """``nvmlGpuFabricInfo_t``, the fields pynvml's struct has."""

    _fields_ = [
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint8),
    ]


class c_nvmlGpuFabricInfoV_t(ctypes.Structure):
    """``nvmlGpuFabricInfo_v2_t`` (what ``nvmlDeviceGetGpuFabricInfoV`` fills)."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_uint8 * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint8),
        ("healthMask", ctypes.c_uint32),
    ]

    def __init__(self) -> None:
        super().__init__(version=0x02000024)


def _supported(dev: SimDevice, attr: str) -> SimDevice:
    if not getattr(dev.health, attr):
        raise nvml_error("NotSupported")
    return dev


def temperature_threshold(dev: SimDevice, threshold: int) -> int:
    """``nvmlDeviceGetTemperatureThreshold``."""
    if threshold == 0:  # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
        return dev.health.shutdown_c
    if threshold == 1:  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        return dev.health.slowdown_c
    raise nvml_error("NotSupported")


def remapped_rows(dev: SimDevice) -> tuple[int, int, int, int]:
    """``nvmlDeviceGetRemappedRows``: (correctable, uncorrectable, pending, failed)."""
    _supported(dev, "remap")
    pending = "remap-pending" in dev.faults
    failed = "remap-failed" in dev.faults
    uncorrectable = int(pending) + 2 * int(failed)
    return (0, uncorrectable, int(pending), int(failed))


def retired_pages(dev: SimDevice, cause: int) -> list[int]:
    """``nvmlDeviceGetRetiredPages``: the addresses of pages retired for ``cause``."""
    _supported(dev, "retired")
    if "retired" not in dev.faults:
        return []
    base = 0x3F0000000 + dev.index * 0x100000
    count = 2 if cause == 0 else 1  # multiple single-bit: 2 pages; double-bit: 1
    return [base + (cause * 8 + i) * _PAGE for i in range(count)]


def retired_pages_pending(dev: SimDevice) -> int:
    """``nvmlDeviceGetRetiredPagesPendingStatus``."""
    _supported(dev, "retired")
    return 1 if "retired" in dev.faults else 0


def persistence_mode(dev: SimDevice) -> int:
    """``nvmlDeviceGetPersistenceMode``."""
    if "persistence-off" in dev.faults:
        return 0
    return 1 if dev.health.persistence else 0


def pcie_replays(dev: SimDevice) -> int:
    """``nvmlDeviceGetPcieReplayCounter``."""
    return 3 * dev.age("pcie-down") if "pcie-down" in dev.faults else 0


def _link(dev: SimDevice, link: int) -> None:
    if not 0 <= link < dev.health.nvlinks:
        raise nvml_error("NotSupported" if dev.health.nvlinks == 0 else "InvalidArgument")


def nvlink_state(dev: SimDevice, link: int) -> int:
    """``nvmlDeviceGetNvLinkState``."""
    _link(dev, link)
    return 0 if link == 0 and "nvlink-down" in dev.faults else 1


def nvlink_errors(dev: SimDevice, link: int, counter: int) -> int:
    """``nvmlDeviceGetNvLinkErrorCounter``."""
    _link(dev, link)
    if not 0 <= counter <= 4:
        raise nvml_error("InvalidArgument")
    if link != 0 or "nvlink-down" not in dev.faults:
        return 0
    age = dev.age("nvlink-down") + 1
    # replay, recovery, CRC flit, CRC data, ECC data: a link going bad, then down.
    return (2 * age, age, 6 * age, 2 * age, 0)[counter]


def fabric_info(dev: SimDevice, ref: Any) -> int:
    """``nvmlDeviceGetGpuFabricInfo`` (and its ``V`` form): fills the struct ``ref``."""
    _supported(dev, "fabric")
    info = getattr(ref, "_obj", ref)  # ctypes.byref(struct), as pynvml is given it
    if "fabric" not in dev.faults:
        info.state, info.status = 3, 0  # completed, success
    elif dev.age("fabric") < FABRIC_IN_PROGRESS_SAMPLES:
        info.state, info.status = 2, 27  # in progress, NotReady
    else:
        info.state, info.status = 1, 27  # not started
    return 0


def reset_gpu(dev: SimDevice) -> int:
    """``nvmlDeviceResetGpu``, ``nvidia-smi --gpu-reset`` for one card: NotSupported on
    GeForce, InUse while a process is on it; else what a reset clears is gone (a
    pending remap is done, the volatile ECC counts are zero, memory no process held
    is free again)."""
    if dev.model.geforce:
        raise nvml_error("NotSupported")
    if dev.procs:
        raise nvml_error("InUse")
    for kind in RESET_CLEARS:
        dev.faults.discard(kind)
        dev.armed.pop(kind, None)
    dev.ecc_uncorrected = dev.ecc_corrected = 0
    dev.resets += 1
    return 0


def ecc_errors(dev: SimDevice, error_type: int) -> int:
    """``nvmlDeviceGetTotalEccErrors`` (either counter)."""
    if not dev.model.ecc:
        raise nvml_error("NotSupported")
    # No card in the simulator has a past: lifetime counts are this run's counts.
    if error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
        return dev.ecc_uncorrected
    return dev.ecc_corrected
