"""Per-GPU inventory and readings, every one through the guarded accessor.

A GPU whose handle could not be had, or that answered ``GpuIsLost``, becomes state
``lost`` and its handle is never used again; any other exception while reading one
GPU turns that GPU into state ``error`` for this sample. The others keep streaming.
"""

from __future__ import annotations

from typing import Any

from .gpu_health import read_health
from .mig import Slice, read_slices, sample_slice
from .nvml import (
    MIB,
    NA,
    NVML_CLOCK_MEM,
    NVML_CLOCK_SM,
    NVML_MEMORY_ERROR_TYPE_CORRECTED,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
    NVML_TEMPERATURE_GPU,
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
    NVML_VOLATILE_ECC,
    THROTTLE_BITS,
    query,
    text,
)
from .procs import ProcessTable

MAX_PROCESSES = 256


class GpuLost(Exception):
    """Raised inside a read when NVML says the GPU is gone."""


class Gpu:
    """One GPU: its handle (until lost), static facts, and how to read it now."""

    vendor = "nvidia"
    """Whose library reads it (``amd.AmdGpu`` is ``amd``)."""

    def __init__(self, lib: Any, index: int) -> None:
        self.lib = lib
        self.index = index
        self.vendor_index = index
        """Its index among its vendor's cards (NVML's index; ``index`` is the host's)."""
        self.handle: Any = None
        # nvidia-smi reports memory used without the driver's reserved part (NVML's
        # v2 memory struct); v1 counts it as used (~600 MiB on an idle H200).
        self._mem_version: Any = getattr(lib, "nvmlMemory_v2", None)
        self.fabric_v = True
        """Whether the driver has ``nvmlDeviceGetGpuFabricInfoV`` (until it says not)."""
        self.uuid = f"GPU-unknown-{index}"
        self.state = "ok"
        self.message: str | None = None
        self.info: dict[str, Any] = {"index": index, "uuid": self.uuid, "errors": {}}
        self.slices: list[Slice] = []
        """Its MIG slices as ``hello`` listed them (empty: MIG off)."""
        handle = query(lib, "nvmlDeviceGetHandleByIndex", index)
        if isinstance(handle, NA):
            self._lose(f"no handle for GPU {index}: {handle.message or handle.error}")
            self.info["errors"]["handle"] = handle.error
        else:
            self.handle = handle

    def _lose(self, message: str) -> None:
        self.state = "lost"
        self.message = message[:512]
        self.handle = None

    def read(self, name: str, *args: Any) -> Any:
        """One NVML read on this GPU; ``GpuIsLost`` drops the handle for good."""
        if self.handle is None:
            raise GpuLost(self.message or "GPU is lost")
        value = query(self.lib, name, self.handle, *args)
        if isinstance(value, NA) and value.error == "GpuIsLost":
            self._lose(f"GPU is lost (NVML GpuIsLost from {name})")
            raise GpuLost(self.message or "GPU is lost")
        return value

    def inventory(self) -> dict[str, Any]:
        """The static ``GpuInfo`` for ``hello``."""
        if self.handle is None:
            return dict(self.info)
        errors: dict[str, str] = {}
        info: dict[str, Any] = {"index": self.index}
        try:
            fields: tuple[tuple[str, str, tuple[int, ...], Any], ...] = (
                ("uuid", "nvmlDeviceGetUUID", (), text),
                ("name", "nvmlDeviceGetName", (), text),
                (
                    "memory_total_mib",
                    "nvmlDeviceGetMemoryInfo",
                    (),
                    lambda v: int(v.total // MIB),
                ),
                (
                    "power_limit_w",
                    "nvmlDeviceGetEnforcedPowerLimit",
                    (),
                    lambda v: round(v / 1000.0, 2),
                ),
                ("pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration", (), int),
                ("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth", (), int),
                ("mig_mode", "nvmlDeviceGetMigMode", (), lambda v: bool(v[0])),
                ("pci_bus_id", "nvmlDeviceGetPciInfo", (), lambda v: text(v.busId, 64)),
                ("serial", "nvmlDeviceGetSerial", (), text),
                (
                    "temp_slowdown_c",
                    "nvmlDeviceGetTemperatureThreshold",
                    (NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,),
                    int,
                ),
                (
                    "temp_shutdown_c",
                    "nvmlDeviceGetTemperatureThreshold",
                    (NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,),
                    int,
                ),
            )
            for key, fn, args, convert in fields:
                value = self.read(fn, *args)
                if isinstance(value, NA):
                    info[key] = None
                    errors[key] = value.error
                else:
                    info[key] = convert(value)
            if info.get("mig_mode"):
                uuid = info.get("uuid") or self.uuid
                self.slices, info["mig"], mig_errors = read_slices(self.lib, self.handle, uuid)
                errors.update(mig_errors)
        except GpuLost:
            info = {"index": self.index, "uuid": self.uuid}
            errors["gpu"] = "GpuIsLost"
        except Exception as exc:
            errors["inventory"] = "Unknown"
            self.message = (f"inventory failed: {type(exc).__name__}: {exc}")[:512]
        if info.get("uuid"):
            self.uuid = info["uuid"]
        else:
            info["uuid"] = self.uuid
        info["errors"] = errors
        self.info = info
        return dict(info)

    def sample(self, table: ProcessTable, health: bool = False) -> dict[str, Any]:
        """This GPU's ``GpuSample`` now, with the health readings when ``health``;
        never raises."""
        out: dict[str, Any] = {"index": self.index, "uuid": self.uuid}
        if self.handle is None:
            out.update(state="lost", message=self.message, errors={"gpu": "GpuIsLost"})
            return out
        errors: dict[str, str] = {}
        try:
            self._fill(out, errors, table)
            if health:
                read_health(self, out, errors)
        except GpuLost:
            return {
                "index": self.index,
                "uuid": self.uuid,
                "state": "lost",
                "message": self.message,
                "errors": {"gpu": "GpuIsLost"},
            }
        except Exception as exc:
            return {
                "index": self.index,
                "uuid": self.uuid,
                "state": "error",
                "message": f"reading GPU {self.index} failed: {type(exc).__name__}: {exc}"[:512],
                "errors": errors,
            }
        out["state"] = "ok"
        out["errors"] = errors
        return out

    def _put(self, out: dict[str, Any], errors: dict[str, str], key: str, value: Any) -> bool:
        if isinstance(value, NA):
            out[key] = None
            errors[key] = value.error
            return False
        out[key] = value
        return True

    def _memory(self) -> Any:
        if self._mem_version is not None:
            try:
                mem = self.read("nvmlDeviceGetMemoryInfo", self._mem_version)
            except TypeError:  # an old binding without the version argument
                mem = None
            if mem is not None and not isinstance(mem, NA):
                return mem
            self._mem_version = None  # not on this driver: v1 from now on
        return self.read("nvmlDeviceGetMemoryInfo")

    def memory_used_mib(self) -> int | None:
        """Memory used now (MiB, as nvidia-smi counts it), None when NVML cannot say;
        ``GpuLost`` when the card is gone."""
        mem = self._memory()
        return None if isinstance(mem, NA) else int(mem.used // MIB)

    def _fill(self, out: dict[str, Any], errors: dict[str, str], table: ProcessTable) -> None:
        util = self.read("nvmlDeviceGetUtilizationRates")
        if isinstance(util, NA):
            self._put(out, errors, "util_gpu", util)
            self._put(out, errors, "util_mem", util)
        else:
            out["util_gpu"], out["util_mem"] = int(util.gpu), int(util.memory)
        mem = self._memory()
        if isinstance(mem, NA):
            self._put(out, errors, "mem_used_mib", mem)
            self._put(out, errors, "mem_total_mib", mem)
        else:
            out["mem_used_mib"] = int(mem.used // MIB)
            out["mem_total_mib"] = int(mem.total // MIB)
        temp = self.read("nvmlDeviceGetTemperature", NVML_TEMPERATURE_GPU)
        self._put(out, errors, "temp_c", temp)
        power = self.read("nvmlDeviceGetPowerUsage")
        if self._put(out, errors, "power_w", power):
            out["power_w"] = round(power / 1000.0, 2)
        limit = self.read("nvmlDeviceGetEnforcedPowerLimit")
        if self._put(out, errors, "power_limit_w", limit):
            out["power_limit_w"] = round(limit / 1000.0, 2)
        self._put(out, errors, "fan_pct", self.read("nvmlDeviceGetFanSpeed"))
        self._put(out, errors, "clock_sm_mhz", self.read("nvmlDeviceGetClockInfo", NVML_CLOCK_SM))
        self._put(out, errors, "clock_mem_mhz", self.read("nvmlDeviceGetClockInfo", NVML_CLOCK_MEM))
        reasons = self.read("nvmlDeviceGetCurrentClocksThrottleReasons")
        if self._put(out, errors, "throttle", reasons):
            out["throttle"] = [name for bit, name in THROTTLE_BITS if int(reasons) & bit]
        self._put(
            out,
            errors,
            "ecc_corrected",
            self.read(
                "nvmlDeviceGetTotalEccErrors", NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC
            ),
        )
        self._put(
            out,
            errors,
            "ecc_uncorrected",
            self.read(
                "nvmlDeviceGetTotalEccErrors", NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC
            ),
        )
        self._put(out, errors, "pcie_gen", self.read("nvmlDeviceGetCurrPcieLinkGeneration"))
        self._put(out, errors, "pcie_width", self.read("nvmlDeviceGetCurrPcieLinkWidth"))
        out["processes"] = self._processes(errors, table)
        if self.slices:
            out["mig"] = [sample_slice(self.lib, piece) for piece in self.slices]

    def _processes(self, errors: dict[str, str], table: ProcessTable) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        seen: set[int] = set()
        for fn, kind in (
            ("nvmlDeviceGetComputeRunningProcesses", "compute"),
            ("nvmlDeviceGetGraphicsRunningProcesses", "graphics"),
        ):
            procs = self.read(fn)
            if isinstance(procs, NA):
                if kind == "compute":
                    errors["processes"] = procs.error
                continue
            for proc in procs:
                pid = int(proc.pid)
                if pid in seen or len(found) >= MAX_PROCESSES:
                    continue
                seen.add(pid)
                entry = table.lookup(pid)
                used = getattr(proc, "usedGpuMemory", None)
                entry["gpu_mem_mib"] = int(used // MIB) if isinstance(used, int) else None
                entry["kind"] = kind
                found.append(entry)
        return found

    def pids(self) -> set[int] | None:
        """The pids NVML lists on this GPU now, or None when it cannot say."""
        if self.handle is None:
            return None
        pids: set[int] = set()
        try:
            for fn in (
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetGraphicsRunningProcesses",
            ):
                procs = self.read(fn)
                if not isinstance(procs, NA):
                    pids.update(int(p.pid) for p in procs)
        except GpuLost:
            return None
        return pids
