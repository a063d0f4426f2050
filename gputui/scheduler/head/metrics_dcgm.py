"""The GPU readings of ``/metrics``: dcgm-exporter's field names, units and help.

The names, types and units are dcgm-exporter's (its ``default-counters.csv`` and
``dcp-metrics-included.csv``, and DCGM's field list for those it leaves commented
out). Only what the samples carry is here: no ``DCGM_FI_DEV_MEMORY_TEMP`` (the helper
does not read the memory's temperature). ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` is
counted by the head from the power samples since it started (NVML's energy counter
is not sampled), so it starts again from zero when the head does, as a counter may.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import NamedTuple

from gputui.scheduler.head.metrics_state import LINK_COUNTERS, FleetView
from gputui.wire.messages import GpuSample

NO_HEALTH = GpuSample(index=0, uuid="")
"""The health reading of a GPU that has had none: every reading unknown."""
NO_LINKS: tuple[int | None, ...] = (None,) * len(LINK_COUNTERS)


class GpuSeries(NamedTuple):
    """One GPU of one live host, with what ``/metrics`` reads of it (a tuple: a
    scrape makes one per GPU)."""

    host: str
    hostname: str
    gpu_index: int
    uuid: str
    model: str
    now: GpuSample
    health: GpuSample
    """Its latest health reading (``NO_HEALTH``: none yet)."""
    last_xid: int | None
    energy_mj: float | None
    links: tuple[int | None, ...]
    """Its NVLinks' error counters summed (``LINK_COUNTERS`` order; None: unknown)."""

    @classmethod
    def of_view(cls, view: FleetView) -> Iterator[GpuSeries]:
        facts, xids, energy, links = view.gpus, view.last_xid, view.energy_mj, view.links
        for host in view.hosts:
            if not host.live or host.sample is None:
                continue
            name, hostname, readings = host.name, host.hostname, host.readings
            for gpu in sorted(host.sample.gpus, key=_INDEX):
                uuid = gpu.uuid
                known = facts.get(uuid)
                yield cls(
                    name,
                    hostname,
                    gpu.index,
                    uuid,
                    known.model if known is not None else "",
                    gpu,
                    readings.get(uuid, NO_HEALTH),
                    xids.get(uuid),
                    energy.get(uuid),
                    links.get(uuid, NO_LINKS),
                )


_INDEX = attrgetter("index")
_NOW = attrgetter("now")
_HEALTH = attrgetter("health")
_LINKS = attrgetter("links")
Reader = Callable[[GpuSeries], "float | int | bool | None"]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    kind: str
    help: str
    read: Reader
    attr: str | None = None
    """Read straight off the sample (``now``) or the health reading (``health``)."""
    source: str = ""

    def values(self, series: Sequence[GpuSeries]) -> list[float | int | bool | None]:
        """``read`` of every GPU (the common cases without a Python call per GPU)."""
        if self.attr is None:
            return list(map(self.read, series))
        if self.source == "series":
            return list(map(attrgetter(self.attr), series))
        if self.source == "links":
            k = LINK_COUNTERS.index(self.attr)
            return list(map(itemgetter(k), map(_LINKS, series)))
        which = _NOW if self.source == "now" else _HEALTH
        return list(map(attrgetter(self.attr), map(which, series)))


def _free(s: GpuSeries) -> int | None:
    used, total = s.now.mem_used_mib, s.now.mem_total_mib
    return None if used is None or total is None else max(0, total - used)


def _links(name: str, help_text: str, attr: str) -> FieldSpec:
    """The sum over a GPU's NVLinks of one error counter (None: no link has it)."""
    k = LINK_COUNTERS.index(attr)

    def read(s: GpuSeries) -> int | None:
        return s.links[k]

    return FieldSpec(name, "untyped", help_text, read, attr, "links")


def _own(name: str, kind: str, help_text: str, attr: str) -> FieldSpec:
    """A figure the head keeps of the GPU itself (its last Xid, its energy)."""

    def read(s: GpuSeries) -> float | int | None:
        value: float | int | None = getattr(s, attr)
        return value

    return FieldSpec(name, kind, help_text, read, attr, "series")


def _health(name: str, kind: str, help_text: str, attr: str) -> FieldSpec:
    def read(s: GpuSeries) -> float | int | bool | None:
        value: float | int | bool | None = getattr(s.health, attr)
        return value

    return FieldSpec(name, kind, help_text, read, attr, "health")


def _now(name: str, kind: str, help_text: str, attr: str) -> FieldSpec:
    def read(s: GpuSeries) -> float | int | bool | None:
        value: float | int | bool | None = getattr(s.now, attr)
        return value

    return FieldSpec(name, kind, help_text, read, attr, "now")


GPU_FIELDS = (
    _now("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "clock_sm_mhz"),
    _now("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "clock_mem_mhz"),
    _now("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temp_c"),
    _now("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_w"),
    _own(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "untyped",
        "Total energy consumption since the head started (in mJ), from the power samples.",
        "energy_mj",
    ),
    _health(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "untyped",
        "Total number of PCIe retries.",
        "pcie_replays",
    ),
    _now("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "util_gpu"),
    _now("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "util_mem"),
    _own("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "last_xid"),
    FieldSpec("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", _free),
    _now("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "mem_used_mib"),
    _now("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).", "mem_total_mib"),
    _now("DCGM_FI_DEV_FAN_SPEED", "gauge", "Fan speed (in %).", "fan_pct"),
    _now(
        "DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W).", "power_limit_w"
    ),
    _now("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe link generation.", "pcie_gen"),
    _now("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe link width (lanes).", "pcie_width"),
    _now(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "untyped",
        "Total number of single-bit volatile ECC errors.",
        "ecc_corrected",
    ),
    _now(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "untyped",
        "Total number of double-bit volatile ECC errors.",
        "ecc_uncorrected",
    ),
    _health(
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "untyped",
        "Total number of single-bit persistent ECC errors.",
        "ecc_corrected_total",
    ),
    _health(
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "untyped",
        "Total number of double-bit persistent ECC errors.",
        "ecc_uncorrected_total",
    ),
    _health(
        "DCGM_FI_DEV_RETIRED_SBE",
        "untyped",
        "Total number of retired pages due to single-bit errors.",
        "retired_sbe",
    ),
    _health(
        "DCGM_FI_DEV_RETIRED_DBE",
        "untyped",
        "Total number of retired pages due to double-bit errors.",
        "retired_dbe",
    ),
    _health(
        "DCGM_FI_DEV_RETIRED_PENDING",
        "untyped",
        "Whether pages are pending retirement (1) or not (0).",
        "retired_pending",
    ),
    _links(
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "Total number of NVLink flow-control CRC errors.",
        "crc_flit_errors",
    ),
    _links(
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "Total number of NVLink data CRC errors.",
        "crc_data_errors",
    ),
    _links(
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "Total number of NVLink retries.",
        "replay_errors",
    ),
    _links(
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "Total number of NVLink recovery errors.",
        "recovery_errors",
    ),
    _health(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "untyped",
        "Number of remapped rows for uncorrectable errors",
        "remapped_uncorrectable",
    ),
    _health(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "untyped",
        "Number of remapped rows for correctable errors",
        "remapped_correctable",
    ),
    _health(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        "remap_failed",
    ),
)
"""Every GPU family, in the order dcgm-exporter's default counters list them."""
