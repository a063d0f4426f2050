"""The health checks: what is wrong with a host or a GPU now, what it means, what to do.

Pure functions from one host's latest readings to ``Finding``s; ``board.HealthBoard``
keeps them over time (first and last seen, counts, acknowledgements) and ranks them.
The checks cover what the single-node health daemons check on NVIDIA cards (gpud,
gcm), for every host at once.

A check whose reading the card does not support is neither a problem nor ok: it is
*unknown*, and ``unknown_checks`` lists those, so a view can say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from gputui.config import HealthThresholds
from gputui.protocol import GpuInfo, GpuSample, Hello

from .rules import holds_memory_without_process

Level = Literal["crit", "warn", "info"]
RANK: dict[str, int] = {"crit": 0, "warn": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem as a check sees it now."""

    code: str
    """Short and stable: ``xid-79``, ``ecc-uncorrected``, ``remap-pending`` ..."""
    severity: Level
    host: str
    gpu: int | None
    """The GPU's index on its host; None for the host itself."""
    title: str
    meaning: str
    action: str
    detail: str = ""
    """The figures behind it (a change unacknowledges it)."""
    uuid: str | None = None
    badge: str = ""
    """A short marker for the grid (``RESET``, ``RMA``), or empty."""

    @property
    def key(self) -> str:
        return f"{self.host}:{'' if self.gpu is None else self.gpu}:{self.code}"


def _f(  # noqa: PLR0917 - the fields of a finding, in their order
    code: str,
    severity: Level,
    host: str,
    gpu: GpuSample | None,
    title: str,
    meaning: str,
    action: str,
    detail: str = "",
    badge: str = "",
) -> Finding:
    return Finding(
        code,
        severity,
        host,
        None if gpu is None else gpu.index,
        title,
        meaning,
        action,
        detail,
        None if gpu is None else gpu.uuid,
        badge,
    )


# -- the host ------------------------------------------------------------------------


def host_findings(
    host: str,
    hello: Hello | None,
    *,
    expected_gpus: int | None,
    most_seen: int,
) -> list[Finding]:
    """The helper or NVML failing to start, and GPUs missing from the count."""
    out: list[Finding] = []
    if hello is None:
        return out
    nvml = hello.errors.get("nvml")
    if nvml == "LibRmVersionMismatch":
        out.append(
            _f(
                "driver-mismatch",
                "crit",
                host,
                None,
                "NVML library and kernel driver versions differ",
                "the driver was upgraded but the old kernel module is still loaded",
                "reboot the host (or reload the nvidia kernel modules)",
                f"driver {hello.driver or '?'}, NVML {hello.nvml or '?'}",
            )
        )
    elif nvml:
        out.append(
            _f(
                "nvml-failed",
                "crit",
                host,
                None,
                f"NVML did not start: {nvml}",
                "the helper cannot read the GPUs (driver not loaded, or no permission)",
                "check the driver on the host (nvidia-smi), then reconnect",
                nvml,
            )
        )
    seen = len(hello.gpus)
    for what, count in (("configured", expected_gpus), ("seen before", most_seen or None)):
        if count is not None and seen < count:
            out.append(
                _f(
                    "gpu-missing",
                    "crit",
                    host,
                    None,
                    f"{seen} of {count} GPUs ({what})",
                    "a GPU has fallen off the bus or is no longer seen by the driver",
                    "check nvidia-smi and the kernel log; reboot, then inspect the card",
                    f"{seen} seen, {count} {what}",
                )
            )
            break
    return out


# -- a GPU ---------------------------------------------------------------------------


