"""How one grid line looks: the column header, and GPU / host lines as strips.

Kept apart from the widget so the look can be read (and tested) without Textual's
machinery. Lines are built as segments with ready-made styles (``line_builder``),
straight into the ``Strip`` the widget caches (no Rich ``Text`` and no second
styling pass: the visible lines are redrawn every second). Which columns show at a
width, and how wide, is the column plan (``grid_columns``). Every string from a host
goes in as plain text, never as markup, with control characters removed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

from rich.style import Style
from textual.strip import Strip

from gputui.common.i18n import N_, _, ngettext, per_language
from gputui.common.printable import owner_name
from gputui.common.text import cells
from gputui.common.text import fit as fit_cells
from gputui.health import Flag, Severity, data_notes, host_message, host_severity
from gputui.telemetry import HostStatus
from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuView
from gputui.ui.head.view import Holder, age_text, holder_ref
from gputui.ui.model import ClusterModel, HostEntry
from gputui.ui.widgets.grid_columns import (
    CLOCK_W,
    FAN_W,
    IDX_W,
    MEM_W,
    PCT_W,
    POWER_W,
    PROC_W,
    TEMP_W,
    Columns,
)
from gputui.ui.widgets.line_builder import LineBuilder
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


def column_header(cols: Columns, palette: Palette, sort: str | None = None) -> Strip:
    """The column titles, in the chosen language and laid out by display cells (a
    Chinese title is two cells a character); the one ``sort`` (a sort key's name)
    orders is marked (``UTIL▼``)."""
    fit = fit_cells
    parts = ["  " if cols.grouped else fit(marked("HOST", sort, cols.host_w), cols.host_w) + " "]
    parts.append(fit("#", IDX_W, right=True) + " " + fit(_("MODEL"), cols.model_w) + " ")
    parts.append(fit(marked("UTIL", sort), cols.bar_w + 1 + PCT_W) + " ")
    parts.append(fit(marked("MEMORY", sort), cols.bar_w + 1 + MEM_W) + " ")
    parts.append(fit(marked("TEMP", sort, TEMP_W - 1), TEMP_W - 1, right=True) + "  ")
    if cols.power:
        parts.append(fit(marked("POWER", sort), POWER_W, right=True) + " ")
    if cols.fan:
        parts.append(fit(_("FAN"), FAN_W, right=True) + " ")
    if cols.clock:
        parts.append(fit(_("SM"), CLOCK_W, right=True) + " ")
    parts.append(fit(_("PROCS"), PROC_W, right=True) + " ")
    if cols.held_w:
        parts.append(fit(_("HELD"), cols.held_w) + " ")
    if cols.owners_w:
        parts.append(fit(_("OWNERS"), cols.owners_w) + " ")
    parts.append(_("STATE"))
    line = LineBuilder(palette.base)
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


def bar(line: LineBuilder, fraction: float | None, width: int, fill: Style, empty: Style) -> None:
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
    line = LineBuilder(palette.base)
    add = line.add
    if cols.grouped:
        add("  ", base)
    else:
        add(fmt.fit(gpu.host, cols.host_w) + " ", palette.host)
    model_name = _fit_model(gpu.model, gpu.label, cols.model_w)
    add(_right(str(gpu.index), IDX_W) + " " + model_name + " ", base)

    util = gpu.util
    bar(
        line,
        None if util is None else util / 100,
        cols.bar_w,
        _util_style(util or 0, palette),
        palette.gauge_empty,
    )
    add(" " + _right(fmt.percent(util), PCT_W) + " ", base)

    mem_pct = gpu.mem_pct
    mem_style = palette.gauge_mem
    if mem_pct is not None and mem_pct >= model.health.mem_warn_pct:
        mem_style = palette.gauge_high
    mem_fraction = None if mem_pct is None else mem_pct / 100
    bar(line, mem_fraction, cols.bar_w, mem_style, palette.gauge_empty)
    add(" " + _right(fmt.mem_pair(gpu.mem_used, gpu.mem_total), MEM_W) + " ", base)

    temp_sev = model.temp_severity(gpu.temp)
    temp = fmt.temperature(gpu.temp) + MARKERS[temp_sev][:1]
    temp_style = palette.severity(temp_sev) if temp_sev != "ok" else base
    add(_right(temp, TEMP_W - 1).ljust(TEMP_W), temp_style)
    add(" ", base)
    if cols.power:
        power = gpu.power
        limit = gpu.power_limit
        power_style = base
        if power is not None and limit and 100 * power / limit >= model.health.power_warn_pct:
            power_style = palette.warn
        add(_right(fmt.power_pair(power, limit), POWER_W), power_style)
        add(" ", base)
    if cols.fan:
        add(_right(fmt.percent(gpu.fan), FAN_W) + " ", palette.muted if gpu.fan is None else base)
    if cols.clock:
        sm = gpu.sample.clock_sm_mhz if gpu.sample is not None else None
        add(_right("-" if sm is None else f"{sm}MHz", CLOCK_W) + " ", base)
    procs = len(gpu.processes)
    add(_right(str(procs) if procs else "-", PROC_W) + " ", base if procs else palette.muted)
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
            add(_line_words().ok, palette.ok)
        else:
            add("-", palette.muted)
    else:
        shown = _fitting(flags, cols.width - line.used())
        for i, flag in enumerate(shown):
            if i:
                add(" ", base)
            add(flag_text(flag.label), palette.severity(flag.severity))
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
    ref = holder_ref(holder) if long else holder.short
    text = _("{holder} {user} {age}").format(holder=ref, user=holder.user, age=age)
    if holder.kind == "claim" and not any(p.user == holder.user for p in gpu.processes):
        text = _("{held} idle").format(held=text)
    return text


FLAG_WORDS = {
    "LOST": N_("LOST"),
    "ERROR": N_("ERROR"),
    "THRTL": N_("THRTL"),
    "NOPROC": N_("NOPROC"),
    "FENCE": N_("FENCE"),
    "DRAIN": N_("DRAIN"),
    "ROGUE": N_("ROGUE"),
    "STRAY": N_("STRAY"),
    "CLK-LOW": N_("CLK-LOW"),
}
"""The grid's STATE markers as a person reads them (``ECC 3`` and ``Xid 79`` stay)."""


@dataclass(frozen=True, slots=True)
class _LineWords:
    """The words a GPU line shows, in one language."""

    flags: dict[str, str]
    """``FLAG_WORDS``' labels, translated."""
    ok: str
    """A fine GPU's STATE."""


@per_language
def _line_words() -> _LineWords:
    """The words of a GPU line in the chosen language: the lines drawn every second
    look them up here, not in the catalogue each."""
    return _LineWords({label: _(word) for label, word in FLAG_WORDS.items()}, _("ok"))


def flag_text(label: str) -> str:
    """A STATE marker in the reader's language; one with a number (``ECC 3``) as it is."""
    return _line_words().flags.get(label, label)


def _fitting(flags: list[Flag], room: int) -> list[Flag]:
    """The flags (worst first) that fit in ``room`` cells with a " +N" for the rest;
    the worst one always, cut if it must be."""
    used = -1
    for count, flag in enumerate(flags):
        used += 1 + cells(flag_text(flag.label))
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
    line = LineBuilder(palette.base)
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
            add("  " + _("last data {age} ago").format(age=fmt.data_age(age)), muted)
        if snap.next_retry_at is not None:
            add("  " + fmt.retry_in(snap.next_retry_at, now), muted)
    totals = entry.totals
    if totals.gpus:
        add("  ·  ", muted)
        counts = ngettext("{gpus} GPU, {busy} busy", "{gpus} GPUs, {busy} busy", totals.gpus)
        add(counts.format(gpus=totals.gpus, busy=totals.busy), base)
        add("  ·  ", muted)
        add(fmt.mem_pair(totals.mem_used_mib, totals.mem_total_mib), base)
    notes = data_notes(snap)
    if notes:
        add("  ·  ", muted)
        add(MARKERS["warn"] + " " + _("bad data: {note}").format(note=notes[0]), palette.warn)
    hello = entry.hello
    if hello is not None and hello.driver:
        said = _("driver {version} (simulated)") if hello.simulated else _("driver {version}")
        driver = "  ·  " + said.format(version=hello.driver)
        if line.used() + cells(driver) <= cols.width:  # the least of it: left out, not cut
            add(driver, muted)
    return line.strip(cols.width, base, ellipsis=True)


NOT_AVAILABLE = N_("n/a")
"""What a reading NVML does not give shows as (a MIG slice's utilisation)."""


def slice_line(
    gpu: GpuView,
    model: ClusterModel,
    cols: Columns,
    palette: Palette,
    now: float,
    *,
    slot: int,
    dimmed: bool = False,
) -> Strip:
    """One MIG slice, indented under its GPU: its profile, its utilisation where NVML
    gives it (else ``n/a``), its memory, its processes, who holds it."""
    base, muted = palette.base, palette.muted
    line = LineBuilder(base)
    add = line.add
    info = next((s for s in gpu.slices if s.index == slot), None)
    reading = gpu.slice_sample(slot)
    add("  " if cols.grouped else " " * (cols.host_w + 1), base)
    profile = (info.profile if info is not None else None) or "?"
    add(" " * IDX_W + " " + fmt.fit(f"└{profile}", cols.model_w) + " ", muted)
    util = reading.util_gpu if reading is not None else None
    fill = _util_style(util or 0, palette)
    bar(line, None if util is None else util / 100, cols.bar_w, fill, palette.gauge_empty)
    missing = reading is not None and util is None and "util_gpu" in reading.errors
    util_text = _(NOT_AVAILABLE) if missing else fmt.percent(util)
    add(" " + _right(util_text, PCT_W) + " ", muted if util is None else base)
    used = reading.mem_used_mib if reading is not None else None
    total = reading.mem_total_mib if reading is not None else None
    if total is None and info is not None:
        total = info.memory_total_mib
    fraction = None if used is None or not total else used / total
    bar(line, fraction, cols.bar_w, palette.gauge_mem, palette.gauge_empty)
    add(" " + _right(fmt.mem_pair(used, total), MEM_W) + " ", base)
    add(" " * (TEMP_W + 1), base)  # temperature, power, fan, clock: the card's
    if cols.power:
        add(" " * (POWER_W + 1), base)
    if cols.fan:
        add(" " * (FAN_W + 1), base)
    if cols.clock:
        add(" " * (CLOCK_W + 1), base)
    pids = set(reading.pids) if reading is not None else set()
    add(_right(str(len(pids)) if pids else "-", PROC_W) + " ", base if pids else muted)
    if cols.held_w:
        holder = model.holders.get(info.uuid) if info is not None else None
        if holder is None:
            add("-".ljust(cols.held_w) + " ", muted)
        else:
            add(fmt.fit(held_text(holder, gpu, now), cols.held_w) + " ", palette.info)
    if cols.owners_w:
        users = sorted({owner_name(p.user, p.uid) for p in gpu.processes if p.pid in pids})
        add(fmt.fit(",".join(users) or "-", cols.owners_w) + " ", base if users else muted)
    add("MIG" if reading is not None else "-", muted)
    return line.strip(cols.width, base, over=palette.dim if dimmed else None)
