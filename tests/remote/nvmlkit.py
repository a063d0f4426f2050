"""A fake NVML on the real ``pynvml`` module: the functions stubbed with these GPUs'
readings, in pynvml's own shapes, raising real ``NVMLError`` subclasses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

MIB = 1024 * 1024
ERRORS = {
    "NotSupported": pynvml.NVML_ERROR_NOT_SUPPORTED,
    "GpuIsLost": pynvml.NVML_ERROR_GPU_IS_LOST,
    "Unknown": pynvml.NVML_ERROR_UNKNOWN,
    "FunctionNotFound": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    "NoPermission": pynvml.NVML_ERROR_NO_PERMISSION,
    "LibRmVersionMismatch": pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    "Timeout": pynvml.NVML_ERROR_TIMEOUT,
}


@dataclass
class FakeGpu:
    """One card's readings, in NVML's own units (bytes, milliwatts)."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-11111111-2222-3333-4444-555555555555"
    bus: str = "00000000:18:00.0"
    total_mib: int = 81559
    used_mib: int = 19818
    util: int = 100
    util_mem: int = 11
    temp: int = 59
    power_mw: int = 631950
    limit_mw: int = 700000
    fan: int | None = None  # None: NotSupported (passively cooled)
    sm: int = 1980
    mem_clock: int = 2619
    throttle: int = 0
    ecc: bool = True
    pcie: tuple[int, int] = (5, 16)
    procs: list[tuple[int, int]] = field(default_factory=list)  # (pid, MiB)
    fail: dict[str, str] = field(default_factory=dict)  # function name -> NVML error name
    # Health readings, as an H100 SXM answers them (None: NotSupported).
    remap: tuple[int, int, int, int] | None = (0, 0, 0, 0)  # corr, unc, pending, failure
    retired: tuple[list[int], list[int], int] | None = None  # SBE pages, DBE pages, pending
    ecc_total: tuple[int, int] = (0, 0)  # aggregate corrected, uncorrected
    persistence: int = 1
    replays: int = 9
    nvlinks: int = 18
    nvlink_down: set[int] = field(default_factory=set)
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, counter)
    fabric: tuple[int, int] | None = (3, 0)  # state, status
    thresholds: tuple[int, int] = (89, 95)  # slowdown, shutdown
    # Clocks, as an H100 SXM lists them (nvidia-smi -q -d SUPPORTED_CLOCKS).
    arch: int = 9  # NVML_DEVICE_ARCH_HOPPER
    mem_clocks: list[int] = field(default_factory=lambda: [2619])
    gfx_clocks: list[int] = field(default_factory=lambda: list(range(1980, 344, -15)))
    locked: tuple[int, int] | None = None  # what nvmlDeviceSetGpuLockedClocks set


RESERVED_MIB = 615


