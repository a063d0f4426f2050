"""A simulated NVML: the ``pynvml`` function surface the helper uses, backed by models.

The helper calls ``SimNvml`` exactly as it calls the ``pynvml`` module, and the
simulator raises the same ``NVMLError`` subclasses, so everything above the NVML
layer runs the same code in sim and real modes. Readings follow the load of the
processes on each simulated GPU: any process whose environment has
``GPUTUI_SIM_GPU=<index or uuid>[,...]`` is that GPU's process, holding
``GPUTUI_SIM_MEM_MIB`` MiB (default 2048) at ``GPUTUI_SIM_UTIL`` % load (default 90).
"""

from __future__ import annotations

import hashlib
import math
import os
import queue
import random
import socket
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from .nvml import MIB, NVML_CLOCK_SM, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml_error
from .procs import parse_stat_start_ticks
from .simspec import MODELS, Fault, SimSpec, parse_fault, parse_spec

__all__ = ["ENV_GPU", "ENV_MEM", "ENV_UTIL", "EnvScanner", "SimNvml", "SimSpec", "parse_spec"]

ENV_GPU = "GPUTUI_SIM_GPU"
ENV_MEM = "GPUTUI_SIM_MEM_MIB"
ENV_UTIL = "GPUTUI_SIM_UTIL"
DEFAULT_MEM_MIB = 2048
DEFAULT_UTIL = 90
LOST_AFTER_SAMPLES = 3
XID_AFTER_SAMPLES = 2
PHANTOM_MIB = 20480
_DC_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)

XID_TEXT = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "Timeout after 6s of waiting for RPC response from GPU GSP!",
}


class SimProc(NamedTuple):
    pid: int
    targets: Tuple[str, ...]
    mem_mib: int
    util: int


def _int_env(value: Optional[bytes], default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value))) if value is not None else default
    except ValueError:
        return default


