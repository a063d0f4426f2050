"""A simulated ``amdsmi``: the function surface the helper reads AMD cards through,
backed by the simulator's AMD models (``spec``: ``mi210``, ``mi300x``).

Same names, argument order, dict keys and units as ROCm's ``amdsmi`` module (VRAM in
MiB, temperatures in degrees C, socket power in W, the power cap in microwatts,
process memory in bytes, ``"N/A"`` where a card has no such reading), and errors of
an ``AmdSmiLibraryException`` carrying an ``amdsmi_status_t`` code, so the helper's
AMD path runs the same code in sim and real modes. The cards' load follows their
processes as the NVIDIA ones' do (``engine``).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from ..nvml import MIB

if TYPE_CHECKING:
    from .device import SimDevice
    from .engine import SimNvml

# amdsmi_status_t codes (ROCm's amdsmi.h) the simulator answers.
STATUS_INVAL = 1
STATUS_NOT_SUPPORTED = 2
STATUS_DRM_ERROR = 6
STATUS_NOT_INIT = 32
STATUS_UNKNOWN_ERROR = 0xFFFFFFFF


class AmdSmiException(Exception):
    """As ``amdsmi.AmdSmiException``: the base of every amdsmi error."""


class AmdSmiLibraryException(AmdSmiException):
    """As ``amdsmi.AmdSmiLibraryException``: a call that returned a status code."""

    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code

    def get_error_code(self) -> int:
        return self.err_code

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | AMDSMI_STATUS {self.err_code}"


class AmdSmiInitFlags(enum.IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_GPUS = 2


class AmdSmiTemperatureType(enum.IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2


class AmdSmiTemperatureMetric(enum.IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    CRITICAL = 5
    EMERGENCY = 7


class AmdSmiClkType(enum.IntEnum):
    SYS = 0
    GFX = 0
    MEM = 4


class SimAmdHandle:
    """As ``amdsmi_processor_handle``: an opaque handle to one card."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<SimAmdHandle {self.index}>"