def gpu_findings(
    host: str,
    gpu: GpuSample,
    health: GpuSample | None,
    info: GpuInfo | None,
    thresholds: HealthThresholds,
    *,
    slowdown_minutes: int = 0,
    nvlink_grew: Iterable[int] = (),
) -> list[Finding]:
    """Everything wrong with one GPU from its latest sample, its latest health reading
    (``health``: the last sample with ``health_read``), its static facts, how many of
    the last minutes showed HW slowdown, and which NVLinks' error counters grew."""
    out: list[Finding] = []
    if gpu.state == "lost":
        out.append(
            _f(
                "lost",
                "crit",
                host,
                gpu,
                "GPU lost",
                "NVML answers GpuIsLost: the card has fallen off the bus or hung",
                "reboot the host; if it comes back lost, have the card inspected",
                badge="LOST",
            )
        )
        return out
    if gpu.state == "error":
        out.append(
            _f(
                "read-error",
                "warn",
                host,
                gpu,
                "GPU readings failed",
                gpu.message or "the helper could not read this GPU",
                "look at the helper's message; check the card with nvidia-smi",
            )
        )
    out += _memory(host, gpu, health, thresholds)
    out += _thermal(host, gpu, info, thresholds, slowdown_minutes)
    out += _links(host, gpu, health, info, th=thresholds, nvlink_grew=nvlink_grew)
    if thresholds.expect_persistence and health is not None and health.persistence is False:
        out.append(
            _f(
                "persistence-off",
                "warn",
                host,
                gpu,
                "persistence mode is off",
                "the driver unloads between jobs: slow starts, and settings are lost",
                "turn it on: `nvidia-smi -pm 1` (or the nvidia-persistenced service)",
            )
        )
    if holds_memory_without_process(gpu):
        out.append(
            _f(
                "orphan-memory",
                "warn",
                host,
                gpu,
                f"{gpu.mem_used_mib} MiB held with no process",
                "a stuck or zombie context, or a process in a namespace the helper cannot see",
                "see what holds /dev/nvidia* (fuser -v); force-free or reset the GPU",
                f"{gpu.mem_used_mib} MiB",
            )
        )
    return out


def _memory(
    host: str, gpu: GpuSample, health: GpuSample | None, th: HealthThresholds
) -> list[Finding]:
    out: list[Finding] = []
    ecc = gpu.ecc_uncorrected
    if ecc is not None and ecc > th.ecc_uncorrected_max:
        out.append(
            _f(
                "ecc-uncorrected",
                "crit",
                host,
                gpu,
                f"{ecc} uncorrected ECC errors",
                "memory errors the card could not correct: results may be wrong",
                "drain the card; reset it; if they come back, have it inspected",
                str(ecc),
            )
        )
    if health is None:
        return out
    if health.remap_failed:
        out.append(
            _f(
                "remap-failed",
                "crit",
                host,
                gpu,
                "a memory row remap failed",
                "the card ran out of spare memory rows",
                "replace the card",
                badge="RMA",
            )
        )
    elif health.remap_pending:
        out.append(
            _f(
                "remap-pending",
                "warn",
                host,
                gpu,
                "reset required: a memory row remap is pending",
                "a row was remapped after memory errors; a GPU reset applies it",
                "drain the card and reset it once it is idle",
                f"{health.remapped_uncorrectable or 0} rows for uncorrectable errors",
                badge="RESET",
            )
        )
    if health.retired_pending:
        out.append(
            _f(
                "retire-pending",
                "warn",
                host,
                gpu,
                "reset required: a page retirement is pending",
                "memory pages were retired after errors; a reset or reboot applies it",
                "drain the card and reset it once it is idle",
                badge="RESET",
            )
        )
    dbe = health.retired_dbe
    if dbe is not None and dbe > th.retired_pages_max:
        out.append(
            _f(
                "retired-pages",
                "warn",
                host,
                gpu,
                f"{dbe} memory pages retired for double-bit errors",
                "the card's memory is wearing out",
                "watch the count; have the card inspected if it keeps growing",
                str(dbe),
            )
        )
    return out


_THROTTLE: dict[str, tuple[Level, str, str]] = {
    "hw_slowdown": (
        "warn",
        "HW slowdown",
        "the card halves its clocks: too hot, or its power supply is short",
    ),
    "hw_thermal": ("warn", "HW thermal slowdown", "the card is too hot and slows itself down"),
    "hw_power_brake": (
        "warn",
        "HW power brake",
        "an external power brake (the PSU or the board) slows the card",
    ),
    "sw_thermal": (
        "info",
        "SW thermal slowdown",
        "the driver slows the card to keep it under its temperature target",
    ),
    "sw_power_cap": (
        "info",
        "SW power cap",
        "the card runs at its power limit (normal under full load)",
    ),
}


