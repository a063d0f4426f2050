"""The GPU grid's column plan: which columns fit a width, in ``COLUMN_PRIORITY``
order, and how wide each is; ``GRID_LEGEND`` says what each column means (``?``).

Pure arithmetic on widths, apart from drawing: ``grid_render`` lays the header and
the lines out by the ``Columns`` that ``plan_columns`` gives, with the fixed widths
here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.common.gpu_label import LABEL_MAX


@dataclass(frozen=True, slots=True)
class Columns:
    """Which columns fit in ``width`` cells and how wide each is."""

    width: int
    grouped: bool
    host_w: int
    model_w: int
    bar_w: int
    fan: bool
    clock: bool
    owners_w: int
    state_w: int
    held_w: int = 0
    """The HELD column (which job or claim holds the GPU); 0 without a scheduler."""
    power: bool = True


IDX_W = 2
PCT_W = 4
MEM_W = 10
TEMP_W = 6
POWER_W = 8
FAN_W = 4
CLOCK_W = 7
PROC_W = 5
"""``PROCS``: how many processes the GPU runs (not nvidia-smi's performance state)."""
_MODEL_MIN = LABEL_MAX
"""``A100-80G``: the model's short label (the whole name from 14 cells)."""
_HELD_W = 18
"""``c12 bob 3h05m idle`` fits; a longer user name is cut (the detail pane has it whole)."""
_HELD_MIN = 12
"""``j12 alice 3m``: the HELD column of a pane that has no room for the full one."""

COLUMN_PRIORITY = (
    "# MODEL UTIL MEMORY TEMP PROCS STATE",
    "HELD",
    "POWER",
    "wider gauges, STATE, whole model names",
    "OWNERS",
    "FAN",
    "SM clock",
)
"""What the grid shows as it gets narrower, most important first: at 80 columns the
first two (HELD whole: job or claim, user, age) and the model as a short label; POWER
from about 90, then the rest as they fit."""

GRID_LEGEND: tuple[tuple[str, str], ...] = (
    ("MODEL", "Model; a short label (A100-80G, 3090) where the name does not fit"),
    ("UTIL", "GPU utilisation, gauge and percent"),
    ("MEMORY", "Memory used / total"),
    ("PROCS", "How many processes run on the GPU (- for none)"),
    ("HELD", "The job (j12) or claim (c4) holding it, its user and age; idle: no process"),
    ("OWNERS", "Users of the processes on it (wide panes)"),
    ("STATE", "ok, or its problems worst first (+N: more in the detail pane)"),
)
"""The grid's columns, for the help screen (``?``)."""


def plan_columns(
    width: int, grouped: bool = True, host_w: int = 0, *, held: bool = False
) -> Columns:
    """Fit the columns to ``width`` in ``COLUMN_PRIORITY`` order: nothing wraps.

    ``held``: a scheduler is there, so a HELD column (job or claim, owner, age) is
    wanted; whole, it comes before the power, the owners, fan and clocks.
    """
    lead = 2 if grouped else min(max(host_w, 4), 14) + 1
    plan = {
        "model": _MODEL_MIN,
        "bar": 4,
        "owners": 0,
        "state": 8,
        "power": 0,
        "fan": 0,
        "clock": 0,
        "held": 0,
    }

    def room() -> int:
        cells = lead + IDX_W + 1 + plan["model"] + 1
        cells += 2 * plan["bar"] + 1 + PCT_W + 1 + 1 + MEM_W + 1
        cells += TEMP_W + 1 + PROC_W + 1
        cells += (POWER_W + 1) * plan["power"]
        cells += (FAN_W + 1) * plan["fan"] + (CLOCK_W + 1) * plan["clock"]
        cells += (plan["owners"] + 1) if plan["owners"] else 0
        cells += (plan["held"] + 1) if plan["held"] else 0
        return width - cells - plan["state"]

    def grow(key: str, upto: int, step: int = 1) -> None:
        while plan[key] < upto and room() >= step:
            plan[key] += 1

    def add(key: str, cells: int, value: int = 1) -> None:
        if not plan[key] and room() >= cells:
            plan[key] = value

    if held:
        add("held", _HELD_MIN + 1, _HELD_MIN)
        grow("held", _HELD_W)
    add("power", POWER_W + 1)
    grow("bar", 8, 2)
    grow("state", 12)
    grow("model", 14)
    add("owners", 11, 10)
    add("fan", FAN_W + 1)
    grow("bar", 12, 2)
    grow("state", 16)
    if plan["owners"]:
        grow("owners", 16)
    add("clock", CLOCK_W + 1)
    grow("bar", 20, 2)
    if plan["owners"]:
        grow("owners", 24)
    grow("model", 18)
    grow("bar", 24, 2)
    if plan["owners"]:
        grow("owners", 32)
    plan["state"] += max(0, room())
    return Columns(
        width=width,
        grouped=grouped,
        host_w=0 if grouped else lead - 1,
        model_w=plan["model"],
        bar_w=plan["bar"],
        fan=bool(plan["fan"]),
        clock=bool(plan["clock"]),
        owners_w=plan["owners"],
        state_w=plan["state"],
        held_w=plan["held"],
        power=bool(plan["power"]),
    )