class FakeNvml:
    """Monkeypatches the real pynvml functions with these GPUs' readings."""

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.calls: Counter[tuple[str, int]] = Counter()
        self.init_error: str | None = None

    def _gpu(self, fn: str, handle: Any) -> FakeGpu:
        self.calls[(fn, handle.index)] += 1
        gpu = self.gpus[handle.index]
        if fn in gpu.fail:
            raise pynvml.NVMLError(ERRORS[gpu.fail[fn]])
        if "*" in gpu.fail:
            raise pynvml.NVMLError(ERRORS[gpu.fail["*"]])
        return gpu

    def install(self, mp: pytest.MonkeyPatch) -> FakeNvml:
        def dev(fn: str, get: Callable[..., Any]) -> None:
            def call(handle: Any, *args: Any) -> Any:
                return get(self._gpu(fn, handle), *args)

            mp.setattr(pynvml, fn, call)

        def init() -> None:
            if self.init_error:
                raise pynvml.NVMLError(ERRORS[self.init_error])

        mp.setattr(pynvml, "nvmlInit", init)
        mp.setattr(pynvml, "nvmlShutdown", lambda: None)
        mp.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: b"535.161.08")  # old: bytes
        mp.setattr(pynvml, "nvmlSystemGetNVMLVersion", lambda: "12.535.161.08")
        mp.setattr(pynvml, "nvmlSystemGetCudaDriverVersion", lambda: 12020)
        mp.setattr(pynvml, "nvmlDeviceGetCount", lambda: len(self.gpus))
        mp.setattr(pynvml, "nvmlDeviceGetHandleByIndex", self._handle)
        dev("nvmlDeviceGetUUID", lambda g: g.uuid)
        dev("nvmlDeviceGetName", lambda g: g.name)
        dev("nvmlDeviceGetSerial", lambda g: "1654922006536")
        dev("nvmlDeviceGetPciInfo", lambda g: SimpleNamespace(busId=g.bus.encode()))
        dev("nvmlDeviceGetMigMode", lambda g: [0, 0])
        dev("nvmlDeviceGetMaxPcieLinkGeneration", lambda g: g.pcie[0])
        dev("nvmlDeviceGetMaxPcieLinkWidth", lambda g: g.pcie[1])
        dev("nvmlDeviceGetCurrPcieLinkGeneration", lambda g: g.pcie[0])
        dev("nvmlDeviceGetCurrPcieLinkWidth", lambda g: g.pcie[1])
        dev("nvmlDeviceGetEnforcedPowerLimit", lambda g: g.limit_mw)
        dev("nvmlDeviceGetPowerUsage", lambda g: g.power_mw)
        dev(
            "nvmlDeviceGetUtilizationRates",
            lambda g: SimpleNamespace(gpu=g.util, memory=g.util_mem),
        )
        dev("nvmlDeviceGetMemoryInfo", self._memory)
        dev("nvmlDeviceGetTemperature", lambda g, sensor: g.temp)
        dev("nvmlDeviceGetFanSpeed", self._fan)
        dev(
            "nvmlDeviceGetClockInfo",
            lambda g, kind: g.sm if kind == pynvml.NVML_CLOCK_SM else g.mem_clock,
        )
        dev("nvmlDeviceGetCurrentClocksThrottleReasons", lambda g: g.throttle)
        dev("nvmlDeviceGetTotalEccErrors", self._ecc)
        dev(
            "nvmlDeviceGetComputeRunningProcesses",
            lambda g: [SimpleNamespace(pid=p, usedGpuMemory=m * MIB) for p, m in g.procs],
        )
        dev("nvmlDeviceGetGraphicsRunningProcesses", lambda g: [])
        dev("nvmlDeviceGetRemappedRows", lambda g: _supported(g.remap))
        dev("nvmlDeviceGetRetiredPages", self._retired)
        dev(
            "nvmlDeviceGetRetiredPagesPendingStatus",
            lambda g: _supported(g.retired)[2],
        )
        dev("nvmlDeviceGetPersistenceMode", lambda g: g.persistence)
        dev("nvmlDeviceGetPcieReplayCounter", lambda g: g.replays)
        dev("nvmlDeviceGetNvLinkState", self._nvlink_state)
        dev("nvmlDeviceGetNvLinkErrorCounter", self._nvlink_counter)
        dev("nvmlDeviceGetGpuFabricInfoV", self._fabric)
        dev("nvmlDeviceGetGpuFabricInfo", self._fabric)
        dev(
            "nvmlDeviceGetTemperatureThreshold",
            lambda g, which: g.thresholds[0] if which == 1 else g.thresholds[1],
        )
        dev("nvmlDeviceGetArchitecture", lambda g: g.arch)
        dev("nvmlDeviceGetSupportedMemoryClocks", lambda g: list(g.mem_clocks))
        dev("nvmlDeviceGetSupportedGraphicsClocks", self._gfx_clocks)
        dev("nvmlDeviceSetGpuLockedClocks", self._lock_clocks)
        dev("nvmlDeviceResetGpuLockedClocks", lambda g: setattr(g, "locked", None))
        mp.setattr(pynvml, "nvmlEventSetCreate", object)
        dev("nvmlDeviceRegisterEvents", lambda g, types, event_set: None)
        return self

    @staticmethod
    def _memory(g: FakeGpu, version: int | None = None) -> Any:
        # Like the driver: the v1 struct counts the driver's reserved memory as used;
        # v2 (what nvidia-smi shows) reports it apart.
        reserved = RESERVED_MIB if version is None else 0
        return SimpleNamespace(
            total=g.total_mib * MIB,
            used=(g.used_mib + reserved) * MIB,
            free=(g.total_mib - g.used_mib - RESERVED_MIB) * MIB,
            reserved=RESERVED_MIB * MIB,
        )

    def _handle(self, index: int) -> Any:
        self.calls[("nvmlDeviceGetHandleByIndex", index)] += 1
        if self.gpus[index].fail.get("nvmlDeviceGetHandleByIndex"):
            raise pynvml.NVMLError(ERRORS[self.gpus[index].fail["nvmlDeviceGetHandleByIndex"]])
        return SimpleNamespace(index=index)

    @staticmethod
    def _gfx_clocks(g: FakeGpu, mem_mhz: int) -> list[int]:
        if mem_mhz not in g.mem_clocks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return list(g.gfx_clocks)

    @staticmethod
    def _lock_clocks(g: FakeGpu, low: int, high: int) -> None:
        if g.arch < pynvml.NVML_DEVICE_ARCH_VOLTA:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not (low <= high and low in g.gfx_clocks):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        g.locked = (low, high)

    @staticmethod
    def _fan(g: FakeGpu) -> int:
        if g.fan is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return g.fan

    @staticmethod
    def _ecc(g: FakeGpu, kind: int, counter: int) -> int:
        if not g.ecc:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if counter == pynvml.NVML_AGGREGATE_ECC:
            return g.ecc_total[0 if kind == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else 1]
        return 0

    @staticmethod
    def _retired(g: FakeGpu, cause: int) -> list[int]:
        sbe, dbe, _ = _supported(g.retired)
        return list(
            sbe
            if cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
            else dbe
        )

    @staticmethod
    def _nvlink_state(g: FakeGpu, link: int) -> int:
        if g.nvlinks == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= g.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return (
            pynvml.NVML_FEATURE_DISABLED if link in g.nvlink_down else pynvml.NVML_FEATURE_ENABLED
        )

    @staticmethod
    def _nvlink_counter(g: FakeGpu, link: int, counter: int) -> int:
        if link >= g.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return g.nvlink_errors.get((link, counter), 0)

    @staticmethod
    def _fabric(g: FakeGpu, ref: Any) -> int:
        state, status = _supported(g.fabric)
        info = ref._obj  # the struct behind ctypes.byref, as the C call fills it
        info.state, info.status = state, status
        return pynvml.NVML_SUCCESS

    def uses(self, index: int) -> int:
        """How many NVML calls went to GPU ``index``'s handle."""
        return sum(n for (fn, i), n in self.calls.items() if i == index)


def _supported(value: Any) -> Any:
    if value is None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return value


def three_gpus() -> list[FakeGpu]:
    return [
        FakeGpu(uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000", bus="00000000:18:00.0"),
        FakeGpu(
            uuid="GPU-bbbbbbbb-0000-0000-0000-000000000000",
            bus="00000000:2A:00.0",
            used_mib=0,
            util=0,
            util_mem=0,
            temp=41,
            power_mw=69850,
            sm=345,
            throttle=pynvml.nvmlClocksThrottleReasonGpuIdle,
        ),
        FakeGpu(
            name="NVIDIA GeForce RTX 3090",
            uuid="GPU-cccccccc-0000-0000-0000-000000000000",
            bus="00000000:3A:00.0",
            total_mib=24576,
            used_mib=2300,
            limit_mw=350000,
            power_mw=98140,
            fan=41,
            ecc=False,
            pcie=(4, 16),
            remap=None,
            persistence=0,
            replays=0,
            nvlinks=0,
            fabric=None,
            thresholds=(95, 98),
        ),
    ]
