"""AMD GPUs, read through ROCm's ``amdsmi`` Python library behind the guarded accessor.

``amdsmi`` is optional: ``load_amdsmi`` imports it on first use and gives None on a
host without it (or without its ``libamd_smi.so``), and the helper then reads the
vendor it has. Every read goes through ``nvml.query`` (``Gpu.read``), which turns an
``AmdSmiException`` into an ``NA`` named after its status code, so one card failing,
or a reading a card does not give, never takes down the others. What amdsmi does not
report in the fields the wire carries (fan, throttle reasons, PCIe link, MIG) is
``NotSupported``, as NVML's unsupported readings are.

Units as amdsmi gives them: VRAM in MiB, temperatures in degrees C, socket power in W,
the power cap in microwatts, process memory in bytes. A value amdsmi marks ``"N/A"``
(its 0xFFFF sentinel) is ``NotSupported``; a value of the wrong type or out of range
is ``Unknown``: both null on the wire.

An AMD card's UUID is ``GPU-`` and its unique id in 16 hex digits: the form ROCm's
runtime (``rocminfo``) shows and ``ROCR_VISIBLE_DEVICES`` takes. Where amdsmi gives
no serial, it is ``GPU-`` and amdsmi's own device UUID.
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

from .gpus import MAX_PROCESSES, Gpu
from .nvml import MIB, NA, query, text
from .procs import PID_MAX, ProcessTable

NOT_READ = ("fan_pct", "throttle", "pcie_gen", "pcie_width")
"""Sample fields amdsmi has no reading for here: always ``NotSupported``."""
NOT_READ_INFO = ("pcie_max_gen", "pcie_max_width", "mig_mode")
_SERIAL_RE = re.compile(r"(?:0[xX])?([0-9A-Fa-f]{1,16})")
_UUID_RE = re.compile(r"[0-9A-Za-z-]{1,64}")
ROCR_UUID_RE = re.compile(r"GPU-[0-9a-f]{16}")
"""The UUID form ROCm's runtime gives a card, and ``ROCR_VISIBLE_DEVICES`` takes."""
_BIG = 2**63 - 1


