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

import functools
import operator
from collections.abc import Callable, Iterable, Mapping

from gputui.common.i18n import N_
from gputui.config.models import HealthThresholds
from gputui.health import words as w
from gputui.health.applicable import verdict
from gputui.health.checks import links, memory, nvlinks_down, thermal
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
                N_("NVML library and kernel driver versions differ"),
                N_("the driver was upgraded but the old kernel module is still loaded"),
                N_("reboot the host (or reload the nvidia kernel modules)"),
                w.DRIVER_NVML.format(driver=hello.driver or "?", nvml=hello.nvml or "?"),
            )
        )
    elif nvml:
        out.append(
            _f(
                "nvml-failed",
                "crit",
                host,
                None,
                w.NVML_FAILED.format(error=nvml),
                N_("the helper cannot read the GPUs (driver not loaded, or no permission)"),
                N_("check the driver on the host (nvidia-smi), then reconnect"),
                nvml,
            )
        )
    seen = len(hello.gpus)
    for what, count in ((N_("configured"), expected_gpus), (N_("seen before"), most_seen or None)):
        if count is not None and seen < count:
            out.append(
                _f(
                    "gpu-missing",
                    "crit",
                    host,
                    None,
                    w.GPUS_MISSING.format(seen=seen, count=count, what=what),
                    N_("a GPU has fallen off the bus or is no longer seen by the driver"),
                    N_("check nvidia-smi and the kernel log; reboot, then inspect the card"),
                    w.GPUS_MISSING_DETAIL.format(seen=seen, count=count, what=what),
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
                N_("GPU lost"),
                N_("NVML answers GpuIsLost: the card has fallen off the bus or hung"),
                N_("reboot the host; if it comes back lost, have the card inspected"),
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
                N_("GPU readings failed"),
                gpu.message or N_("the helper could not read this GPU"),
                N_("look at the helper's message; check the card with nvidia-smi"),
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
                N_("persistence mode is off"),
                N_("the driver unloads between jobs: slow starts, and settings are lost"),
                N_("turn it on: `nvidia-smi -pm 1` (or the nvidia-persistenced service)"),
            )
        )
    if holds_memory_without_process(gpu):
        out.append(orphan_memory(host, gpu))
    return out


def orphan_memory(host: str, gpu: GpuSample) -> Finding:
    """Memory held with no process: its figure is this sample's (``gpu_findings``
    makes it, and a caller that kept a card's other answers makes it again alone)."""
    return _f(
        "orphan-memory",
        "warn",
        host,
        gpu,
        w.ORPHAN_MEMORY.format(mib=gpu.mem_used_mib),
        N_("a stuck or zombie context, or a process in a namespace the helper cannot see"),
        N_("see what holds /dev/nvidia* (fuser -v); force-free or reset the GPU"),
        f"{gpu.mem_used_mib} MiB",
    )


def gpu_findings_key(
    host: str,
    gpu: GpuSample,
    *,
    health: GpuSample | None,
    info: GpuInfo | None,
    thresholds: HealthThresholds,
    slowdown_minutes: int,
    nvlink_grew: tuple[int, ...],
    health_facts: tuple[object, ...] | None = None,
) -> tuple[object, ...]:
    """What ``gpu_findings`` and ``sorted_checks`` read of their arguments: equal keys,
    equal answers. A reading no check looks at (power, clocks, a process's command)
    is not in it, and a figure a check only compares with a limit (utilisation, the
    temperature, memory in use) is in it only as far as it decides a finding: a busy
    GPU's readings move every second, its findings seldom. Of ``health`` only what the
    checks read of it (``health_facts``, which a caller may pass as it kept them: a new
    reading whose utilisation or power moved is the same to them). ``info`` and
    ``thresholds`` are in it whole: the same objects sample after sample, so they
    compare by identity."""
    temp = gpu.temp_c
    slowdown = info.temp_slowdown_c if info is not None else None
    near = (
        slowdown is not None
        and temp is not None
        and temp >= slowdown - thresholds.slowdown_margin_c
    )
    orphan = holds_memory_without_process(gpu)
    return (
        host,
        _read_as_is(gpu),
        temp if near else None,
        (gpu.util_gpu or 0) > thresholds.pcie_load_pct,
        orphan,  # (its figure is not: ``orphan_memory`` is made again each sample)
        health_facts if health_facts is not None or health is None else facts_of(health),
        info,
        thresholds,
        slowdown_minutes,
        nvlink_grew,
    )


