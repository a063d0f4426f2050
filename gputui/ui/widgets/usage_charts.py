"""The usage screen's two charts, drawn with block characters in the theme's colours.

Why not textual-plotext: a plotext canvas at 80x24 has room for a few bars with
axis ticks that collide, draws with braille dots that many fonts render unevenly,
and would be a new dependency whose output shifts between its releases (unstable
snapshots). These are a few dozen lines of pure functions instead: horizontal bars
in eighths of a cell (``▏▎▍▌▋▊▉█``) and columns in eighths (``▁▂▃▄▅▆▇█``), so a bar
20 cells long still has 160 steps, every line exactly the widget's width, and tests
read them as plain text or as styled segments.

- ``UsageBars``: allocated GPU-hours per key (user, group), longest first; the
  busy part in the busy colour, the allocated-but-idle rest in the idle colour
  (the point: who holds cards and does not use them), each with its GPU-hours and
  busy %. What does not fit is folded into one "others" line.
- ``HourlyChart``: per hour (or per 2, 3 ... 24 hours, whatever fits the width),
  busy and allocated GPU-hours as a share of the GPU-hours present, so idle nights
  show as valleys; the x axis is labelled by day (by hour for a single day).

A cell where the busy part ends mid-cell draws the busy eighths in the busy colour
on an idle-coloured background when the idle part continues past it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from gputui.common.i18n import N_, _
from gputui.common.text import cells, fit
from gputui.ui.head.usage_view import UsageHour, UsageTotal, hours_text, share_text, total_of

LEFT_EIGHTHS = " ▏▎▍▌▋▊▉█"
LOWER_EIGHTHS = " ▁▂▃▄▅▆▇█"
NAME_CELLS = 14
LABEL_CELLS = 13
"""``" 1234.5h 100%"`` after each bar."""
Y_AXIS_CELLS = 5
HOURS_PER_COLUMN = (1, 2, 3, 4, 6, 8, 12, 24)
"""Column sizes that divide a day, so that each day starts a column."""
MAX_COLUMN_CELLS = 8
MAX_LINES = 500
"""Bars asked for at most (the screen's height cuts them sooner)."""
_DAYS = (
    N_("Mon {day}"),
    N_("Tue {day}"),
    N_("Wed {day}"),
    N_("Thu {day}"),
    N_("Fri {day}"),
    N_("Sat {day}"),
    N_("Sun {day}"),
)
"""The x axis's label of a day (``Tue 14``), by ``tm_wday``."""


@dataclass(frozen=True, slots=True)
class ChartStyles:
    """The colours a chart draws with (from the theme, through component classes)."""

    busy: Style
    idle: Style
    muted: Style
    title: Style

    @classmethod
    def plain(cls) -> ChartStyles:
        return cls(Style(), Style(), Style(), Style())

    def busy_on_idle(self) -> Style:
        return Style(color=self.busy.color, bgcolor=self.idle.color)


def eighths(value: float, scale: float, cells_: int) -> int:
    """``value`` of ``scale`` in eighths of ``cells_`` cells; anything above 0 shows."""
    if scale <= 0 or value <= 0 or cells_ <= 0:
        return 0
    full = cells_ * 8
    return max(1, min(full, round(value / scale * full)))


def bar_text(alloc8: int, busy8: int, width: int, styles: ChartStyles, blocks: str) -> Text:
    """A bar of ``alloc8`` eighths, the first ``busy8`` of them busy, in ``width`` cells.

    ``blocks`` is ``LEFT_EIGHTHS`` (a bar growing right) or ``LOWER_EIGHTHS`` (one
    cell of a column, growing up; then ``width`` is 1 and the eighths are this cell's)."""
    text = Text()
    busy8 = min(busy8, alloc8)
    for i in range(width):
        busy = min(8, max(0, busy8 - 8 * i))
        alloc = min(8, max(0, alloc8 - 8 * i))
        if alloc == 0:
            text.append(" ")
        elif busy == 8:
            text.append(blocks[8], styles.busy)
        elif busy:
            text.append(blocks[busy], styles.busy_on_idle() if alloc == 8 else styles.busy)
        else:
            text.append(blocks[alloc], styles.idle)
    return text


def folded(totals: Sequence[UsageTotal], rows: int) -> list[UsageTotal]:
    """The top ``rows`` keys, or the top ``rows - 1`` and one line for the rest."""
    if rows <= 0:
        return []
    if len(totals) <= rows:
        return list(totals)
    rest = totals[rows - 1 :]
    others = _("{n} others").format(n=len(rest))  # two or more
    return [*totals[: rows - 1], total_of(others, rest)]


def bar_lines(
    totals: Sequence[UsageTotal], width: int, rows: int, styles: ChartStyles
) -> list[Text]:
    """One line per key (``rows`` at most), each exactly ``width`` cells.

    Bars are to the scale of the longest key's; the "others" line, longer than that
    when it folds many, runs to the edge (busy in proportion) and ends in ``»``."""
    shown = folded(totals, rows)
    if not shown or width <= 0:
        return []
    others = len(totals) > rows
    names = min(NAME_CELLS, max(4, width // 4), max(cells(t.key) for t in shown))
    label = LABEL_CELLS if width >= names + LABEL_CELLS + 4 else 0
    bar = max(0, width - names - 1 - label)
    keys = shown[:-1] if others else shown
    scale = max((t.alloc_gpu_h for t in keys), default=0.0) or shown[-1].alloc_gpu_h
    lines = []
    for i, total in enumerate(shown):
        rest = others and i == len(shown) - 1
        line = Text(no_wrap=True, overflow="crop", end="")
        line.append(fit(total.key, names), styles.muted if rest else "")
        line.append(" ")
        if total.alloc_gpu_h > scale and bar > 1:
            room = bar - 1
            busy8 = round(room * 8 * (total.busy_share or 0.0))
            line.append_text(bar_text(room * 8, busy8, room, styles, LEFT_EIGHTHS))
            line.append("»", styles.muted)
        else:
            alloc8 = eighths(total.alloc_gpu_h, scale, bar)
            busy8 = min(alloc8, eighths(total.busy_gpu_h, scale, bar))
            line.append_text(bar_text(alloc8, busy8, bar, styles, LEFT_EIGHTHS))
        if label:
            numbers = f"{hours_text(total.alloc_gpu_h):>6}h {share_text(total.busy_share):>4}"
            line.append(f" {numbers}"[:label].rjust(label))
        line.truncate(width, overflow="crop", pad=True)
        lines.append(line)
    return lines


@dataclass(slots=True)
class HourColumn:
    """Some hours of the cluster, summed: one column of the hourly chart."""

    start: float
    present: float = 0.0
    alloc: float = 0.0
    busy: float = 0.0
    label: str = ""
    """The x-axis label that starts at this column ("Tue 14", "06:00"), or ""."""

    @property
    def busy_share(self) -> float | None:
        return min(1.0, self.busy / self.present) if self.present > 0 else None

    @property
    def alloc_share(self) -> float | None:
        return min(1.0, self.alloc / self.present) if self.present > 0 else None


def _bucket(epoch: float, per: int) -> tuple[int, int, int]:
    local = time.localtime(epoch)
    return local.tm_year, local.tm_yday, local.tm_hour // per


def hour_columns(
    hours: Sequence[UsageHour], since: float, until: float, width: int
) -> tuple[list[HourColumn], int]:
    """The range ``since``..``until`` in at most ``width`` columns of whole local hours
    (1, 2, 3 ... 24 per column, the fewest that fit), with the data summed into them.

    Returns the columns, oldest first, and the hours per column."""
    first = math.floor(since / 3600) * 3600
    span = max(1, math.ceil((until - first) / 3600))
    width = max(1, width)
    per = next((p for p in HOURS_PER_COLUMN if math.ceil(span / p) + 1 <= width), 24)
    columns: dict[tuple[int, int, int], HourColumn] = {}
    short = span <= 48
    for step in range(span):
        start = first + step * 3600
        key = _bucket(start, per)
        if key in columns:
            continue
        local = time.localtime(start)
        label = ""
        if local.tm_hour == 0:
            label = _(_DAYS[local.tm_wday]).format(day=f"{local.tm_mday:02d}")
        elif short and local.tm_hour % 6 == 0 and key[2] * per == local.tm_hour:
            label = time.strftime("%H:00", local)
        columns[key] = HourColumn(start, label=label)
    for hour in hours:
        if first <= hour.hour < until:
            column = columns.get(_bucket(hour.hour, per))
            if column is not None:
                column.present += hour.gpu_h
                column.alloc += hour.alloc_gpu_h
                column.busy += hour.busy_gpu_h
    ordered = list(columns.values())[-width:]
    return ordered, per


def hourly_lines(
    columns: Sequence[HourColumn], width: int, height: int, styles: ChartStyles
) -> list[Text]:
    """``height`` lines of exactly ``width`` cells: the chart rows, then the x axis."""
    if height <= 0 or width <= 0:
        return []
    rows = height - 1
    room = max(0, width - Y_AXIS_CELLS)
    per_column = max(1, min(MAX_COLUMN_CELLS, room // max(1, len(columns))))
    shown = list(columns)[-(room // per_column) :] if room >= per_column else []
    lines: list[Text] = []
    ticks = {rows - 1: "100%", rows // 2: " 50%", 0: "  0%"} if rows >= 3 else {0: "  0%"}
    for level_row in range(rows - 1, -1, -1):
        line = Text(no_wrap=True, overflow="crop", end="")
        line.append(fit(ticks.get(level_row, ""), Y_AXIS_CELLS - 1) + " ", styles.muted)
        for column in shown:
            busy, alloc = column.busy_share, column.alloc_share
            if busy is None or alloc is None:
                cell = Text("·" if level_row == 0 else " ", styles.muted)
            else:
                top = max(busy, alloc)
                busy8 = eighths(busy, 1.0, rows) - 8 * level_row
                all8 = eighths(top, 1.0, rows) - 8 * level_row
                cell = bar_text(max(0, all8), max(0, busy8), 1, styles, LOWER_EIGHTHS)
            for _column in range(per_column):
                line.append_text(cell)
        line.truncate(width, overflow="crop", pad=True)
        lines.append(line)
    axis = [" "] * width  # one entry a cell: a wide character's second cell is ""
    end = -1
    for i, column in enumerate(shown):
        at = Y_AXIS_CELLS + i * per_column
        label = column.label
        if not label or at <= end or at + cells(label) > width:
            continue
        for char in label:
            axis[at] = char
            if cells(char) == 2:
                axis[at + 1] = ""
            at += cells(char)
        end = at
    lines.append(Text("".join(axis), styles.muted, no_wrap=True, end=""))
    return lines


class _Chart(Widget):
    """A chart that draws itself from what it was last shown, at its current size."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "usage-chart--busy",
        "usage-chart--idle",
        "usage-chart--muted",
        "usage-chart--title",
    }

    def styles_now(self) -> ChartStyles:
        style = self.get_component_rich_style
        return ChartStyles(
            busy=style("usage-chart--busy", partial=True),
            idle=style("usage-chart--idle", partial=True),
            muted=style("usage-chart--muted", partial=True),
            title=style("usage-chart--title", partial=True),
        )

    def title_line(self, title: str, styles: ChartStyles, legend: bool) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        line.append(f" {title} ", styles.title)
        if legend:
            line.append("  ")
            line.append("█", styles.busy)
            line.append(" " + _("busy") + "  ")
            line.append("█", styles.idle)
            line.append(" " + _("allocated, idle"))
        line.truncate(self.size.width, overflow="ellipsis")
        return line

    @staticmethod
    def joined(lines: Sequence[Text]) -> Text:
        return Text("\n", no_wrap=True, end="").join(lines)


class UsageBars(_Chart):
    """Allocated GPU-hours per key, busy part first; "others" folds what does not fit."""

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.totals: tuple[UsageTotal, ...] = ()
        self.note = _("asking the head…")

    def show(self, totals: tuple[UsageTotal, ...], note: str = "") -> None:
        """Draw ``totals`` (most allocated first); ``note`` stands in when there are none."""
        self.totals, self.note = totals, note
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # A line per key and the title: a few users leave the room to the hourly chart.
        return 1 + max(1, min(len(self.totals), MAX_LINES))

    def render(self) -> Text:
        styles = self.styles_now()
        width, height = self.size.width, self.size.height
        lines = [self.title_line(self.title, styles, legend=False)]
        body = bar_lines(self.totals, width, height - 1, styles)
        if not body:
            body = [Text(self.note or _("nothing allocated in this period"), styles.muted)]
        return self.joined([*lines, *body])


class HourlyChart(_Chart):
    """Busy and allocated shares of the GPUs present, hour by hour."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hours: tuple[UsageHour, ...] = ()
        self.since = self.until = 0.0
        self.note = _("asking the head…")

    def show(
        self, hours: tuple[UsageHour, ...], since: float, until: float, note: str = ""
    ) -> None:
        self.hours, self.since, self.until, self.note = hours, since, until, note
        self.refresh()

    def render(self) -> Text:
        styles = self.styles_now()
        width, height = self.size.width, self.size.height
        present = sum(h.gpu_h for h in self.hours)
        busy = sum(h.busy_gpu_h for h in self.hours)
        title = _("utilisation by hour, of the GPUs present")
        if present > 0:
            title = _("utilisation by hour, of the GPUs present: {share} busy").format(
                share=share_text(busy / present)
            )
        lines = [self.title_line(title, styles, legend=True)]
        if self.until <= self.since or not self.hours:
            lines.append(Text(self.note or _("no hours recorded in this period"), styles.muted))
            return self.joined(lines)
        columns, _per = hour_columns(self.hours, self.since, self.until, width - Y_AXIS_CELLS)
        lines += hourly_lines(columns, width, height - 1, styles)
        return self.joined(lines)
