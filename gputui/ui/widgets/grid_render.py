"""How one grid line looks: column planning for a width, and GPU / host lines as Text.

Kept apart from the widget so the look can be read (and tested) without Textual's
machinery. Every string from a host goes in as plain ``Text``, never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from gputui.telemetry import HostStatus
from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuView
from gputui.ui.health import Severity, host_message, host_severity, host_status_text
from gputui.ui.model import ClusterModel, HostEntry

_EIGHTHS = " ▏▎▍▌▋▊▉"
MARKERS: dict[Severity, str] = {"ok": "", "info": "", "muted": "", "warn": "!", "crit": "!!"}
"""Text markers that keep severity readable without colour (NO_COLOR, monochrome)."""


@dataclass(frozen=True, slots=True)
class Palette:
    """Rich styles resolved from the grid's component classes (so themes apply)."""

    base: Style
    header: Style
    host: Style
    dim: Style
    muted: Style
    ok: Style
    info: Style
    warn: Style
    crit: Style
    gauge_low: Style
    gauge_mid: Style
    gauge_high: Style
    gauge_mem: Style
    gauge_empty: Style

    @classmethod
    def plain(cls) -> Palette:
        """Colourless styles, for rendering outside an app (tests, logs)."""
        return cls(*([Style()] * 14))

    def severity(self, severity: Severity) -> Style:
        return {
            "ok": self.ok,
            "info": self.info,
            "warn": self.warn,
            "crit": self.crit,
            "muted": self.muted,
        }[severity]


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


_IDX_W = 2
_PCT_W = 4
_MEM_W = 10
_TEMP_W = 6
_POWER_W = 8
_FAN_W = 4
_CLOCK_W = 7
_PROC_W = 2


def plan_columns(width: int, grouped: bool = True, host_w: int = 0) -> Columns:
    """Fit the columns to ``width``: drop fan, clocks and owners before anything wraps."""
    lead = 2 if grouped else min(max(host_w, 4), 14) + 1
    plan = {"model": 12, "bar": 4, "owners": 0, "state": 8, "fan": 0, "clock": 0}

    def room() -> int:
        cells = lead + _IDX_W + 1 + plan["model"] + 1
        cells += 2 * plan["bar"] + 1 + _PCT_W + 1 + 1 + _MEM_W + 1
        cells += _TEMP_W + 1 + _POWER_W + 1 + _PROC_W + 1
        cells += (_FAN_W + 1) * plan["fan"] + (_CLOCK_W + 1) * plan["clock"]
        cells += (plan["owners"] + 1) if plan["owners"] else 0
        return width - cells - plan["state"]

    def grow(key: str, upto: int, step: int = 1) -> None:
        while plan[key] < upto and room() >= step:
            plan[key] += 1

    def add(key: str, cells: int, value: int = 1) -> None:
        if not plan[key] and room() >= cells:
            plan[key] = value

    grow("model", 14)
    grow("bar", 8, 2)
    grow("state", 12)
    add("owners", 11, 10)
    add("fan", _FAN_W + 1)
    grow("bar", 12, 2)
    grow("state", 16)
    if plan["owners"]:
        grow("owners", 16)
    add("clock", _CLOCK_W + 1)
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
    )


def column_header(cols: Columns, palette: Palette) -> Text:
    text = Text(style=palette.header, no_wrap=True, end="")
    lead = " " * 2 if cols.grouped else "HOST".ljust(cols.host_w) + " "
    text.append(lead + "#".rjust(_IDX_W) + " " + "MODEL".ljust(cols.model_w) + " ")
    text.append("UTIL".ljust(cols.bar_w + 1 + _PCT_W) + " ")
    text.append("MEMORY".ljust(cols.bar_w + 1 + _MEM_W) + " ")
    text.append("TEMP".rjust(_TEMP_W - 1) + "  " + "POWER".rjust(_POWER_W) + " ")
    if cols.fan:
        text.append("FAN".rjust(_FAN_W) + " ")
    if cols.clock:
        text.append("SM".rjust(_CLOCK_W) + " ")
    text.append("P".rjust(_PROC_W) + " ")
    if cols.owners_w:
        text.append("OWNERS".ljust(cols.owners_w) + " ")
    text.append("STATE")
    return text


def bar(fraction: float | None, width: int, fill: Style, empty: Style) -> Text:
    """A horizontal gauge in eighth-blocks over a trough; unknown is an empty trough."""
    text = Text(no_wrap=True, end="")
    if fraction is None:
        text.append(" " * width, empty)
        return text
    cells = max(0.0, min(1.0, fraction)) * width
    full = int(cells)
    part = int((cells - full) * 8)
    text.append("█" * full, fill)
    if full < width:
        if part:
            text.append(_EIGHTHS[part], Style(color=fill.color, bgcolor=empty.bgcolor))
            full += 1
        text.append(" " * (width - full), empty)
    return text


def _util_style(value: float, palette: Palette) -> Style:
    if value >= 85:
        return palette.gauge_high
    if value >= 50:
        return palette.gauge_mid
    return palette.gauge_low


