"""A simulated NVML: the ``pynvml`` function surface the helper uses, backed by models.

The helper calls ``SimNvml`` exactly as it calls the ``pynvml`` module, and the
simulator raises the same ``NVMLError`` subclasses, so everything above the NVML
layer runs the same code in sim and real modes. Readings follow the load of the
processes on each simulated GPU: any process whose environment has
``GPUTUI_SIM_GPU=<index or uuid>[,...]`` is that GPU's process, holding
``GPUTUI_SIM_MEM_MIB`` MiB (default 2048) at ``GPUTUI_SIM_UTIL`` % load (default 90).
The health readings (remapped rows, NVLinks, fabric ...) are ``health``'s functions
of a card, which the surface here calls; the faults, and how they clear, are
listed in ``spec``.
"""

from __future__ import annotations

import math
import queue
import socket
import time
from typing import Any, Callable

from ..kernlog import XID_TEXT
from ..nvml import MIB, NVML_CLOCK_SM, NVML_DEVICE_ARCH_VOLTA, nvml_error
from . import health
from .device import SimDevice, SimEventSet, SimSlice
from .env import ENV_GPU, ENV_MEM, ENV_UTIL, EnvScanner, SimProc
from .spec import Fault, SimSpec, parse_fault, parse_spec

__all__ = [
    "ENV_GPU",
    "ENV_MEM",
    "ENV_UTIL",
    "EnvScanner",
    "SimDevice",
    "SimNvml",
    "SimSpec",
    "parse_spec",
]

LOST_AFTER_SAMPLES = 3
XID_AFTER_SAMPLES = 2
PHANTOM_MIB = 20480


