"""How worried to be: severity of hosts and GPUs, and the short flags that name why.

Pure functions over snapshots, samples and the configured thresholds, shared by the
console (cluster totals, grid lines, detail pane) and the head, so they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gputui.config.models import HealthThresholds
from gputui.health.staleness import snapshot_is_stale
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Event, GpuSample

Severity = Literal["ok", "info", "warn", "crit", "muted"]

RECENT_EVENT_S = 600.0
"""An Xid stays flagged on its GPU this long after it happened."""
# Xids that mean the card (or its memory) is in real trouble, not an application bug.
_SEVERE_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
_HW_THROTTLE = ("hw_slowdown", "hw_thermal", "hw_power_brake")
_SW_THROTTLE = ("sw_thermal",)
_FLAGGED_THROTTLE = frozenset(_HW_THROTTLE + _SW_THROTTLE)
"""The throttle reasons ``gpu_flags`` flags (the power cap is normal under load)."""


@dataclass(frozen=True, slots=True)
class Flag:
    """A short state marker for a GPU, e.g. ``LOST`` or ``Xid 79``, with how bad it is."""

    label: str
    severity: Severity


ORPHAN_MEMORY_MIB = 1024
"""GPU memory in use with no process above which a card is flagged (idle cards use
well under this once the driver's reserved memory is left out, as NVML's v2 does)."""


def gpu_flags(
    sample: GpuSample | None, events: Sequence[Event], now: float, health: HealthThresholds
) -> list[Flag]:
    """What is wrong with a GPU, worst first; empty means it is fine."""
    flags: list[Flag] = []
    if sample is not None:
        if sample.state == "lost":
            flags.append(Flag("LOST", "crit"))
        elif sample.state == "error":
            flags.append(Flag("ERROR", "crit"))
        ecc = sample.ecc_uncorrected
        if ecc is not None and ecc > health.ecc_uncorrected_max:
            flags.append(Flag(f"ECC {ecc}", "crit"))
        throttle = sample.throttle or ()
        if any(reason in _HW_THROTTLE for reason in throttle):
            flags.append(Flag("THRTL", "crit"))
        elif any(reason in _SW_THROTTLE for reason in throttle):
            flags.append(Flag("THRTL", "warn"))
        if holds_memory_without_process(sample):
            flags.append(Flag("NOPROC", "warn"))
    for event in reversed(events):
        if event.xid is not None and event.time is not None and now - event.time <= RECENT_EVENT_S:
            severity: Severity = "crit" if event.xid in _SEVERE_XIDS else "warn"
            flags.append(Flag(f"Xid {event.xid}", severity))
            break
    return flags


def has_standing_problem(sample: GpuSample, health: HealthThresholds) -> bool:
    """A problem that does not fade with time: hot, lost, ECC errors, throttled.

    The same conditions ``gpu_flags`` (and the temperature colour) report, less
    recent Xids, which the caller checks against the clock.
    """
    # Asked for a suspect GPU every second (4,096 of them under a busy console): the
    # same tests as ``gpu_flags`` makes, without making the flags (a test holds the
    # two equal).
    temp = sample.temp_c
    if temp is not None and temp >= health.temp_warn_c:
        return True
    if sample.state in {"lost", "error"}:
        return True
    ecc = sample.ecc_uncorrected
    if ecc is not None and ecc > health.ecc_uncorrected_max:
        return True
    if sample.throttle and any(r in _FLAGGED_THROTTLE for r in sample.throttle):
        return True
    return holds_memory_without_process(sample)


def holds_memory_without_process(sample: GpuSample) -> bool:
    """Memory in use with no process to show for it: a stuck or zombie context, or a
    process the helper cannot see (another PID namespace). Worth a look either way."""
    used = sample.mem_used_mib
    return (
        sample.state == "ok"
        and not sample.processes
        and used is not None
        and used >= ORPHAN_MEMORY_MIB
    )


def last_xid_time(events: Sequence[Event]) -> float | None:
    """When the newest Xid among ``events`` happened (None: no Xid at all)."""
    times = [event.time for event in events if event.xid is not None and event.time is not None]
    return max(times) if times else None


def temp_severity(temp: int | None, health: HealthThresholds) -> Severity:
    if temp is None:
        return "muted"
    if temp >= health.temp_crit_c:
        return "crit"
    if temp >= health.temp_warn_c:
        return "warn"
    return "ok"


def host_severity(snapshot: HostSnapshot, now: float, health: HealthThresholds) -> Severity:
    """How worried a person should be about a host, from its status and data age.

    ``health.stale_after_s`` is the stale limit for a snapshot that carries none.
    """
    status = snapshot.status
    if status is HostStatus.LIVE or status is HostStatus.STALE:
        return "warn" if snapshot_is_stale(snapshot, now, health.stale_after_s) else "ok"
    if status is HostStatus.CONNECTING:
        return "info"
    if status is HostStatus.STOPPED:
        return "muted"
    return "crit"


def data_notes(snapshot: HostSnapshot) -> tuple[str, ...]:
    """What the decoder had to mend in the host's latest hello and sample (bad values
    dropped, lists cut), then what the link noted about the session (message types
    this client does not know, job entries dropped): a helper sending nonsense, or a
    newer one, is worth seeing."""
    hello, sample = snapshot.hello, snapshot.sample
    return (hello.notes if hello else ()) + (sample.notes if sample else ()) + snapshot.notes


def host_message(snapshot: HostSnapshot) -> str:
    """The host's message when it says more than its status word ("" when it does not).

    A connecting host's message is often just "connecting"; repeating it reads as
    "connecting: connecting".
    """
    message = snapshot.message.strip()
    if message.rstrip(".…").strip().lower() in ("", snapshot.status.value):
        return ""
    return message
