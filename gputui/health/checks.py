"""The GPU checks of ``problems``: memory, thermal and power, links.

Each takes one GPU's latest sample (and its latest health reading, its static
facts) and returns the ``Finding``s it sees; ``problems.gpu_findings`` calls them.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputui.common.i18n import N_
from gputui.config.models import HealthThresholds
from gputui.health import words as w
from gputui.health.finding import Finding, Level
from gputui.health.finding import finding as _f
from gputui.wire.messages import GpuInfo, GpuSample


def memory(
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
                w.ECC_ERRORS.format(n=ecc),
                N_("memory errors the card could not correct: results may be wrong"),
                N_("drain the card; reset it; if they come back, have it inspected"),
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
                N_("a memory row remap failed"),
                N_("the card ran out of spare memory rows"),
                N_("replace the card"),
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
                N_("reset required: a memory row remap is pending"),
                N_("a row was remapped after memory errors; a GPU reset applies it"),
                N_("drain the card and reset it once it is idle"),
                w.REMAPPED_ROWS.format(n=health.remapped_uncorrectable or 0),
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
                N_("reset required: a page retirement is pending"),
                N_("memory pages were retired after errors; a reset or reboot applies it"),
                N_("drain the card and reset it once it is idle"),
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
                w.RETIRED_PAGES.format(n=dbe),
                N_("the card's memory is wearing out"),
                N_("watch the count; have the card inspected if it keeps growing"),
                str(dbe),
            )
        )
    return out


_THROTTLE: dict[str, tuple[Level, str, str]] = {
    "hw_slowdown": (
        "warn",
        N_("HW slowdown"),
        N_("the card halves its clocks: too hot, or its power supply is short"),
    ),
    "hw_thermal": (
        "warn",
        N_("HW thermal slowdown"),
        N_("the card is too hot and slows itself down"),
    ),
    "hw_power_brake": (
        "warn",
        N_("HW power brake"),
        N_("an external power brake (the PSU or the board) slows the card"),
    ),
    "sw_thermal": (
        "info",
        N_("SW thermal slowdown"),
        N_("the driver slows the card to keep it under its temperature target"),
    ),
    "sw_power_cap": (
        "info",
        N_("SW power cap"),
        N_("the card runs at its power limit (normal under full load)"),
    ),
}


def thermal(
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
                w.SLOWDOWN_SUSTAINED.format(
                    n=slowdown_minutes, window=th.hw_slowdown_window_minutes
                ),
                N_(
                    "the card has been slowing itself down for minutes: cooling or power is failing"
                ),
                N_("check the fans, airflow and power supply; drain the card until it is fixed"),
                w.MINUTES.format(n=slowdown_minutes),
            )
        )
    for reason, (severity, title, meaning) in _THROTTLE.items():
        if reason not in throttle or (reason == "hw_slowdown" and sustained):
            continue
        action = (
            N_("nothing to do unless it lasts")
            if severity == "info"
            else N_("check cooling and power if it persists")
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
                w.NEAR_SLOWDOWN.format(temp=temp, slowdown=slowdown),
                N_("the card will soon slow itself down"),
                N_("check the fans and the airflow around the card"),
                f"{temp} °C",
            )
        )
    return out


def links(
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
    if info is not None:
        # An idle card lowers its link's generation to save power, never its width:
        # a narrow link is a fault at any load, a slow one only under load.
        gen, width = gpu.pcie_gen, gpu.pcie_width
        low_gen = (
            busy and gen is not None and info.pcie_max_gen is not None and gen < info.pcie_max_gen
        )
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
                    (w.PCIE_DOWN_LOADED if busy else w.PCIE_DOWN).format(
                        gen=gen,
                        width=width,
                        max_gen=info.pcie_max_gen,
                        max_width=info.pcie_max_width,
                    ),
                    N_("the link trained below its maximum: a bad riser, slot or seating"),
                    N_("reseat the card or its riser; check the BIOS's PCIe settings"),
                    w.PCIE_LINK.format(gen=gen, width=width),
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
                w.PCIE_REPLAYS.format(n=replays),
                N_("the PCIe link retransmits often: signal integrity problems"),
                N_("reseat the card; check the riser and the slot"),
                str(replays),
            )
        )
    down = nvlinks_down(health)
    if down:
        out.append(
            _f(
                "nvlink-down",
                "crit",
                host,
                gpu,
                w.NVLINK_DOWN.format(links=", ".join(map(str, down))),
                N_("GPU-to-GPU traffic falls back to PCIe or fails"),
                N_("reset the GPU; if the link stays down, have the board inspected"),
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
                w.NVLINK_ERRORS.format(links=", ".join(map(str, grew))),
                N_("replay, recovery or CRC errors on the link are growing"),
                N_("watch it; reset the GPU if they keep growing"),
                ",".join(map(str, grew)),
            )
        )
    what = fabric_trouble(health)
    if what is not None:
        out.append(
            _f(
                "fabric",
                "crit",
                host,
                gpu,
                w.FABRIC_NOT_READY.format(what=what),
                N_("the GPU is not registered with the NVLink fabric: multi-GPU jobs fail"),
                N_(
                    "check nvidia-fabricmanager on the host (systemctl status nvidia-fabricmanager)"
                ),
                what,
            )
        )
    return out


def nvlinks_down(health: GpuSample) -> list[int]:
    """The NVLinks a health reading says are down (inactive)."""
    return [link.link for link in health.nvlinks or () if link.active is False]


def fabric_trouble(health: GpuSample) -> str | None:
    """What is wrong with the card's NVSwitch fabric registration (None: nothing, or
    no fabric): ``not-started``, ``in-progress`` or ``failed (STATUS)``."""
    state = health.fabric_state
    if state in ("not-started", "in-progress"):
        return state
    if state == "completed" and health.fabric_status is not None:
        return w.FABRIC_FAILED.format(status=health.fabric_status)
    return None
