"""NVIDIA's Xid catalogue: what each Xid means and what to do, and how repeats escalate.

After NVIDIA's "Xid Errors" documentation (its cause and resolution per Xid) and the
way leptonai/gpud escalates a repeated Xid: restart the application, then reset the
GPU, then reboot the host, then have the hardware inspected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gputui.common.i18n import N_
from gputui.health import words as w

Kind = Literal["application", "driver", "hardware"]
KINDS = (N_("application"), N_("driver"), N_("hardware"))
"""The kinds as a title names them (``Xid 79 (hardware)``)."""

ACTIONS = (
    N_("restart the application"),
    N_("reset the GPU (nvidia-smi -r) once it is idle"),
    N_("reboot the host"),
    N_("have the hardware inspected (RMA if it keeps happening)"),
)
"""The escalation ladder, mildest first."""

RESTART, RESET, REBOOT, INSPECT = range(4)


@dataclass(frozen=True, slots=True)
class XidInfo:
    code: int
    kind: Kind
    meaning: str
    step: int
    """Where on ``ACTIONS`` the first occurrence starts."""
    severity: Literal["warn", "crit"]
    fence: bool = False
    """The card should take no new work until it is reset or checked."""


def _x(code: int, kind: Kind, meaning: str, step: int, fence: bool = False) -> XidInfo:
    severity: Literal["warn", "crit"] = "warn" if kind == "application" else "crit"
    return XidInfo(code, kind, meaning, step, severity, fence)


CATALOGUE: dict[int, XidInfo] = {
    x.code: x
    for x in (
        _x(8, "driver", N_("GPU stopped processing (driver or application timeout)"), RESTART),
        _x(
            13,
            "application",
            N_("graphics engine exception (an application bug or bad memory access)"),
            RESTART,
        ),
        _x(
            31,
            "application",
            N_("GPU memory page fault (an application's illegal memory access)"),
            RESTART,
        ),
        _x(32, "driver", N_("invalid or corrupted push buffer stream"), RESTART),
        _x(38, "driver", N_("driver firmware error"), RESET),
        _x(
            43,
            "application",
            N_("GPU stopped processing: an application was stopped by the driver"),
            RESTART,
        ),
        _x(
            45,
            "application",
            N_("preemptive cleanup after an earlier error (see the Xid before it)"),
            RESTART,
        ),
        _x(48, "hardware", N_("double-bit ECC error: memory corrupted"), RESET, fence=True),
        _x(61, "driver", N_("internal micro-controller breakpoint or warning"), RESET),
        _x(62, "driver", N_("internal micro-controller halt"), RESET),
        _x(
            63,
            "hardware",
            N_("ECC page retirement or row remap recorded: a reset applies it"),
            RESET,
        ),
        _x(64, "hardware", N_("ECC page retirement or row remap failed"), INSPECT, fence=True),
        _x(
            68,
            "application",
            N_("video processor exception (NVDEC/NVENC), usually the application"),
            RESTART,
        ),
        _x(69, "driver", N_("graphics engine class error"), RESTART),
        _x(74, "hardware", N_("NVLink error"), RESET, fence=True),
        _x(79, "hardware", N_("GPU has fallen off the bus"), REBOOT, fence=True),
        _x(92, "hardware", N_("high single-bit ECC error rate"), INSPECT),
        _x(94, "hardware", N_("contained ECC error: the affected application was stopped"), RESET),
        _x(
            95,
            "hardware",
            N_("uncontained ECC error: every application on the GPU is affected"),
            RESET,
            fence=True,
        ),
        _x(109, "driver", N_("context switch timeout"), RESTART),
        _x(
            119,
            "driver",
            N_("GSP RPC timeout (the GPU's system processor stopped answering)"),
            RESET,
        ),
        _x(120, "driver", N_("GSP error"), RESET),
        _x(121, "hardware", N_("C2C (chip-to-chip) link error"), REBOOT),
        _x(140, "hardware", N_("unrecovered ECC error"), RESET, fence=True),
    )
}

UNKNOWN_MEANING = N_("an Xid not in this catalogue (see NVIDIA's Xid documentation)")


def info(code: int) -> XidInfo:
    """The catalogue's entry, or a driver event to reset for an Xid it lacks."""
    found = CATALOGUE.get(code)
    return found if found is not None else XidInfo(code, "driver", UNKNOWN_MEANING, RESET, "crit")


def step_for(code: int, repeats: int, escalate_after: int) -> int:
    """The step on ``ACTIONS`` for an Xid seen ``repeats`` times lately: one step up
    each time the count reaches another multiple of ``escalate_after``."""
    base = info(code).step
    extra = max(repeats - 1, 0) // max(escalate_after, 1)
    return min(base + extra, INSPECT)


def action(code: int, repeats: int, escalate_after: int) -> str:
    step = step_for(code, repeats, escalate_after)
    text = ACTIONS[step]
    if step > info(code).step:
        text = w.SEEN_TIMES.format(action=text, n=repeats)
    return text


SAME_XID_S = 5.0
"""An Xid from the kernel log and the same Xid of the same GPU from NVML this close
in time are one event seen twice (their clocks and rounding differ by a second or so)."""


class XidDedupe:
    """Which Xid events are new: ``seen(gpu, xid, time, source)`` is True for an event
    that repeats one already taken (the same GPU and Xid from the other source within
    ``SAME_XID_S``, or from the same source in the same second)."""

    def __init__(self) -> None:
        self._taken: dict[tuple[int | str | None, int], list[tuple[float, str]]] = {}

    def seen(self, gpu: int | str | None, xid: int, time: float, source: str) -> bool:
        taken = self._taken.setdefault((gpu, xid), [])
        for when, where in taken:
            if where != source and abs(when - time) <= SAME_XID_S:
                return True
            if where == source and round(when) == round(time):
                return True
        taken.append((time, source))
        return False