def gpu_line(
    gpu: GpuView,
    model: ClusterModel,
    cols: Columns,
    palette: Palette,
    now: float,
    *,
    dimmed: bool = False,
) -> Text:
    """One GPU: index, model, util and memory gauges, temp, power, fan, procs, owners, state."""
    text = Text(no_wrap=True, end="", overflow="crop")
    if cols.grouped:
        text.append("  ")
    else:
        text.append(fmt.truncate(gpu.host, cols.host_w).ljust(cols.host_w) + " ", palette.host)
    text.append(str(gpu.index).rjust(_IDX_W) + " ")
    text.append(fmt.truncate(gpu.model, cols.model_w).ljust(cols.model_w) + " ")

    util = gpu.util
    text.append_text(
        bar(
            None if util is None else util / 100,
            cols.bar_w,
            _util_style(util or 0, palette),
            palette.gauge_empty,
        )
    )
    text.append(" " + fmt.percent(util).rjust(_PCT_W) + " ")

    mem_pct = gpu.mem_pct
    mem_style = palette.gauge_mem
    if mem_pct is not None and mem_pct >= model.health.mem_warn_pct:
        mem_style = palette.gauge_high
    text.append_text(
        bar(None if mem_pct is None else mem_pct / 100, cols.bar_w, mem_style, palette.gauge_empty)
    )
    text.append(" " + fmt.mem_pair(gpu.mem_used, gpu.mem_total).rjust(_MEM_W) + " ")

    temp_sev = model.temp_severity(gpu.temp)
    temp = fmt.temperature(gpu.temp) + MARKERS[temp_sev][:1]
    temp_style = palette.severity(temp_sev) if temp_sev != "ok" else palette.base
    text.append(temp.rjust(_TEMP_W - 1).ljust(_TEMP_W), temp_style)
    text.append(" ")
    power = gpu.power
    limit = gpu.power_limit
    power_style = palette.base
    if power is not None and limit and 100 * power / limit >= model.health.power_warn_pct:
        power_style = palette.warn
    text.append(fmt.power_pair(power, limit).rjust(_POWER_W), power_style)
    text.append(" ")
    if cols.fan:
        text.append(
            fmt.percent(gpu.fan).rjust(_FAN_W) + " ",
            palette.muted if gpu.fan is None else palette.base,
        )
    if cols.clock:
        sm = gpu.sample.clock_sm_mhz if gpu.sample is not None else None
        text.append(("-" if sm is None else f"{sm}MHz").rjust(_CLOCK_W) + " ")
    procs = len(gpu.processes)
    text.append(
        (str(procs) if procs else "-").rjust(_PROC_W) + " ",
        palette.base if procs else palette.muted,
    )
    if cols.owners_w:
        owners = ",".join(gpu.owners) or "-"
        text.append(
            fmt.truncate(owners, cols.owners_w).ljust(cols.owners_w) + " ",
            palette.base if gpu.owners else palette.muted,
        )
    flags = model.flags(gpu, now)
    if not flags:
        text.append(
            "ok" if gpu.sample is not None else "-",
            palette.ok if gpu.sample is not None else palette.muted,
        )
    else:
        for i, flag in enumerate(flags):
            if i:
                text.append(" ")
            text.append(flag.label, palette.severity(flag.severity))
    text.truncate(cols.width, overflow="crop")
    if dimmed:
        text.stylize(palette.dim)
    return text


def host_line(
    entry: HostEntry,
    model: ClusterModel,
    cols: Columns,
    palette: Palette,
    now: float,
    *,
    folded: bool,
) -> Text:
    """A host's group header: fold marker, name, pool, status with data age, totals."""
    snap = entry.snapshot
    severity = host_severity(snap, now, model.health)
    text = Text(no_wrap=True, end="", overflow="crop")
    text.append("▸ " if folded else "▾ ", palette.host)
    text.append(snap.name, palette.host)
    text.append(f" [{snap.pool}]" if snap.pool else "", palette.muted)
    text.append("  ")
    marker = MARKERS[severity]
    status = host_status_text(snap, now, model.health)
    text.append((marker + " " if marker else "") + status, palette.severity(severity))
    message = host_message(snap)
    if message and severity != "ok":
        text.append(": " + message, palette.severity(severity))
    if snap.status.is_problem:
        age = snap.age(now)
        if age is not None and snap.status is not HostStatus.STALE:
            text.append(f"  last data {fmt.data_age(age)} ago", palette.muted)
        if snap.next_retry_at is not None:
            text.append(f"  {fmt.retry_in(snap.next_retry_at, now)}", palette.muted)
    totals = entry.totals
    if totals.gpus:
        text.append("  ·  ", palette.muted)
        text.append(f"{totals.gpus} GPU{'s' if totals.gpus != 1 else ''}, {totals.busy} busy")
        text.append("  ·  ", palette.muted)
        text.append(fmt.mem_pair(totals.mem_used_mib, totals.mem_total_mib))
    hello = entry.hello
    if hello is not None and hello.driver:
        text.append("  ·  ", palette.muted)
        text.append(f"driver {hello.driver}", palette.muted)
        if hello.simulated:
            text.append(" (simulated)", palette.muted)
    text.truncate(cols.width, overflow="ellipsis")
    return text