def load_amdsmi() -> Any | None:
    """The ``amdsmi`` module, or None where it is not installed or cannot load its
    library. Its import prints to stdout when ``libamd_smi.so`` is missing: that
    would corrupt the helper's JSON lines, so stdout is set aside meanwhile."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import amdsmi  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except Exception:  # not installed, no libamd_smi.so (its import raises KeyError)
        return None
    return amdsmi


def _enum(lib: Any, kind: str, member: str) -> Any:
    """``lib.kind.member`` (``AmdSmiTemperatureType.EDGE``), or None if the binding
    has no such thing."""
    return getattr(getattr(lib, kind, None), member, None)


def _number(value: Any, low: float, high: float, integer: bool = True) -> Any:
    """``value`` when it is a number within range, else an ``NA``."""
    if isinstance(value, NA):
        return value
    if value == "N/A":
        return NA("NotSupported", "amdsmi reports N/A")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return NA("Unknown", f"not a number: {text(repr(value), 40)}")
    if not low <= value <= high:  # NaN fails too
        return NA("Unknown", f"out of range: {text(repr(value), 40)}")
    return int(value) if integer else value


def _field(value: Any, key: str) -> Any:
    """``value[key]`` of an amdsmi dict, or the ``NA`` it is (or ``Unknown``)."""
    if isinstance(value, NA):
        return value
    if not isinstance(value, dict) or key not in value:
        return NA("Unknown", f"no {key} in amdsmi's answer")
    return value[key]


def rocr_uuid(serial: Any) -> str | None:
    """``GPU-<16 hex>`` from amdsmi's ``asic_serial`` (``0x...``), None when it names
    no card (N/A, empty, zero, not hex)."""
    if not isinstance(serial, str):
        return None
    match = _SERIAL_RE.fullmatch(serial.strip())
    if match is None or int(match.group(1), 16) == 0:
        return None
    return f"GPU-{int(match.group(1), 16):016x}"


_UNSUPPORTED = ("NotSupported", "FunctionNotFound")


class CardFailed(Exception):
    """Every basic reading of an AMD card failed (its sample becomes ``error``)."""


class AmdGpu(Gpu):
    """One AMD card: its amdsmi processor handle and how to read it now.

    ``index`` is its place among all the host's GPUs (after NVIDIA's), so a GPU is
    still one index per host on the wire; ``vendor_index`` is its place among the AMD
    cards (amdsmi's order). amdsmi has no "GPU is lost" answer: a card that fails
    answers errors field by field, or its whole sample is ``error``."""

    vendor = "amd"

    # ``read`` is Gpu's: ``query(lib, name, handle, *args)``, as amdsmi's calls take the
    # handle first too. A call by NVML's name (a reset, the minor number) is
    # ``FunctionNotFound`` on the amdsmi module, never a call into the wrong library.

    def __init__(self, lib: Any, index: int, vendor_index: int, handle: Any) -> None:
        # Not Gpu.__init__: that asks NVML for a handle; amdsmi gave this one.
        self.lib = lib
        self.index = index
        self.vendor_index = vendor_index
        self.handle = handle
        self._mem_version = None
        self.fabric_v = False
        self.uuid = f"GPU-amd-unknown-{vendor_index}"
        self.state = "ok"
        self.message: str | None = None
        self.info: dict[str, Any] = {"index": index, "uuid": self.uuid, "errors": {}}
        self._sensor = _enum(lib, "AmdSmiTemperatureType", "EDGE")

    @property
    def rocr_id(self) -> str:
        """What ``ROCR_VISIBLE_DEVICES`` names this card by: its UUID where it has
        ROCm's form, else its index among the AMD cards."""
        return self.uuid if ROCR_UUID_RE.fullmatch(self.uuid) else str(self.vendor_index)

    # -- static facts ------------------------------------------------------------------

    def _temp(self, metric: str, sensor: Any = None) -> Any:
        kind = _enum(self.lib, "AmdSmiTemperatureMetric", metric)
        sensor = self._sensor if sensor is None else sensor
        if kind is None or sensor is None:
            return NA("FunctionNotFound", "no temperature enums in this amdsmi binding")
        return _number(self.read("amdsmi_get_temp_metric", sensor, kind), -40, 200)

    def _pick_sensor(self) -> None:
        """The edge sensor where the card has one, else the junction (hotspot): an
        MI300X reports no edge temperature."""
        edge = self._temp("CURRENT")
        if isinstance(edge, NA) or edge == 0:
            hotspot = _enum(self.lib, "AmdSmiTemperatureType", "HOTSPOT")
            if hotspot is not None and not isinstance(self._temp("CURRENT", hotspot), NA):
                self._sensor = hotspot

    def inventory(self) -> dict[str, Any]:
        """The static ``GpuInfo`` for ``hello``."""
        errors: dict[str, str] = {}
        info: dict[str, Any] = {"index": self.index}
        try:
            asic = self.read("amdsmi_get_gpu_asic_info")
            uuid = rocr_uuid(_field(asic, "asic_serial"))
            if uuid is None:
                dev = self.read("amdsmi_get_gpu_device_uuid")
                if isinstance(dev, str) and _UUID_RE.fullmatch(dev.strip()):
                    uuid = "GPU-" + dev.strip()
                else:
                    errors["uuid"] = dev.error if isinstance(dev, NA) else "Unknown"
            if uuid is not None:
                info["uuid"] = uuid
            name = _field(asic, "market_name")
            self._put(info, errors, "name", name if name != "N/A" else NA("NotSupported"))
            if isinstance(info.get("name"), str):
                info["name"] = text(info["name"], 128)
            board = self.read("amdsmi_get_gpu_board_info")
            serial = _field(board, "product_serial")
            serial = serial if serial != "N/A" else NA("NotSupported")
            self._put(info, errors, "serial", serial)
            bdf = self.read("amdsmi_get_gpu_device_bdf")
            self._put(info, errors, "pci_bus_id", bdf)
            vram = self.read("amdsmi_get_gpu_vram_usage")
            total = _number(_field(vram, "vram_total"), 0, 2**24)
            self._put(info, errors, "memory_total_mib", total)
            cap = _number(_field(self.read("amdsmi_get_power_cap_info"), "power_cap"), 0, 1e10)
            if not isinstance(cap, NA):
                cap = round(cap / 1e6, 2)
            self._put(info, errors, "power_limit_w", cap)
            self._pick_sensor()
            self._put(info, errors, "temp_slowdown_c", self._nonzero(self._temp("CRITICAL")))
            self._put(info, errors, "temp_shutdown_c", self._nonzero(self._temp("EMERGENCY")))
            for key in NOT_READ_INFO:
                info[key] = None
                errors[key] = "NotSupported"
        except Exception as exc:
            errors["inventory"] = "Unknown"
            self.message = (f"inventory failed: {type(exc).__name__}: {exc}")[:512]
        for key in ("pci_bus_id", "serial"):
            if isinstance(info.get(key), str):
                info[key] = text(info[key], 64)
        if info.get("uuid"):
            self.uuid = info["uuid"]
        else:
            info["uuid"] = self.uuid
        info["errors"] = errors
        self.info = info
        return dict(info)

    @staticmethod
    def _nonzero(value: Any) -> Any:
        """amdsmi answers 0 for a limit the card does not report (amd-smi shows N/A)."""
        return NA("NotSupported", "reported as 0") if value == 0 else value

    # -- readings now --------------------------------------------------------------

    def sample(self, table: ProcessTable, health: bool = False) -> dict[str, Any]:
        """This card's ``GpuSample`` now; the health readings are NVML's (remapped
        rows, NVLink, fabric), so an AMD card's samples never carry them."""
        return super().sample(table, False)

    def _fill(self, out: dict[str, Any], errors: dict[str, str], table: ProcessTable) -> None:
        act = self.read("amdsmi_get_gpu_activity")
        vram = self.read("amdsmi_get_gpu_vram_usage")  # once a sample, failed or not
        if (
            isinstance(act, NA)
            and act.error not in _UNSUPPORTED
            and isinstance(vram, NA)
            and vram.error not in _UNSUPPORTED
        ):
            # Neither activity nor memory: the card itself fails (off the bus, its
            # driver wedged), not a reading it lacks: the sample's state is error.
            raise CardFailed(f"amdsmi answers {act.error} for activity and memory")
        self._put(out, errors, "util_gpu", _number(_field(act, "gfx_activity"), 0, 100))
        self._put(out, errors, "util_mem", _number(_field(act, "umc_activity"), 0, 100))
        self._put(out, errors, "mem_used_mib", _number(_field(vram, "vram_used"), 0, 2**24))
        self._put(out, errors, "mem_total_mib", _number(_field(vram, "vram_total"), 0, 2**24))
        self._put(out, errors, "temp_c", self._temp("CURRENT"))
        self._put(out, errors, "power_w", self._power())
        cap = _number(_field(self.read("amdsmi_get_power_cap_info"), "power_cap"), 0, 1e10)
        if self._put(out, errors, "power_limit_w", cap):
            out["power_limit_w"] = round(cap / 1e6, 2)
        for key, member in (("clock_sm_mhz", "GFX"), ("clock_mem_mhz", "MEM")):
            clock = _enum(self.lib, "AmdSmiClkType", member)
            value = (
                self.read("amdsmi_get_clock_info", clock)
                if clock is not None
                else NA("FunctionNotFound", "no AmdSmiClkType in this amdsmi binding")
            )
            self._put(out, errors, key, _number(_field(value, "clk"), 0, 100_000))
        ecc = self.read("amdsmi_get_gpu_total_ecc_count")
        self._put(out, errors, "ecc_corrected", _number(_field(ecc, "correctable_count"), 0, _BIG))
        self._put(
            out, errors, "ecc_uncorrected", _number(_field(ecc, "uncorrectable_count"), 0, _BIG)
        )
        for key in NOT_READ:
            out[key] = None
            errors[key] = "NotSupported"
        out["processes"] = self._processes(errors, table)

    def _power(self) -> Any:
        """Socket power now (W): ``socket_power`` (ROCm 7), else the current, else the
        average reading (an MI200 reports only the average)."""
        info = self.read("amdsmi_get_power_info")
        if isinstance(info, NA):
            return info
        found: Any = NA("NotSupported", "no socket power reading")
        for key in ("socket_power", "current_socket_power", "average_socket_power"):
            if isinstance(info, dict) and key in info:
                found = _number(info[key], 0, 10_000, integer=False)
                if not isinstance(found, NA):
                    return round(float(found), 2)
        return found

    def _process_infos(self, errors: dict[str, str]) -> list[dict[str, Any]] | None:
        """amdsmi's process list as dicts: ROCm >= 6.2 lists dicts; older releases list
        structs, each read with ``amdsmi_get_gpu_process_info``. None when unreadable."""
        procs = self.read("amdsmi_get_gpu_process_list")
        if isinstance(procs, NA) or not isinstance(procs, list):
            errors["processes"] = procs.error if isinstance(procs, NA) else "Unknown"
            return None
        infos: list[dict[str, Any]] = []
        for listed in procs[: MAX_PROCESSES * 2]:
            item = listed
            if not isinstance(item, dict):
                item = self.read("amdsmi_get_gpu_process_info", listed)
                if isinstance(item, NA) or not isinstance(item, dict):
                    errors["processes"] = item.error if isinstance(item, NA) else "Unknown"
                    continue
            infos.append(item)
        return infos

    @staticmethod
    def _pid(info: dict[str, Any]) -> int | None:
        pid = info.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= PID_MAX:
            return None
        return pid

    def _processes(self, errors: dict[str, str], table: ProcessTable) -> list[dict[str, Any]]:
        infos = self._process_infos(errors)
        found: list[dict[str, Any]] = []
        seen: set[int] = set()
        for info in infos or ():
            pid = self._pid(info)
            if pid is None or pid in seen or len(found) >= MAX_PROCESSES:
                continue
            seen.add(pid)
            entry = table.lookup(pid)
            usage = info.get("memory_usage")
            vram = usage.get("vram_mem") if isinstance(usage, dict) else None
            if vram is None:
                vram = info.get("mem")
            used = _number(vram, 0, 2**24 * MIB)
            entry["gpu_mem_mib"] = None if isinstance(used, NA) else int(used // MIB)
            entry["kind"] = "compute"
            found.append(entry)
        return found

    def memory_used_mib(self) -> int | None:
        used = _number(_field(self.read("amdsmi_get_gpu_vram_usage"), "vram_used"), 0, 2**24)
        return None if isinstance(used, NA) else int(used)

    def pids(self) -> set[int] | None:
        infos = self._process_infos({})
        if infos is None:
            return None
        return {pid for pid in (self._pid(i) for i in infos) if pid is not None}


def open_amd(lib: Any, first_index: int, limit: int) -> tuple[list[AmdGpu], str | None]:
    """The AMD cards amdsmi lists (at most ``limit``), numbered on the host from
    ``first_index``; the error name when it could not list them."""
    listed = query(lib, "amdsmi_get_processor_handles")
    if isinstance(listed, NA):
        return [], listed.error
    if not isinstance(listed, list):
        return [], "Unknown"
    gpus = [AmdGpu(lib, first_index + i, i, h) for i, h in enumerate(listed[: max(0, limit)])]
    return gpus, None