def _thermal(
    host: str, gpu: GpuSample, info: GpuInfo | None, th: HealthThresholds, slowdown_minutes: int
) -> list[Finding]:
    out: list[Finding] = []
    throttle = set(gpu.throttle or ())
    sustained = slowdown_minutes >= th.hw_slowdown_minutes
    if sustained:
        out.append(
            _f(
                "hw-slowdown-sustained",
                "crit",
                host,
                gpu,
                f"HW slowdown in {slowdown_minutes} of the last "
                f"{th.hw_slowdown_window_minutes} minutes",
                "the card has been slowing itself down for minutes: cooling or power is failing",
                "check the fans, airflow and power supply; drain the card until it is fixed",
                f"{slowdown_minutes} minutes",
            )
        )
    for reason, (severity, title, meaning) in _THROTTLE.items():
        if reason not in throttle or (reason == "hw_slowdown" and sustained):
            continue
        action = (
            "nothing to do unless it lasts"
            if severity == "info"
            else "check cooling and power if it persists"
        )
        out.append(_f(f"throttle-{reason}", severity, host, gpu, title, meaning, action))
    slowdown = info.temp_slowdown_c if info is not None else None
    temp = gpu.temp_c
    if slowdown is not None and temp is not None and temp >= slowdown - th.slowdown_margin_c:
        out.append(
            _f(
                "near-slowdown",
                "warn",
                host,
                gpu,
                f"{temp} °C, near its slowdown temperature ({slowdown} °C)",
                "the card will soon slow itself down",
                "check the fans and the airflow around the card",
                f"{temp} °C",
            )
        )
    return out


def _links(
    host: str,
    gpu: GpuSample,
    health: GpuSample | None,
    info: GpuInfo | None,
    *,
    th: HealthThresholds,
    nvlink_grew: Iterable[int],
) -> list[Finding]:
    out: list[Finding] = []
    busy = (gpu.util_gpu or 0) > th.pcie_load_pct
    if info is not None and busy:
        gen, width = gpu.pcie_gen, gpu.pcie_width
        low_gen = gen is not None and info.pcie_max_gen is not None and gen < info.pcie_max_gen
        low_width = (
            width is not None and info.pcie_max_width is not None and width < info.pcie_max_width
        )
        if low_gen or low_width:
            out.append(
                _f(
                    "pcie-downgrade",
                    "warn",
                    host,
                    gpu,
                    f"PCIe Gen{gen} x{width} under load "
                    f"(at most Gen{info.pcie_max_gen} x{info.pcie_max_width})",
                    "the link trained below its maximum: a bad riser, slot or seating",
                    "reseat the card or its riser; check the BIOS's PCIe settings",
                    f"Gen{gen} x{width}",
                )
            )
    if health is None:
        return out
    replays = health.pcie_replays
    if replays is not None and replays > th.pcie_replays_max:
        out.append(
            _f(
                "pcie-replays",
                "warn",
                host,
                gpu,
                f"{replays} PCIe replays",
                "the PCIe link retransmits often: signal integrity problems",
                "reseat the card; check the riser and the slot",
                str(replays),
            )
        )
    down = [link.link for link in health.nvlinks or () if link.active is False]
    if down:
        out.append(
            _f(
                "nvlink-down",
                "crit",
                host,
                gpu,
                f"NVLink {', '.join(map(str, down))} down",
                "GPU-to-GPU traffic falls back to PCIe or fails",
                "reset the GPU; if the link stays down, have the board inspected",
                ",".join(map(str, down)),
            )
        )
    grew = sorted(set(nvlink_grew))
    if grew:
        out.append(
            _f(
                "nvlink-errors",
                "warn",
                host,
                gpu,
                f"NVLink {', '.join(map(str, grew))} counting errors",
                "replay, recovery or CRC errors on the link are growing",
                "watch it; reset the GPU if they keep growing",
                ",".join(map(str, grew)),
            )
        )
    state = health.fabric_state
    if state in ("not-started", "in-progress") or (
        state == "completed" and health.fabric_status is not None
    ):
        what = f"failed ({health.fabric_status})" if state == "completed" else state
        out.append(
            _f(
                "fabric",
                "crit",
                host,
                gpu,
                f"NVSwitch fabric not ready: {what}",
                "the GPU is not registered with the NVLink fabric: multi-GPU jobs fail",
                "check nvidia-fabricmanager on the host (systemctl status nvidia-fabricmanager)",
                what or "",
            )
        )
    return out


# -- what could not be checked ------------------------------------------------------------

_CHECKED: Mapping[str, str] = {
    "ecc_uncorrected": "ECC",
    "remap_pending": "row remapping",
    "retired_pending": "retired pages",
    "throttle": "throttling",
    "persistence": "persistence mode",
    "pcie_replays": "PCIe replays",
    "nvlinks": "NVLink",
    "fabric_state": "NVSwitch fabric",
    "temp_c": "temperature",
}


def unknown_checks(gpu: GpuSample, health: GpuSample | None) -> list[tuple[str, str]]:
    """(check, NVML's reason) for each check this GPU's readings cannot answer."""
    out: list[tuple[str, str]] = []
    for source in (gpu, health):
        if source is None:
            continue
        for field, name in _CHECKED.items():
            why = source.errors.get(field)
            if why is not None and (name, why) not in out:
                out.append((name, why))
    return out
