"""The health checks: what is wrong with a host or a GPU now, what it means, what to do.

Pure functions from one host's latest readings to ``Finding``s; ``board.HealthBoard``
keeps them over time (first and last seen, counts, acknowledgements) and ranks them.
The checks cover what the single-node health daemons check on NVIDIA cards (gpud,
gcm), for every host at once.

A check whose reading failed is neither a problem nor ok: it is *unknown*, and
``unknown_checks`` lists those, so a view can say so; unless the card's model does
not have the feature at all (no NVLink on a PCIe card; retired pages on a card that
remaps rows): then it is *not applicable* (``not_applicable_checks``), decided by
``applicable.verdict``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gputui.config.models import HealthThresholds
from gputui.health.applicable import verdict
from gputui.health.checks import links, memory, thermal
from gputui.health.finding import Finding
from gputui.health.finding import finding as _f
from gputui.health.rules import holds_memory_without_process
from gputui.wire.messages import GpuInfo, GpuSample, Hello

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
    if nvml_error_name(nvml) == "LibRmVersionMismatch":
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


def nvml_error_name(text: str | None) -> str | None:
    """NVML's error name in a helper's report of it: ``LibRmVersionMismatch`` from
    ``LibRmVersionMismatch: RM has detected ...`` or ``NVMLError_LibRmVersionMismatch``."""
    if not text:
        return None
    name = text.partition(":")[0].strip()
    return name.removeprefix("NVMLError_")


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
    out += memory(host, gpu, health, thresholds)
    out += thermal(host, gpu, info, thresholds, slowdown_minutes)
    out += links(host, gpu, health, info, th=thresholds, nvlink_grew=nvlink_grew)
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


def sorted_checks(
    gpu: GpuSample, health: GpuSample | None, info: GpuInfo | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """(unknown: (check, why) each, not applicable: check names) for this GPU."""
    unknown: list[tuple[str, str]] = []
    not_applicable: list[str] = []
    name = info.name if info is not None else None
    if health is None and not gpu.health_read:
        # No health reading yet: remaps, retired pages, NVLinks, the fabric and
        # persistence are not known, which is not the same as fine.
        unknown.append((NO_READING[0], NO_READING[1]))
    for source in (gpu, health):
        if source is None:
            continue
        readings = {key: getattr(source, key, None) for key in _CONTEXT}
        for field, check in _CHECKED.items():
            why = source.errors.get(field)
            if why is None:
                continue
            kind, reason = verdict(field, why, name, source.errors, readings)
            if kind == "unknown":
                if (check, reason) not in unknown:
                    unknown.append((check, reason))
            elif check not in not_applicable:
                not_applicable.append(check)
    return unknown, [c for c in not_applicable if all(c != u for u, _ in unknown)]


NO_READING = ("health readings", "none taken")
"""The unknown check of a GPU that has had no health reading (check, why)."""

_CONTEXT = ("fabric_state", "remap_pending", "retired_pending")
"""The readings ``verdict`` weighs besides the failed one."""


def unknown_checks(
    gpu: GpuSample, health: GpuSample | None, info: GpuInfo | None = None
) -> list[tuple[str, str]]:
    """(check, why) for each check that applies to this GPU and that its readings
    cannot answer (``why``: NVML's error, or that the card should have the feature)."""
    return sorted_checks(gpu, health, info)[0]


def not_applicable_checks(
    gpu: GpuSample, health: GpuSample | None, info: GpuInfo | None = None
) -> list[str]:
    """The checks this GPU's model does not have the feature for (never also unknown)."""
    return sorted_checks(gpu, health, info)[1]