_read_as_is: Callable[[GpuSample], tuple[object, ...]] = operator.attrgetter(
    "index",
    "uuid",
    "state",
    "message",
    "ecc_uncorrected",
    "throttle",
    "pcie_gen",
    "pcie_width",
    "health_read",
    "errors",
    *("fabric_state", "remap_pending", "retired_pending"),  # sorted_checks' _CONTEXT
)
"""The readings of a sample that ``gpu_findings_key`` takes whole."""
_health_read_as_is: Callable[[GpuSample], tuple[object, ...]] = operator.attrgetter(
    "remap_failed",
    "remap_pending",
    "remapped_uncorrectable",
    "retired_pending",
    "retired_dbe",
    "persistence",
    "pcie_replays",
    "fabric_state",
    "fabric_status",
    "errors",
)


def facts_of(health: GpuSample) -> tuple[object, ...]:
    """What the checks read of a GPU's latest health reading (``checks.memory``,
    ``checks.links``, ``fabric_trouble``, the persistence check and ``sorted_checks``;
    of its NVLinks, which are down: their counters count through ``nvlink_grew``):
    ``gpu_findings_key`` takes these of it, not the whole reading."""
    return (*_health_read_as_is(health), tuple(nvlinks_down(health)))


# -- what could not be checked ------------------------------------------------------------

_CHECKED: Mapping[str, str] = {
    "ecc_uncorrected": "ECC",
    "remap_pending": N_("row remapping"),
    "retired_pending": N_("retired pages"),
    "throttle": N_("throttling"),
    "persistence": N_("persistence mode"),
    "pcie_replays": N_("PCIe replays"),
    "nvlinks": "NVLink",
    "fabric_state": N_("NVSwitch fabric"),
    "temp_c": N_("temperature"),
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
        if source is None or not source.errors:
            continue
        # The same errors and readings come in most samples: judged once each.
        found = _source_checks(tuple(source.errors.items()), _context_of(source), name)
        for check, kind, reason in found:
            if kind == "unknown":
                if (check, reason) not in unknown:
                    unknown.append((check, reason))
            elif check not in not_applicable:
                not_applicable.append(check)
    return unknown, [c for c in not_applicable if all(c != u for u, _ in unknown)]


@functools.lru_cache(maxsize=4096)
def _source_checks(
    errors: tuple[tuple[str, str], ...], context: tuple[object, ...], name: str | None
) -> tuple[tuple[str, str, str], ...]:
    """(check, verdict, reason) for each checked reading of one sample that failed, in
    ``_CHECKED``'s order: pure (``verdict``), so kept for the errors, context readings
    and card name it was asked for."""
    by_field = dict(errors)
    readings = dict(zip(_CONTEXT, context, strict=True))
    out = []
    for field, check in _CHECKED.items():
        why = by_field.get(field)
        if why is None:
            continue
        kind, reason = verdict(field, why, name, by_field, readings)
        out.append((check, kind, reason))
    return tuple(out)


NO_READING = (N_("health readings"), N_("none taken"))
"""The unknown check of a GPU that has had no health reading (check, why)."""

_CONTEXT = ("fabric_state", "remap_pending", "retired_pending")
"""The readings ``verdict`` weighs besides the failed one."""
_context_of: Callable[[GpuSample], tuple[object, ...]] = operator.attrgetter(*_CONTEXT)


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