class SimAmdSmi:
    """The fake ``amdsmi`` module over ``nvml``'s AMD cards (``SimNvml.amd_devices``):
    the engine's clock, process scanner and fault state are shared."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiTemperatureType = AmdSmiTemperatureType
    AmdSmiTemperatureMetric = AmdSmiTemperatureMetric
    AmdSmiClkType = AmdSmiClkType

    def __init__(self, nvml: SimNvml) -> None:
        self.nvml = nvml
        self.initialized = False

    def _dev(self, handle: Any) -> SimDevice:
        if not self.initialized:
            raise AmdSmiLibraryException(STATUS_NOT_INIT)
        cards = self.nvml.amd_devices
        if not isinstance(handle, SimAmdHandle) or not 0 <= handle.index < len(cards):
            raise AmdSmiLibraryException(STATUS_INVAL)
        dev = cards[handle.index]
        if "hang" in dev.faults:
            dev.unhang.wait()  # a driver call that never returns (until cleared)
        if dev.lost:
            raise AmdSmiLibraryException(STATUS_DRM_ERROR)
        return dev

    # -- the amdsmi surface ---------------------------------------------------------

    def amdsmi_init(self, flag: Any = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        self.initialized = True

    def amdsmi_shut_down(self) -> None:
        self.initialized = False

    def amdsmi_get_processor_handles(self) -> list[SimAmdHandle]:
        if not self.initialized:
            raise AmdSmiLibraryException(STATUS_NOT_INIT)
        return [SimAmdHandle(i) for i in range(len(self.nvml.amd_devices))]

    def amdsmi_get_gpu_asic_info(self, handle: Any) -> dict[str, Any]:
        dev = self._dev(handle)
        return {
            "market_name": dev.model.name,
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": "0x1002",
            "device_id": "0x74a1" if dev.model_key == "mi300x" else "0x740f",
            "rev_id": "0x00",
            "asic_serial": f"0x{dev.asic_serial:016X}",
            "oam_id": dev.index,
            "num_compute_units": 304 if dev.model_key == "mi300x" else 104,
            "target_graphics_version": "gfx942" if dev.model_key == "mi300x" else "gfx90a",
        }

    def amdsmi_get_gpu_device_uuid(self, handle: Any) -> str:
        dev = self._dev(handle)
        low = f"{dev.asic_serial:016x}"
        return f"{low[8:]}-0000-1000-80{low[:2]}-{low[2:8]}{dev.index:06x}"

    def amdsmi_get_gpu_board_info(self, handle: Any) -> dict[str, Any]:
        dev = self._dev(handle)
        return {
            "model_number": "102-D65209-00",
            "product_serial": dev.serial,
            "fru_id": "N/A",
            "product_name": dev.model.name,
            "manufacturer_name": "AMD",
        }

    def amdsmi_get_gpu_device_bdf(self, handle: Any) -> str:
        return self._dev(handle).pci_bus_id

    def amdsmi_get_gpu_activity(self, handle: Any) -> dict[str, Any]:
        dev = self._dev(handle)
        dev.samples += 1
        if dev.lost_at is not None and dev.samples > dev.lost_at:
            dev.lost = True
            raise AmdSmiLibraryException(STATUS_DRM_ERROR)
        if "ecc" in dev.faults and dev.samples % 3 == 0:
            dev.ecc_uncorrected += 1
            dev.ecc_corrected += 4
        dev.procs = self.nvml._procs_of(dev)
        dev.advance(self.nvml.clock())
        util = round(dev.util)
        return {
            "gfx_activity": util,
            "umc_activity": round(util * 0.35 + (3 if dev.busy() else 0)),
            "mm_activity": "N/A",
        }

    def amdsmi_get_gpu_vram_usage(self, handle: Any) -> dict[str, int]:
        dev = self._dev(handle)
        total = dev.model.memory_mib
        used = dev.model.base_used_mib + sum(p.mem_mib for p in dev.procs)
        if "phantom" in dev.faults or "orphan" in dev.faults:
            used += min(20480, total // 2)
        return {"vram_total": total, "vram_used": min(used, total - 1)}

    def amdsmi_get_temp_metric(self, handle: Any, sensor: Any, metric: Any) -> int:
        dev = self._dev(handle)
        if "unknown" in dev.faults:
            raise AmdSmiLibraryException(STATUS_UNKNOWN_ERROR)
        if sensor == AmdSmiTemperatureType.EDGE and dev.model_key == "mi300x":
            raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)  # no edge sensor
        if metric == AmdSmiTemperatureMetric.CRITICAL:
            return dev.health.slowdown_c
        if metric == AmdSmiTemperatureMetric.EMERGENCY:
            return dev.health.shutdown_c
        if metric != AmdSmiTemperatureMetric.CURRENT:
            raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)
        return round(dev.temp) + (8 if sensor == AmdSmiTemperatureType.HOTSPOT else 0)

    def amdsmi_get_power_info(self, handle: Any) -> dict[str, Any]:
        dev = self._dev(handle)
        if "notsupported" in dev.faults:
            raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)
        watts = round(dev.power)
        # An MI200 reports only the average socket power; an MI300 the current too.
        current: Any = watts if dev.model_key == "mi300x" else "N/A"
        return {
            "socket_power": current,
            "current_socket_power": current,
            "average_socket_power": watts,
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": int(dev.model.power_limit_w),
        }

    def amdsmi_get_power_cap_info(self, handle: Any) -> dict[str, int]:
        dev = self._dev(handle)
        cap = int(dev.model.power_limit_w * 1_000_000)
        return {
            "power_cap": cap,
            "default_power_cap": cap,
            "dpm_cap": 0,
            "min_power_cap": 0,
            "max_power_cap": cap,
        }

    def amdsmi_get_clock_info(self, handle: Any, clock_type: Any) -> dict[str, int]:
        dev = self._dev(handle)
        m = dev.model
        if clock_type == AmdSmiClkType.MEM:
            clk, low, high = (m.mem_max_mhz if dev.busy() else m.mem_idle_mhz), 0, m.mem_max_mhz
        else:
            clk, low, high = (m.sm_max_mhz if dev.busy() else m.sm_idle_mhz), 0, m.sm_max_mhz
        return {"clk": clk, "min_clk": low, "max_clk": high, "clk_locked": 0, "clk_deep_sleep": 0}

    def amdsmi_get_gpu_total_ecc_count(self, handle: Any) -> dict[str, int]:
        dev = self._dev(handle)
        return {
            "correctable_count": dev.ecc_corrected,
            "uncorrectable_count": dev.ecc_uncorrected,
            "deferred_count": 0,
        }

    def amdsmi_get_gpu_process_list(self, handle: Any) -> list[dict[str, Any]]:
        dev = self._dev(handle)
        dev.procs = self.nvml._procs_of(dev)
        return [
            {
                "name": "python3",
                "pid": p.pid,
                "mem": p.mem_mib * MIB,
                "engine_usage": {"gfx": 0, "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": p.mem_mib * MIB},
                "cu_occupancy": "N/A",
            }
            for p in dev.procs
        ]