class _Obj:
    """A plain attribute bag, like the friendly objects pynvml returns."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class SimHandle:
    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<SimHandle {self.index}>"


class SimMigHandle:
    """A MIG device's handle: its card's index and its MIG device index."""

    def __init__(self, index: int, slot: int) -> None:
        self.index = index
        self.slot = slot

    def __repr__(self) -> str:
        return f"<sim mig handle {self.index}/{self.slot}>"


class SimNvml:
    """The fake ``pynvml`` module: same function names, same errors, plausible readings."""

    c_nvmlGpuFabricInfo_t = health.c_nvmlGpuFabricInfo_t
    c_nvmlGpuFabricInfoV_t = health.c_nvmlGpuFabricInfoV_t

    def __init__(
        self,
        spec: SimSpec,
        clock: Callable[[], float] = time.monotonic,
        scanner: EnvScanner | None = None,
    ) -> None:
        self.spec = spec
        self.clock = clock
        self.hostname = spec.hostname or socket.gethostname()
        self.scanner = scanner if scanner is not None else EnvScanner(clock=clock)
        self.devices = [
            SimDevice(i, m, self.hostname, spec.seed, spec.cluster)
            for i, m in enumerate(spec.models)
        ]
        self.initialized = False
        for fault in spec.faults:
            self._arm(fault, now=False)
        # A GPU fallen off the bus: NVML numbers the others without it.
        present = [d for d in self.devices if "missing" not in d.faults]
        # AMD cards are amdsmi's (``sim.amdsmi``), numbered among themselves.
        self.devices = [d for d in present if d.model.vendor != "amd"]
        self.amd_devices = [d for d in present if d.model.vendor == "amd"]
        for cards in (self.devices, self.amd_devices):
            for index, dev in enumerate(cards):
                dev.index = index

    # -- faults ---------------------------------------------------------------

    def _arm(self, fault: Fault, now: bool, cards: list[SimDevice] | None = None) -> None:
        dev = (self.devices if cards is None else cards)[fault.gpu]
        if fault.kind == "lost":
            dev.lost_at = dev.samples if now else LOST_AFTER_SAMPLES
        elif fault.kind == "xid":
            dev.xid = fault.xid
            dev.xid_at = dev.samples if now else XID_AFTER_SAMPLES
            if now:
                self._fire_xid(dev)
        else:
            if fault.kind not in dev.faults:
                dev.armed[fault.kind] = dev.samples if now else 0
            dev.faults.add(fault.kind)
            if fault.kind == "hang":
                dev.unhang.clear()

    def inject(self, text: str) -> Fault:
        """Apply ``KIND@INDEX`` now, or clear with ``-KIND@INDEX`` / ``clear@INDEX`` (the
        ``sim`` request); ValueError on a bad fault."""
        cards = self.devices + self.amd_devices  # the helper's host indexes
        models = tuple(d.model_key for d in cards)
        fault = parse_fault(text, len(cards), models)
        if fault.cleared:
            self._clear(cards[fault.gpu], fault.kind)
        elif fault.kind == "missing":
            raise ValueError(
                f"bad fault {text[:40]!r}: a running helper has counted its GPUs already; "
                "put fault=missing@INDEX in the spec (the next helper start)"
            )
        else:
            self._arm(fault, now=True, cards=cards)
        return fault

    def _clear(self, dev: SimDevice, kind: str) -> None:
        """The GPU as it was before fault ``kind`` (every fault for ``clear``)."""
        kinds = (set(dev.faults) | {"lost", "xid"}) if kind == "clear" else {kind}
        for one in kinds:
            dev.faults.discard(one)
            dev.armed.pop(one, None)
        if "lost" in kinds:
            dev.lost, dev.lost_at = False, None
        if "xid" in kinds:
            dev.xid = dev.xid_at = None
        if "ecc" in kinds:
            dev.ecc_uncorrected = dev.ecc_corrected = 0
        if "hang" in kinds:
            dev.unhang.set()  # a call stuck in the hang returns now

    def _fire_xid(self, dev: SimDevice) -> None:
        dev.xid_at = None
        for event_set in dev.event_sets:
            event_set.events.put(
                _Obj(
                    device=SimHandle(dev.index),
                    eventType=0x8,
                    eventData=dev.xid or 0,
                    gpuInstanceId=0xFFFFFFFF,
                    computeInstanceId=0xFFFFFFFF,
                )
            )

    def kernel_log_lines(self) -> list[str]:
        """Kernel-log history for ``xid`` faults, as ``dmesg`` would print it (in
        seconds from boot): at the start of today (UTC), or just after boot if that was
        later, so that the card's Xid is recent however long this machine has been up,
        and the same in every helper started today."""
        lines = []
        up = time.clock_gettime(time.CLOCK_BOOTTIME)
        now = time.time()
        at = max(1, math.ceil((now - now % 86400) - (now - up)))
        for dev in self.devices:
            if dev.xid is not None:
                pci = dev.pci_bus_id[4:14]
                what = XID_TEXT.get(dev.xid, "Xid error")
                lines.append(
                    f"[{int(at):>5}.{113000 + dev.index:06d}] NVRM: Xid (PCI:{pci}): {dev.xid}, "
                    f"pid='<unknown>', name=<unknown>, {what}"
                )
        return lines

    # -- helpers ----------------------------------------------------------------

    def _dev(self, handle: Any) -> SimDevice:
        if not self.initialized:
            raise nvml_error("Uninitialized")
        if not isinstance(handle, SimHandle) or not 0 <= handle.index < len(self.devices):
            raise nvml_error("InvalidArgument")
        dev = self.devices[handle.index]
        if dev.lost:
            raise nvml_error("GpuIsLost")
        return dev

    def _procs_of(self, dev: SimDevice) -> list[SimProc]:
        """The processes on the card: those naming its UUID, (an NVIDIA card) its NVML
        index, or (MIG) one of its slices."""
        names = {dev.uuid.lower()} | {s.uuid.lower() for s in dev.slices}
        if dev.model.vendor != "amd":
            names.add(str(dev.index))
        return [p for p in self.scanner.snapshot() if names.intersection(p.targets)]

    def _slice(self, handle: SimMigHandle) -> tuple[SimDevice, SimSlice]:
        dev = self._dev(SimHandle(handle.index))
        if not 0 <= handle.slot < len(dev.slices):
            raise nvml_error("InvalidArgument")
        return dev, dev.slices[handle.slot]

    def _slice_procs(self, handle: SimMigHandle) -> list[SimProc]:
        _, piece = self._slice(handle)
        uuid = piece.uuid.lower()
        return [p for p in self.scanner.snapshot() if uuid in p.targets]

    # -- MIG ----------------------------------------------------------------------

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        dev = self._dev(handle)
        if not dev.model.mig:
            raise nvml_error("NotSupported")
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> SimMigHandle:
        dev = self._dev(handle)
        if not dev.slices:
            raise nvml_error("InvalidArgument")  # MIG mode is off
        if not 0 <= index < len(dev.slices):
            raise nvml_error("NotFound")
        return SimMigHandle(dev.index, index)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Any) -> SimHandle:
        if not isinstance(handle, SimMigHandle):
            raise nvml_error("InvalidArgument")
        self._slice(handle)
        return SimHandle(handle.index)

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        if not isinstance(handle, SimMigHandle):
            raise nvml_error("InvalidArgument")
        return self._slice(handle)[1].gi_id

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        if not isinstance(handle, SimMigHandle):
            raise nvml_error("InvalidArgument")
        return self._slice(handle)[1].ci_id

    def nvmlDeviceGetAttributes(self, handle: Any) -> Any:
        if not isinstance(handle, SimMigHandle):
            raise nvml_error("NotSupported")
        piece = self._slice(handle)[1]
        return _Obj(
            gpuInstanceSliceCount=piece.gi_slices,
            computeInstanceSliceCount=piece.ci_slices,
            memorySizeMB=piece.memory_mib,
        )

    # -- the pynvml surface -------------------------------------------------------

    def nvmlInit(self) -> None:
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.127.05"

    def nvmlSystemGetNVMLVersion(self) -> str:
        return "12.550.127.05"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlDeviceGetCount(self) -> int:
        if not self.initialized:
            raise nvml_error("Uninitialized")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimHandle:
        self._dev(SimHandle(index))
        return SimHandle(index)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        if isinstance(handle, SimMigHandle):
            return self._slice(handle)[1].uuid
        return self._dev(handle).uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        if isinstance(handle, SimMigHandle):
            dev, piece = self._slice(handle)
            return f"{dev.model.name} MIG {piece.profile}"
        return self._dev(handle).model.name

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        dev = self._dev(handle)
        if dev.model.geforce:
            raise nvml_error("NotSupported")
        return dev.serial

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        dev = self._dev(handle)
        return _Obj(busId=dev.pci_bus_id, busIdLegacy=dev.pci_bus_id[4:])

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        dev = self._dev(handle)
        if not dev.model.mig:
            raise nvml_error("NotSupported")
        return [1, 1] if dev.slices else [0, 0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._dev(handle).model.pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._dev(handle).model.pcie_width

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return int(self._dev(handle).model.power_limit_w * 1000)

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        if isinstance(handle, SimMigHandle):
            self._slice(handle)
            raise nvml_error("NotSupported")  # as on a real MIG device
        dev = self._dev(handle)
        if "hang" in dev.faults:
            dev.unhang.wait()  # a driver call that never returns (until cleared)
        dev.samples += 1
        if dev.lost_at is not None and dev.samples > dev.lost_at:
            dev.lost = True
            raise nvml_error("GpuIsLost")
        if dev.xid_at is not None and dev.samples > dev.xid_at:
            self._fire_xid(dev)
        if "ecc" in dev.faults and dev.samples % 3 == 0:
            dev.ecc_uncorrected += 1
            dev.ecc_corrected += 4
        now = self.clock()
        dev.procs = self._procs_of(dev)
        dev.advance(now)
        util = round(dev.util)
        return _Obj(gpu=util, memory=round(util * 0.3 + (2 if util > 0 else 0)))

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        if isinstance(handle, SimMigHandle):
            piece = self._slice(handle)[1]
            total = piece.memory_mib
            used = min(total - 1, 13 + sum(p.mem_mib for p in self._slice_procs(handle)))
            return _Obj(total=total * MIB, used=used * MIB, free=(total - used) * MIB)
        dev = self._dev(handle)
        total = dev.model.memory_mib
        used = dev.model.base_used_mib + sum(p.mem_mib for p in dev.procs)
        if "phantom" in dev.faults or "orphan" in dev.faults:
            used += min(PHANTOM_MIB, total // 2)
        used = min(used, total - 1)
        return _Obj(total=total * MIB, used=used * MIB, free=(total - used) * MIB)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        dev = self._dev(handle)
        if "unknown" in dev.faults:
            raise nvml_error("Unknown")
        return round(dev.temp)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        dev = self._dev(handle)
        if "notsupported" in dev.faults:
            raise nvml_error("NotSupported")
        return int(dev.power * 1000)

    def nvmlDeviceGetFanSpeed(self, handle: Any) -> int:
        dev = self._dev(handle)
        if dev.model.fan is None or "notsupported" in dev.faults:
            raise nvml_error("NotSupported")
        if dev.model.fan == 0:
            return 0
        heat = max(0.0, dev.temp - dev.model.idle_c)
        return int(min(100, dev.model.fan + heat * 1.6))

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        dev = self._dev(handle)
        m = dev.model
        if clock_type == NVML_CLOCK_SM and dev.locked_mhz is not None:
            return dev.locked_mhz
        if clock_type == NVML_CLOCK_SM:
            if not dev.busy():
                return m.sm_idle_mhz
            factor = 0.62 if "throttle" in dev.faults else 1.0
            if "hw-slowdown" in dev.faults:
                factor = min(factor, 0.5)
            return int(m.sm_max_mhz * factor) - (15 * dev.rng.randint(0, 2) if dev.util > 90 else 0)
        return m.mem_max_mhz if dev.busy() else m.mem_idle_mhz

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        dev = self._dev(handle)
        reasons = 0x0 if dev.busy() else 0x1
        if "throttle" in dev.faults:
            reasons = 0x8 | 0x80
        if "hw-slowdown" in dev.faults:
            reasons = (reasons & ~0x1) | 0x8
        return reasons

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        dev = self._dev(handle)
        if not (dev.busy() or not dev.model.geforce):
            return 1  # a GeForce card idles at Gen 1
        return max(1, dev.model.pcie_gen - 2) if "pcie-down" in dev.faults else dev.model.pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        dev = self._dev(handle)
        width = dev.model.pcie_width
        return max(1, width // 2) if "pcie-down" in dev.faults else width

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        if isinstance(handle, SimMigHandle):
            piece = self._slice(handle)[1]
            return [
                _Obj(
                    pid=p.pid,
                    usedGpuMemory=None,  # not available on MIG, as on a real card
                    gpuInstanceId=piece.gi_id,
                    computeInstanceId=piece.ci_id,
                )
                for p in self._slice_procs(handle)
            ]
        dev = self._dev(handle)
        dev.procs = self._procs_of(dev)
        return [
            _Obj(
                pid=p.pid,
                usedGpuMemory=p.mem_mib * MIB,
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
            for p in dev.procs
        ]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        self._dev(handle)
        return []

    def nvmlEventSetCreate(self) -> SimEventSet:
        return SimEventSet()

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
        dev = self._dev(handle)
        if isinstance(event_set, SimEventSet) and event_set not in dev.event_sets:
            dev.event_sets.append(event_set)

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        try:
            return event_set.events.get(timeout=max(0, timeout_ms) / 1000.0)
        except queue.Empty:
            raise nvml_error("Timeout") from None

    def nvmlEventSetFree(self, event_set: Any) -> None:
        return None

    # -- the pynvml surface: health (``health``) ------------------------------------

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        return health.temperature_threshold(self._dev(handle), threshold)

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        return health.remapped_rows(self._dev(handle))

    def nvmlDeviceGetRetiredPages(self, handle: Any, cause: int) -> list[int]:
        return health.retired_pages(self._dev(handle), cause)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int:
        return health.retired_pages_pending(self._dev(handle))

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return health.persistence_mode(self._dev(handle))

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        return health.pcie_replays(self._dev(handle))

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        return health.nvlink_state(self._dev(handle), link)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:
        return health.nvlink_errors(self._dev(handle), link, counter)

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, ref: Any) -> int:
        return health.fabric_info(self._dev(handle), ref)

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, ref: Any) -> int:
        return health.fabric_info(self._dev(handle), ref)

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        return self._dev(handle).index

    def nvmlDeviceGetArchitecture(self, handle: Any) -> int:
        return self._dev(handle).arch

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: Any) -> list[int]:
        m = self._dev(handle).model
        return sorted({m.mem_max_mhz, m.mem_idle_mhz}, reverse=True)

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: Any, mem_mhz: int) -> list[int]:
        m = self._dev(handle).model
        if mem_mhz not in (m.mem_max_mhz, m.mem_idle_mhz):
            raise nvml_error("InvalidArgument")
        return sorted({*range(m.sm_max_mhz, m.sm_idle_mhz - 1, -15), m.sm_idle_mhz}, reverse=True)

    def nvmlDeviceSetGpuLockedClocks(self, handle: Any, low: int, high: int) -> None:
        dev = self._dev(handle)
        if dev.arch < NVML_DEVICE_ARCH_VOLTA:
            raise nvml_error("NotSupported")
        if not 0 < low <= high:
            raise nvml_error("InvalidArgument")
        dev.locked_mhz = max(dev.model.sm_idle_mhz, min(high, dev.model.sm_max_mhz))
        dev.clock_locks += 1

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:
        self._dev(handle).locked_mhz = None

    def nvmlDeviceResetGpu(self, handle: Any) -> int:
        dev = self._dev(handle)
        dev.locked_mhz = None  # a reset clears locked clocks, as on a real card
        return health.reset_gpu(dev)

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter: int) -> int:
        return health.ecc_errors(self._dev(handle), error_type)
