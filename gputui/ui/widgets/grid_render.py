"""How one grid line looks: column planning for a width, and GPU / host lines as strips.

Kept apart from the widget so the look can be read (and tested) without Textual's
machinery. Lines are built as segments with ready-made styles, straight into the
``Strip`` the widget caches (no Rich ``Text`` and no second styling pass: the
visible lines are redrawn every second). Every string from a host goes in as
plain text, never as markup, with control characters removed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

from rich.cells import cell_len, set_cell_size
from rich.control import strip_control_codes
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gputui.common.gpu_label import LABEL_MAX
from gputui.health import Flag, Severity, data_notes, host_message, host_severity
from gputui.telemetry import HostStatus
from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuView
from gputui.ui.head.view import Holder, age_text
from gputui.ui.model import ClusterModel, HostEntry
from gputui.ui.widgets.sort_marker import marked

_EIGHTHS = " ▏▎▍▌▋▊▉"
MARKERS: dict[Severity, str] = {"ok": "", "info": "", "muted": "", "warn": "!", "crit": "!!"}
"""Text markers that keep severity readable without colour (NO_COLOR, monochrome)."""


@dataclass(frozen=True, slots=True)
class Palette:
    """Rich styles resolved from the grid's component classes (so themes apply).

    Every style but ``dim`` is already laid over ``base`` (the widget's own style),
    so a segment takes its style as is; ``dim`` is laid over a finished line.
    """

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

    @classmethod
    def over(cls, base: Style, components: dict[str, Style]) -> Palette:
        """The palette for component styles (by field name) over ``base``."""
        styles = {
            f.name: components[f.name] if f.name == "dim" else base + components[f.name]
            for f in fields(cls)
            if f.name != "base"
        }
        return cls(base=base, **styles)

    def severity(self, severity: Severity) -> Style:
        style: Style = getattr(self, severity)
        return style


class _Line:
    """A line being built: segments and how many cells they take.

    Pieces in the same style (the same ``Style`` object) one after the other are
    joined into one segment: a GPU line is some twenty pieces in a handful of
    styles, and every segment costs again in Textual's compositor each frame.
    """

    __slots__ = ("_style", "_text", "base", "cells", "segments")

    def __init__(self, base: Style) -> None:
        self.base = base
        self.segments: list[Segment] = []
        self.cells = 0
        self._text: list[str] = []
        self._style: Style | None = None

    def add(self, text: str, style: Style) -> None:
        if text:
            if style is not self._style:
                self._flush()
                self._style = style
            self._text.append(text)

    def used(self) -> int:
        """Cells taken so far, pieces not yet joined included."""
        return self.cells + sum(cell_len(text) for text in self._text)

    def _flush(self) -> None:
        if self._text:
            text = strip_control_codes("".join(self._text))
            self._text = []
            if text:
                self.segments.append(Segment(text, self._style))
                self.cells += cell_len(text)

    def strip(
        self, width: int, fill: Style, *, ellipsis: bool = False, over: Style | None = None
    ) -> Strip:
        """Exactly ``width`` cells: cut (with "…" if ``ellipsis``) or padded with ``fill``.

        ``over`` is laid over the text (not the padding), as Rich's ``stylize`` would.
        """
        self._flush()
        segments = self.segments
        if self.cells > width:
            segments = _cut(segments, width, ellipsis=ellipsis)
        if over is not None:
            segments = [Segment(t, over if s is None else s + over) for t, s, _ in segments]
        if self.cells < width:
            segments.append(Segment(" " * (width - self.cells), fill))
        return Strip(segments, width)


def _cut(segments: list[Segment], width: int, *, ellipsis: bool) -> list[Segment]:
    keep = width - 1 if ellipsis else width
    result: list[Segment] = []
    used = 0
    tail = Style()
    for segment in segments:
        text, style, _ = segment
        cells = cell_len(text)
        if used + cells <= keep:
            result.append(segment)
            used += cells
            continue
        if keep > used:
            result.append(Segment(set_cell_size(text, keep - used), style))
        tail = style or tail  # the style of the first cell cut off
        break
    if ellipsis:
        # As Rich's ``Text.truncate``: "…" takes the style of the cell it replaces.
        result.append(Segment("…", tail))
    return result


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


_IDX_W = 2
_PCT_W = 4
_MEM_W = 10
_TEMP_W = 6
_POWER_W = 8
_FAN_W = 4
_CLOCK_W = 7
_PROC_W = 5
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
        cells = lead + _IDX_W + 1 + plan["model"] + 1
        cells += 2 * plan["bar"] + 1 + _PCT_W + 1 + 1 + _MEM_W + 1
        cells += _TEMP_W + 1 + _PROC_W + 1
        cells += (_POWER_W + 1) * plan["power"]
        cells += (_FAN_W + 1) * plan["fan"] + (_CLOCK_W + 1) * plan["clock"]
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
    add("power", _POWER_W + 1)
    grow("bar", 8, 2)
    grow("state", 12)
    grow("model", 14)
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
        held_w=plan["held"],
        power=bool(plan["power"]),
    )


def column_header(cols: Columns, palette: Palette, sort: str | None = None) -> Strip:
    """The column titles; the one ``sort`` (a sort key's name) orders is marked (``UTIL▼``)."""
    parts = ["  " if cols.grouped else marked("HOST", sort, cols.host_w).ljust(cols.host_w) + " "]
    parts.append("#".rjust(_IDX_W) + " " + "MODEL".ljust(cols.model_w) + " ")
    parts.append(marked("UTIL", sort).ljust(cols.bar_w + 1 + _PCT_W) + " ")
    parts.append(marked("MEMORY", sort).ljust(cols.bar_w + 1 + _MEM_W) + " ")
    parts.append(marked("TEMP", sort, _TEMP_W - 1).rjust(_TEMP_W - 1) + "  ")
    if cols.power:
        parts.append(marked("POWER", sort).rjust(_POWER_W) + " ")
    if cols.fan:
        parts.append("FAN".rjust(_FAN_W) + " ")
    if cols.clock:
        parts.append("SM".rjust(_CLOCK_W) + " ")
    parts.append("PROCS".rjust(_PROC_W) + " ")
    if cols.held_w:
        parts.append("HELD".ljust(cols.held_w) + " ")
    if cols.owners_w:
        parts.append("OWNERS".ljust(cols.owners_w) + " ")
    parts.append("STATE")
    line = _Line(palette.base)
    line.add("".join(parts), palette.base)  # the look it has always had (not ``header``)
    return line.strip(cols.width, palette.base)


@lru_cache(maxsize=256)
def _fit_model(name: str, label: str, width: int) -> str:
    """The whole model name where it fits, else its short label (``A100-80G``), in
    ``width`` cells: a cluster has a few models, drawn on every line."""
    return fmt.fit(name if fmt.cells(name) <= width else label, width)


def _right(text: str, width: int) -> str:
    """A number right-aligned in its column; one too wide for it is cut, never spilled."""
    return text.rjust(width) if len(text) <= width else text[: width - 1] + "…"


def bar(line: _Line, fraction: float | None, width: int, fill: Style, empty: Style) -> None:
    """A horizontal gauge in eighth-blocks over a trough; unknown is an empty trough.

    ``fill`` and ``empty`` are palette styles, ``line.base`` the style under both.
    """
    if fraction is None:
        line.add(" " * width, empty)
        return
    cells = max(0.0, min(1.0, fraction)) * width
    full = int(cells)
    part = int((cells - full) * 8)
    line.add("█" * full, fill)
    if full < width:
        if part:
            line.add(_EIGHTHS[part], _edge(line.base, fill, empty))
            full += 1
        line.add(" " * (width - full), empty)


@lru_cache(maxsize=64)
def _edge(base: Style, fill: Style, empty: Style) -> Style:
    """The style of a gauge's last, partly filled cell: the fill's colour on the trough."""
    return base + Style(color=fill.color, bgcolor=empty.bgcolor)


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
) -> Strip:
    """One GPU: index, model, util and memory gauges, temp, power, fan, procs, owners, state."""
    base = palette.base
    line = _Line(palette.base)
    add = line.add
    if cols.grouped:
        add("  ", base)
    else:
        add(fmt.fit(gpu.host, cols.host_w) + " ", palette.host)
    model_name = _fit_model(gpu.model, gpu.label, cols.model_w)
    add(_right(str(gpu.index), _IDX_W) + " " + model_name + " ", base)

    util = gpu.util
    bar(
        line,
        None if util is None else util / 100,
        cols.bar_w,
        _util_style(util or 0, palette),
        palette.gauge_empty,
    )
    add(" " + _right(fmt.percent(util), _PCT_W) + " ", base)

    mem_pct = gpu.mem_pct
    mem_style = palette.gauge_mem
    if mem_pct is not None and mem_pct >= model.health.mem_warn_pct:
        mem_style = palette.gauge_high
    mem_fraction = None if mem_pct is None else mem_pct / 100
    bar(line, mem_fraction, cols.bar_w, mem_style, palette.gauge_empty)
    add(" " + _right(fmt.mem_pair(gpu.mem_used, gpu.mem_total), _MEM_W) + " ", base)

    temp_sev = model.temp_severity(gpu.temp)
    temp = fmt.temperature(gpu.temp) + MARKERS[temp_sev][:1]
    temp_style = palette.severity(temp_sev) if temp_sev != "ok" else base
    add(_right(temp, _TEMP_W - 1).ljust(_TEMP_W), temp_style)
    add(" ", base)
    if cols.power:
        power = gpu.power
        limit = gpu.power_limit
        power_style = base
        if power is not None and limit and 100 * power / limit >= model.health.power_warn_pct:
            power_style = palette.warn
        add(_right(fmt.power_pair(power, limit), _POWER_W), power_style)
        add(" ", base)
    if cols.fan:
        add(_right(fmt.percent(gpu.fan), _FAN_W) + " ", palette.muted if gpu.fan is None else base)
    if cols.clock:
        sm = gpu.sample.clock_sm_mhz if gpu.sample is not None else None
        add(_right("-" if sm is None else f"{sm}MHz", _CLOCK_W) + " ", base)
    procs = len(gpu.processes)
    add(_right(str(procs) if procs else "-", _PROC_W) + " ", base if procs else palette.muted)
    if cols.held_w:
        holder = model.holders.get(gpu.uuid)
        if holder is None:
            add("-".ljust(cols.held_w) + " ", palette.muted)
        else:
            add(fmt.fit(held_text(holder, gpu, now), cols.held_w) + " ", palette.info)
    if cols.owners_w:
        owners = ",".join(gpu.owners) or "-"
        add(
            fmt.fit(owners, cols.owners_w) + " ",
            base if gpu.owners else palette.muted,
        )
    flags = model.flags(gpu, now)
    if not flags:
        if gpu.sample is not None:
            add("ok", palette.ok)
        else:
            add("-", palette.muted)
    else:
        shown = _fitting(flags, cols.width - line.used())
        for i, flag in enumerate(shown):
            if i:
                add(" ", base)
            add(flag.label, palette.severity(flag.severity))
        hidden = flags[len(shown) :]
        if hidden:  # the detail pane has them all; say here that there are more
            add(f" +{len(hidden)}", palette.severity(hidden[0].severity))
    return line.strip(cols.width, base, over=palette.dim if dimmed else None)


def held_text(holder: Holder, gpu: GpuView, now: float, *, long: bool = False) -> str:
    """``j12 alice 3m`` / ``c4 bob 10m idle`` (``long``: ``job 12 alice 3m``).

    A claim is idle while no process of its owner runs on the GPU (what the head's
    idle release counts); the age is to the minute, so the line changes once a minute.
    """
    age = age_text(None if holder.since is None else now - holder.since)
    text = f"{holder.ref if long else holder.short} {holder.user} {age}"
    if holder.kind == "claim" and not any(p.user == holder.user for p in gpu.processes):
        text += " idle"
    return text


def _fitting(flags: list[Flag], room: int) -> list[Flag]:
    """The flags (worst first) that fit in ``room`` cells with a " +N" for the rest;
    the worst one always, cut if it must be."""
    used = -1
    for count, flag in enumerate(flags):
        used += 1 + len(flag.label)
        rest = len(flags) - count - 1
        if used + (len(f" +{rest}") if rest else 0) > room:
            return flags[: max(1, count)]
    return flags


def host_line(
    entry: HostEntry,
    model: ClusterModel,
    cols: Columns,
    palette: Palette,
    now: float,
    *,
    folded: bool,
) -> Strip:
    """A host's group header: fold marker, name, pool, status with data age, totals."""
    snap = entry.snapshot
    severity = host_severity(snap, now, model.health)
    base, muted = palette.base, palette.muted
    line = _Line(palette.base)
    add = line.add
    add("▸ " if folded else "▾ ", palette.host)
    add(snap.name, palette.host)
    add(f" [{snap.pool}]" if snap.pool else "", muted)
    add("  ", base)
    marker = MARKERS[severity]
    status = fmt.host_status_text(snap, now, model.health.stale_after_s)
    add((marker + " " if marker else "") + status, palette.severity(severity))
    message = host_message(snap)
    if message and severity != "ok":
        add(": " + message, palette.severity(severity))
    if snap.status.is_problem:
        age = snap.age(now)
        if age is not None and snap.status is not HostStatus.STALE:
            add(f"  last data {fmt.data_age(age)} ago", muted)
        if snap.next_retry_at is not None:
            add(f"  {fmt.retry_in(snap.next_retry_at, now)}", muted)
    totals = entry.totals
    if totals.gpus:
        add("  ·  ", muted)
        add(f"{totals.gpus} GPU{'s' if totals.gpus != 1 else ''}, {totals.busy} busy", base)
        add("  ·  ", muted)
        add(fmt.mem_pair(totals.mem_used_mib, totals.mem_total_mib), base)
    notes = data_notes(snap)
    if notes:
        add("  ·  ", muted)
        add(f"{MARKERS['warn']} bad data: {notes[0]}", palette.warn)
    hello = entry.hello
    if hello is not None and hello.driver:
        driver = f"  ·  driver {hello.driver}" + (" (simulated)" if hello.simulated else "")
        if line.used() + len(driver) <= cols.width:  # the least of it: left out, not cut
            add(driver, muted)
    return line.strip(cols.width, base, ellipsis=True)
