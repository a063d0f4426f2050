"""The simulated NVML's health readings, in pynvml's shapes, and the faults behind them.

Each function answers as ``pynvml``'s does (a tuple for remapped rows, a list of
page addresses for retired pages, an int for a state, a struct filled through
``byref`` for the fabric) and raises ``NotSupported`` where the model cannot
(``spec.HEALTH``): a GeForce card has no ECC, remapping or NVLink; an A100 or
H100 remaps rows and has no page retirement; only Hopper SXM has a fabric state.
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


class SimHealth:
    """Mixed into ``SimNvml``: the health part of the pynvml surface."""

    c_nvmlGpuFabricInfo_t = c_nvmlGpuFabricInfo_t
    c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfoV_t

    def _dev(self, handle: Any) -> SimDevice:  # pragma: no cover - SimNvml's
        raise NotImplementedError

    def _health(self, handle: Any, attr: str) -> SimDevice:
        dev = self._dev(handle)
        if not getattr(dev.health, attr):
            raise nvml_error("NotSupported")
        return dev

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        dev = self._dev(handle)
        if threshold == 0:  # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
            return dev.health.shutdown_c
        if threshold == 1:  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            return dev.health.slowdown_c
        raise nvml_error("NotSupported")

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        dev = self._health(handle, "remap")
        pending = "remap-pending" in dev.faults
        failed = "remap-failed" in dev.faults
        uncorrectable = int(pending) + 2 * int(failed)
        return (0, uncorrectable, int(pending), int(failed))

    def nvmlDeviceGetRetiredPages(self, handle: Any, cause: int) -> list[int]:
        dev = self._health(handle, "retired")
        if "retired" not in dev.faults:
            return []
        base = 0x3F0000000 + dev.index * 0x100000
        count = 2 if cause == 0 else 1  # multiple single-bit: 2 pages; double-bit: 1
        return [base + (cause * 8 + i) * _PAGE for i in range(count)]

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int:
        dev = self._health(handle, "retired")
        return 1 if "retired" in dev.faults else 0

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        dev = self._dev(handle)
        if "persistence-off" in dev.faults:
            return 0
        return 1 if dev.health.persistence else 0

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        dev = self._dev(handle)
        return 3 * dev.age("pcie-down") if "pcie-down" in dev.faults else 0

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        dev = self._dev(handle)
        if not 0 <= link < dev.health.nvlinks:
            raise nvml_error("NotSupported" if dev.health.nvlinks == 0 else "InvalidArgument")
        return 0 if link == 0 and "nvlink-down" in dev.faults else 1

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:
        dev = self._dev(handle)
        if not 0 <= link < dev.health.nvlinks:
            raise nvml_error("NotSupported" if dev.health.nvlinks == 0 else "InvalidArgument")
        if not 0 <= counter <= 4:
            raise nvml_error("InvalidArgument")
        if link != 0 or "nvlink-down" not in dev.faults:
            return 0
        age = dev.age("nvlink-down") + 1
        # replay, recovery, CRC flit, CRC data, ECC data: a link going bad, then down.
        return (2 * age, age, 6 * age, 2 * age, 0)[counter]

    def _fabric(self, handle: Any, ref: Any) -> int:
        dev = self._health(handle, "fabric")
        info = getattr(ref, "_obj", ref)  # ctypes.byref(struct), as pynvml is given it
        if "fabric" not in dev.faults:
            info.state, info.status = 3, 0  # completed, success
        elif dev.age("fabric") < FABRIC_IN_PROGRESS_SAMPLES:
            info.state, info.status = 2, 27  # in progress, NotReady
        else:
            info.state, info.status = 1, 27  # not started
        return 0

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, ref: Any) -> int:
        return self._fabric(handle, ref)

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, ref: Any) -> int:
        return self._fabric(handle, ref)

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        return self._dev(handle).index

    def nvmlDeviceResetGpu(self, handle: Any) -> int:
        """``nvidia-smi --gpu-reset`` for one card: NotSupported on GeForce, InUse while
        a process is on it; else what a reset clears is gone (a pending remap is done,
        the volatile ECC counts are zero, memory no process held is free again)."""
        dev = self._dev(handle)
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

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter: int) -> int:
        dev = self._dev(handle)
        if not dev.model.ecc:
            raise nvml_error("NotSupported")
        # No card in the simulator has a past: lifetime counts are this run's counts.
        if error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            return dev.ecc_uncorrected
        return dev.ecc_corrected