class EnvScanner:
    """Finds processes that declare a simulated GPU in their environment.

    Each pid's environment is read once; later scans only list /proc and re-read the
    stat line of the few simulated processes (start time, zombie state).
    """

    def __init__(self, proc: str = "/proc", min_interval: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.proc = proc
        self.min_interval = min_interval
        self.clock = clock
        self._known: Dict[int, Optional[Tuple[int, SimProc]]] = {}
        self._last = -1e18
        self._procs: List[SimProc] = []

    def _stat(self, pid: int) -> Tuple[Optional[int], bool]:
        try:
            with open("%s/%d/stat" % (self.proc, pid), "rb") as fh:
                data = fh.read(4096)
        except OSError:
            return None, False
        close = data.rfind(b")")
        zombie = data[close + 1 : close + 4].strip()[:1] in (b"Z", b"X")
        return parse_stat_start_ticks(data), zombie

    def _classify(self, pid: int) -> Optional[Tuple[int, SimProc]]:
        try:
            with open("%s/%d/environ" % (self.proc, pid), "rb") as fh:
                env = fh.read(1 << 20)
        except OSError:
            return None
        if ENV_GPU.encode() not in env:
            return None
        values: Dict[bytes, bytes] = {}
        for item in env.split(b"\0"):
            if item.startswith(b"GPUTUI_SIM_"):
                key, _, value = item.partition(b"=")
                values[key] = value
        raw = values.get(ENV_GPU.encode(), b"").decode("ascii", errors="replace")
        targets = tuple(t.strip().lower() for t in raw.split(",") if t.strip())
        if not targets:
            return None
        ticks, _ = self._stat(pid)
        mem = _int_env(values.get(ENV_MEM.encode()), DEFAULT_MEM_MIB, 0, 1 << 22)
        util = _int_env(values.get(ENV_UTIL.encode()), DEFAULT_UTIL, 0, 100)
        return (ticks or 0), SimProc(pid, targets, mem, util)

    def snapshot(self) -> List[SimProc]:
        now = self.clock()
        if now - self._last < self.min_interval:
            return self._procs
        self._last = now
        try:
            pids = {int(n) for n in os.listdir(self.proc) if n.isdigit()}
        except OSError:
            pids = set()
        for pid in list(self._known):
            if pid not in pids:
                del self._known[pid]
        found: List[SimProc] = []
        for pid in pids:
            if pid not in self._known:
                self._known[pid] = self._classify(pid)
            entry = self._known[pid]
            if entry is None:
                continue
            ticks, zombie = self._stat(pid)
            if ticks is None or zombie:
                continue
            if ticks != entry[0]:  # pid reused: classify the new process
                entry = self._known[pid] = self._classify(pid)
                if entry is None:
                    continue
            found.append(entry[1])
        self._procs = found
        return found


class _Obj:
    """A plain attribute bag, like the friendly objects pynvml returns."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class SimHandle:
    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return "<SimHandle %d>" % self.index


class SimEventSet:
    def __init__(self) -> None:
        self.events: "queue.Queue[Any]" = queue.Queue()


class SimDevice:
    def __init__(self, index: int, model_key: str, hostname: str, seed: int) -> None:
        self.index = index
        self.model = MODELS[model_key]
        self.model_key = model_key
        digest = hashlib.sha256(("%s/%d" % (hostname, index)).encode()).hexdigest()
        self.uuid = "GPU-%s-%s-%s-%s-%s" % (digest[:8], digest[8:12], digest[12:16],
                                            digest[16:20], digest[20:32])
        self.serial = str(int(digest[32:44], 16))[:13].rjust(13, "1")
        bus = _DC_BUSES[index] if index < len(_DC_BUSES) else 0x01 + index
        self.pci_bus_id = "00000000:%02X:00.0" % (bus & 0xFF)
        self.rng = random.Random("%d/%s/%d" % (seed, hostname, index))
        self.faults: Set[str] = set()
        self.xid: Optional[int] = None
        self.lost = False
        self.samples = 0
        self.lost_at: Optional[int] = None
        self.xid_at: Optional[int] = None
        self.event_sets: List[SimEventSet] = []
        self.ecc_uncorrected = 0
        self.last: Optional[float] = None
        self.util = 0.0
        self.power = self.model.idle_w
        self.temp = float(self.model.idle_c)
        self.procs: List[SimProc] = []


class SimNvml:
    """The fake ``pynvml`` module: same function names, same errors, plausible readings."""

    def __init__(self, spec: SimSpec, clock: Callable[[], float] = time.monotonic,
                 scanner: Optional[EnvScanner] = None) -> None:
        self.spec = spec
        self.clock = clock
        self.hostname = spec.hostname or socket.gethostname()
        self.scanner = scanner if scanner is not None else EnvScanner(clock=clock)
        self.devices = [SimDevice(i, m, self.hostname, spec.seed) for i, m in enumerate(spec.models)]
        self.initialized = False
        for fault in spec.faults:
            self._arm(fault, now=False)

    # -- faults ---------------------------------------------------------------

    def _arm(self, fault: Fault, now: bool) -> None:
        dev = self.devices[fault.index]
        if fault.kind == "lost":
            dev.lost_at = dev.samples if now else LOST_AFTER_SAMPLES
        elif fault.kind == "xid":
            dev.xid = fault.xid
            dev.xid_at = dev.samples if now else XID_AFTER_SAMPLES
            if now:
                self._fire_xid(dev)
        else:
            dev.faults.add(fault.kind)

    def inject(self, text: str) -> Fault:
        """Apply ``KIND@INDEX`` now (the ``sim`` request); ValueError on a bad fault."""
        fault = parse_fault(text, len(self.devices), self.spec.models)
        self._arm(fault, now=True)
        return fault

    def _fire_xid(self, dev: SimDevice) -> None:
        dev.xid_at = None
        for event_set in dev.event_sets:
            event_set.events.put(_Obj(device=SimHandle(dev.index), eventType=0x8,
                                      eventData=dev.xid or 0, gpuInstanceId=0xFFFFFFFF,
                                      computeInstanceId=0xFFFFFFFF))

    def kernel_log_lines(self) -> List[str]:
        """Kernel-log history for ``xid`` faults, as ``dmesg`` would print it."""
        lines = []
        for dev in self.devices:
            if dev.xid is not None:
                pci = dev.pci_bus_id[4:12]
                lines.append("[  842.113%03d] NVRM: Xid (PCI:%s): %d, pid='<unknown>', "
                             "name=<unknown>, %s" % (dev.index, pci, dev.xid,
                                                     XID_TEXT.get(dev.xid, "Xid error")))
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

    def _advance(self, dev: SimDevice) -> None:
        now = self.clock()
        procs = [p for p in self.scanner.snapshot()
                 if str(dev.index) in p.targets or dev.uuid.lower() in p.targets]
        dev.procs = procs
        m = dev.model
        util_target = float(min(100, sum(p.util for p in procs)))
        if util_target > 0:
            util_target = max(0.0, min(100.0, util_target + dev.rng.uniform(-4.0, 3.0)))
        cap = m.power_limit_w * (0.6 if "throttle" in dev.faults else 0.92)
        power_target = m.idle_w + (cap - m.idle_w) * (util_target / 100.0) ** 0.9
        power_target *= 1.0 + dev.rng.uniform(-0.02, 0.02)
        span = max(1.0, m.power_limit_w * 0.92 - m.idle_w)
        temp_target = m.idle_c + (m.load_c - m.idle_c) * (power_target - m.idle_w) / span
        if dev.last is None:
            dev.util, dev.power, dev.temp = util_target, power_target, temp_target
        else:
            dt = max(0.0, now - dev.last)
            dev.util += (util_target - dev.util) * (1 - math.exp(-dt / 1.5))
            dev.power += (power_target - dev.power) * (1 - math.exp(-dt / 2.0))
            dev.temp += (temp_target - dev.temp) * (1 - math.exp(-dt / 12.0))
        dev.last = now

    def _busy(self, dev: SimDevice) -> bool:
        return dev.util >= 1.0 or bool(dev.procs)

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
        return self._dev(handle).uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return self._dev(handle).model.name

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        dev = self._dev(handle)
        if dev.model.geforce:
            raise nvml_error("NotSupported")
        return dev.serial

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        dev = self._dev(handle)
        return _Obj(busId=dev.pci_bus_id, busIdLegacy=dev.pci_bus_id[4:])

    def nvmlDeviceGetMigMode(self, handle: Any) -> List[int]:
        if not self._dev(handle).model.mig:
            raise nvml_error("NotSupported")
        return [0, 0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._dev(handle).model.pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._dev(handle).model.pcie_width

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return int(self._dev(handle).model.power_limit_w * 1000)

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        dev = self._dev(handle)
        dev.samples += 1
        if dev.lost_at is not None and dev.samples > dev.lost_at:
            dev.lost = True
            raise nvml_error("GpuIsLost")
        if dev.xid_at is not None and dev.samples > dev.xid_at:
            self._fire_xid(dev)
        if "ecc" in dev.faults and dev.samples % 3 == 0:
            dev.ecc_uncorrected += 1
        self._advance(dev)
        util = int(round(dev.util))
        return _Obj(gpu=util, memory=int(round(util * 0.3 + (2 if self._busy(dev) else 0))))

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        dev = self._dev(handle)
        total = dev.model.memory_mib
        used = dev.model.base_used_mib + sum(p.mem_mib for p in dev.procs)
        if "phantom" in dev.faults:
            used += min(PHANTOM_MIB, total // 2)
        used = min(used, total - 1)
        return _Obj(total=total * MIB, used=used * MIB, free=(total - used) * MIB)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        dev = self._dev(handle)
        if "unknown" in dev.faults:
            raise nvml_error("Unknown")
        return int(round(dev.temp))

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
        if clock_type == NVML_CLOCK_SM:
            if not self._busy(dev):
                return m.sm_idle_mhz
            factor = 0.62 if "throttle" in dev.faults else 1.0
            return int(m.sm_max_mhz * factor) - (15 * dev.rng.randint(0, 2) if dev.util > 90 else 0)
        return m.mem_max_mhz if self._busy(dev) else m.mem_idle_mhz

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        dev = self._dev(handle)
        if "throttle" in dev.faults:
            return 0x8 | 0x80
        return 0x0 if self._busy(dev) else 0x1

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter: int) -> int:
        dev = self._dev(handle)
        if not dev.model.ecc:
            raise nvml_error("NotSupported")
        return dev.ecc_uncorrected if error_type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else 0

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        dev = self._dev(handle)
        return dev.model.pcie_gen if (self._busy(dev) or not dev.model.geforce) else 1

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._dev(handle).model.pcie_width

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> List[Any]:
        dev = self._dev(handle)
        return [_Obj(pid=p.pid, usedGpuMemory=p.mem_mib * MIB, gpuInstanceId=0xFFFFFFFF,
                     computeInstanceId=0xFFFFFFFF) for p in dev.procs]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> List[Any]:
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
