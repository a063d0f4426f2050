"""A GPU's health readings: memory repair state, lifetime ECC, links, fabric, settings.

Read less often than the live readings (see ``HealthClock``), each through the GPU's
guarded ``read``: a reading the card or driver does not support is null with its NVML
error name in the sample's ``errors`` (``NotSupported`` on a GeForce card,
``FunctionNotFound`` on an old driver), and ``GpuIsLost`` anywhere makes the GPU lost.
"""

from __future__ import annotations

import ctypes
import time
from typing import TYPE_CHECKING, Any, Callable, Dict

from .nvml import (
    NA,
    NVML_AGGREGATE_ECC,
    NVML_MEMORY_ERROR_TYPE_CORRECTED,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
    status_name,
)

if TYPE_CHECKING:
    from .gpus import Gpu

DEFAULT_HEALTH_EVERY = 10.0
MIN_HEALTH_EVERY, MAX_HEALTH_EVERY = 1.0, 3600.0

NVLINK_MAX_LINKS = 18
"""Links asked about per GPU (H100 has 18); the protocol keeps as many."""
NVLINK_COUNTERS = (
    ("replay_errors", 0),  # NVML_NVLINK_ERROR_DL_REPLAY
    ("recovery_errors", 1),  # NVML_NVLINK_ERROR_DL_RECOVERY
    ("crc_flit_errors", 2),  # NVML_NVLINK_ERROR_DL_CRC_FLIT
    ("crc_data_errors", 3),  # NVML_NVLINK_ERROR_DL_CRC_DATA
)
# An NVLink state read that means "no link with this number": the links are over.
_NO_SUCH_LINK = ("NotSupported", "InvalidArgument")
RETIRE_MULTIPLE_SBE, RETIRE_DBE = 0, 1  # nvmlPageRetirementCause_t
FABRIC_STATES = {0: "not-supported", 1: "not-started", 2: "in-progress", 3: "completed"}
FABRIC_COMPLETED = 3

Entry = Dict[str, Any]


class HealthClock:
    """When a sample carries the health readings: the first one, then every
    ``every`` seconds, and the next one after an Xid (``xid_seen``)."""

    def __init__(
        self, every: float = DEFAULT_HEALTH_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every = every
        self.clock = clock
        self._next: float | None = None  # None: due now

    def xid_seen(self) -> None:
        self._next = None

    def due(self) -> bool:
        """Whether this sample reads health; if so, the next reading is scheduled."""
        now = self.clock()
        if self._next is not None and now < self._next:
            return False
        self._next = now + self.every
        return True


def put(out: Entry, errors: dict[str, str], key: str, value: Any, convert: Any = None) -> None:
    """``out[key]`` from one reading: null with the error named when it is an ``NA``."""
    if isinstance(value, NA):
        out[key] = None
        errors[key] = value.error
    else:
        out[key] = convert(value) if convert is not None else value


def read_health(gpu: Gpu, out: Entry, errors: dict[str, str]) -> None:
    """Fill ``out`` (a ``GpuSample`` dict) with every ``HealthReadings`` field."""
    out["health_read"] = True
    rows = gpu.read("nvmlDeviceGetRemappedRows")
    keys = ("remapped_correctable", "remapped_uncorrectable", "remap_pending", "remap_failed")
    if isinstance(rows, NA):
        for key in keys:
            put(out, errors, key, rows)
    else:
        corr, unc, pending, failed = rows  # (corrRows, uncRows, isPending, failureOccurred)
        out.update(zip(keys, (int(corr), int(unc), bool(pending), bool(failed))))
    for key, cause in (("retired_sbe", RETIRE_MULTIPLE_SBE), ("retired_dbe", RETIRE_DBE)):
        put(out, errors, key, gpu.read("nvmlDeviceGetRetiredPages", cause), len)
    pending_pages = gpu.read("nvmlDeviceGetRetiredPagesPendingStatus")
    put(out, errors, "retired_pending", pending_pages, lambda v: int(v) == 1)
    for key, kind in (
        ("ecc_corrected_total", NVML_MEMORY_ERROR_TYPE_CORRECTED),
        ("ecc_uncorrected_total", NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
    ):
        total = gpu.read("nvmlDeviceGetTotalEccErrors", kind, NVML_AGGREGATE_ECC)
        put(out, errors, key, total, int)
    mode = gpu.read("nvmlDeviceGetPersistenceMode")
    put(out, errors, "persistence", mode, lambda v: int(v) == 1)
    put(out, errors, "pcie_replays", gpu.read("nvmlDeviceGetPcieReplayCounter"), int)
    _nvlinks(gpu, out, errors)
    _fabric(gpu, out, errors)


def _nvlinks(gpu: Gpu, out: Entry, errors: dict[str, str]) -> None:
    """Links 0.. until one is not there; a card with none has ``nvlinks`` null."""
    links: list[Entry] = []
    for link in range(NVLINK_MAX_LINKS):
        state = gpu.read("nvmlDeviceGetNvLinkState", link)
        if isinstance(state, NA):
            if not links:  # the first link already: no NVLink to speak of (or no way to ask)
                out["nvlinks"] = None
                errors["nvlinks"] = state.error
                return
            if state.error in _NO_SUCH_LINK:
                break
            links.append({"link": link, "active": None, "errors": {"active": state.error}})
            continue
        entry: Entry = {"link": link, "active": int(state) == 1}
        link_errors: dict[str, str] = {}
        for key, counter in NVLINK_COUNTERS:
            put(entry, link_errors, key, gpu.read("nvmlDeviceGetNvLinkErrorCounter", link, counter))
        entry["errors"] = link_errors
        links.append(entry)
    out["nvlinks"] = links


def _fabric(gpu: Gpu, out: Entry, errors: dict[str, str]) -> None:
    """NVSwitch fabric registration: ``nvmlDeviceGetGpuFabricInfoV`` (the v2 struct)
    where the driver has it, else the older ``nvmlDeviceGetGpuFabricInfo``; both fill
    a struct the caller passes (``.state``, ``.status``)."""
    lib = gpu.lib
    info: Any = None
    answer: Any = NA("FunctionNotFound")
    if gpu.fabric_v:
        struct = getattr(lib, "c_nvmlGpuFabricInfoV_t", None)
        if struct is not None:
            info = struct()
            answer = gpu.read("nvmlDeviceGetGpuFabricInfoV", ctypes.byref(info))
        if isinstance(answer, NA) and answer.error == "FunctionNotFound":
            gpu.fabric_v = False  # an older driver: the v1 call from now on
    if not gpu.fabric_v:
        struct = getattr(lib, "c_nvmlGpuFabricInfo_t", None)
        if struct is None:
            answer = NA("FunctionNotFound")
        else:
            info = struct()
            answer = gpu.read("nvmlDeviceGetGpuFabricInfo", ctypes.byref(info))
    out["fabric_status"] = None
    if isinstance(answer, NA):
        put(out, errors, "fabric_state", answer)
        return
    state = FABRIC_STATES.get(int(info.state))
    out["fabric_state"] = state
    if state is None:
        errors["fabric_state"] = "Unknown"
    elif int(info.state) == FABRIC_COMPLETED:
        out["fabric_status"] = status_name(int(info.status))
