"""The GPU grid: every GPU of every host, grouped by host, on Textual's Line API.

Only the visible lines are rendered, and each row's ``Strip`` is cached until that
row's data changes (``invalidate``), so a cluster of thousands of GPUs sampled every
second costs little more than the rows on screen. The widget does no I/O: the
screen hands it the model, the rows to show, and what changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputui.ui.gpu_view import GpuRow, HostRow, Row, SliceRow
from gputui.ui.model import ClusterModel, HostChange
from gputui.ui.widgets.grid_columns import Columns, plan_columns
from gputui.ui.widgets.grid_render import Palette, column_header, gpu_line, host_line, slice_line

_PALETTE_CLASSES = {
    "header": "gpu-grid--header",
    "host": "gpu-grid--host",
    "dim": "gpu-grid--dim",
    "muted": "gpu-grid--muted",
    "ok": "gpu-grid--ok",
    "info": "gpu-grid--info",
    "warn": "gpu-grid--warn",
    "crit": "gpu-grid--crit",
    "gauge_low": "gpu-grid--gauge-low",
    "gauge_mid": "gpu-grid--gauge-mid",
    "gauge_high": "gpu-grid--gauge-high",
    "gauge_mem": "gpu-grid--gauge-mem",
    "gauge_empty": "gpu-grid--gauge-empty",
}


class GpuGrid(ScrollView, can_focus=True):
    """Hosts and their GPUs, one line each, with a keyboard and mouse cursor."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {*_PALETTE_CLASSES.values(), "gpu-grid--cursor"}

    DEFAULT_CSS = """
    GpuGrid {
        height: 1fr;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False, tooltip="Previous row"),
        Binding("down,j", "cursor(1)", "Down", show=False, tooltip="Next row"),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First", show=False, tooltip="First row"),
        Binding("end", "edge(1)", "Last", show=False, tooltip="Last row"),
        Binding("enter,space", "fold", "Fold host", show=False, tooltip="Fold or unfold the host"),
        Binding(
            "left",
            "fold(True)",
            "Collapse host",
            show=False,
            tooltip="Collapse host (from a GPU row: its host)",
        ),
        Binding("right", "fold(False)", "Expand host", show=False),
    ]

    @dataclass
    class Highlighted(Message):
        """The cursor moved to another row (a host header or a GPU)."""

        grid: GpuGrid
        row: Row | None

    @dataclass
    class FoldRequested(Message):
        """The user asked to collapse (``fold=True``), expand or toggle a host."""

        grid: GpuGrid
        host: str
        fold: bool | None

    def __init__(
        self,
        model: ClusterModel,
        *,
        clock: Callable[[], float] = time.time,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.model = model
        self.clock = clock
        self.rows: list[Row] = []
        self.folded: frozenset[str] = frozenset()
        self.grouped = True
        self.cursor = 0
        self._index: dict[Row, int] = {}
        self._cache: dict[str, dict[Row, Strip]] = {}
        """Rendered lines by host, then row: only rows that were drawn are here."""
        self._columns: Columns | None = None
        self._palette: Palette | None = None
        self.sort: str | None = None
        """The sort key's name the rows are in: its column's title is marked."""
        self._header: tuple[Columns, Strip] | None = None
        """The column titles and the columns they were drawn for: drawn again only when
        the sort, the columns (width, grouping, HELD) or the style change."""
        self._highlighted: Row | None = None
        self.held = False
        """Show the HELD column (a scheduler is configured); the screen sets it."""
        self.empty_text = ""
        """The line shown when there are no rows (a filter that matches nothing)."""
        self.renders = 0
        """Rows rendered from scratch (cache misses): lets tests check the cache works."""

    # -- data in ---------------------------------------------------------------

    def set_rows(
        self,
        rows: list[Row],
        *,
        folded: Iterable[str] = (),
        grouped: bool = True,
        sort: str | None = None,
    ) -> None:
        """Show ``rows`` (in order); the cursor stays on the same host or GPU if it can.

        ``sort``: the sort key's name they are in, marked in the header (``UTIL▼``)."""
        current = self.cursor_row
        if sort != self.sort:
            self.sort = sort
            self._header = None
        if grouped != self.grouped:
            self._cache.clear()
            self._columns = None
        folded = frozenset(folded)
        if folded != self.folded:
            for host in folded ^ self.folded:
                self._cache.get(host, {}).pop(HostRow(host), None)
        self.folded = folded
        self.grouped = grouped
        self.rows = rows
        self._index = {row: i for i, row in enumerate(rows)}
        if current is not None and current in self._index:
            self.cursor = self._index[current]
        elif (
            current is not None
            and isinstance(current, GpuRow)
            and HostRow(current.host) in self._index
        ):
            self.cursor = self._index[HostRow(current.host)]
        self.cursor = max(0, min(self.cursor, len(rows) - 1))
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self._scroll_cursor_into_view()
        self.refresh()
        self._announce()

    def invalidate(self, changes: Iterable[HostChange]) -> bool:
        """Forget the lines ``changes`` touched and redraw the visible ones.

        This runs for every host on every sample: a host none of whose lines were
        drawn costs one dict lookup. True when the highlighted row's data changed
        (the screen shows its details afresh).
        """
        cache, index_of = self._cache, self._index
        top = int(self.scroll_offset.y)
        bottom = top + self.size.height
        highlighted = self._highlighted
        selection_changed = False
        dirty: list[int] = []
        for change in changes:
            host = change.host
            if (
                highlighted is not None
                and highlighted.host == host
                and (isinstance(highlighted, HostRow) or highlighted.index in change.gpus)
            ):
                selection_changed = True
            lines = cache.get(host)
            if not lines:
                continue
            rows: list[Row] = [HostRow(host)]
            rows.extend(GpuRow(host, index) for index in change.gpus)
            rows.extend(r for r in lines if isinstance(r, SliceRow) and r.index in change.gpus)
            for row in rows:
                if lines.pop(row, None) is None:
                    continue  # not drawn since it last changed: a redraw is due anyway
                index = index_of.get(row)
                if index is not None and top <= index < bottom:
                    dirty.append(index)
        self._refresh_rows(dirty)
        return selection_changed

    def invalidate_rows(self, rows: Iterable[Row]) -> bool:
        """Forget these rows' lines (their holder changed) and redraw the visible ones;
        True when the highlighted row is one of them."""
        top = int(self.scroll_offset.y)
        bottom = top + self.size.height
        dirty: list[int] = []
        hit = False
        for row in rows:
            hit = hit or row == self._highlighted
            lines = self._cache.get(row.host)
            if not lines or lines.pop(row, None) is None:
                continue
            index = self._index.get(row)
            if index is not None and top <= index < bottom:
                dirty.append(index)
        self._refresh_rows(dirty)
        return hit

    def show_held(self, held: bool) -> None:
        """Turn the HELD column on or off (re-plans the columns)."""
        if held != self.held:
            self.held = held
            self._cache.clear()
            self._columns = None
            self.refresh()

    def refresh_hosts(self) -> None:
        """Redraw host header lines only (their data age); GPU lines stay cached."""
        top = int(self.scroll_offset.y)
        dirty: list[int] = []
        for index in range(top, min(len(self.rows), top + self.size.height)):
            row = self.rows[index]
            if isinstance(row, HostRow):
                self._cache.get(row.host, {}).pop(row, None)
                dirty.append(index)
        self._refresh_rows(dirty)

    def _refresh_rows(self, indices: list[int]) -> None:
        """Repaint these rows' lines: one region per run of adjacent rows, not one per row."""
        if not indices:
            return
        indices.sort()
        start = previous = indices[0]
        for index in indices[1:]:
            if index > previous + 1:
                self.refresh_lines(start + 1, previous - start + 1)
                start = index
            previous = index
        self.refresh_lines(start + 1, previous - start + 1)

    def visible_hosts(self) -> tuple[str, ...]:
        """The hosts with a line on screen now, top to bottom."""
        top = int(self.scroll_offset.y)
        shown = self.rows[top : top + max(1, self.size.height - 1)]
        return tuple(dict.fromkeys(row.host for row in shown))

    @property
    def cursor_row(self) -> Row | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def select(self, row: Row) -> bool:
        """Move the cursor to ``row`` if it is shown."""
        index = self._index.get(row)
        if index is None:
            return False
        self._move_to(index)
        return True

    # -- rendering -------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._palette = None
        self._header = None

    def on_resize(self, event: events.Resize) -> None:
        self._cache.clear()
        self._columns = None
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)

    @property
    def palette(self) -> Palette:
        """The line styles, worked out once per theme or style change, not per line."""
        if self._palette is None:
            styles = {
                attr: self.get_component_rich_style(cls, partial=True)
                for attr, cls in _PALETTE_CLASSES.items()
            }
            self._palette = Palette.over(self.rich_style, styles)
        return self._palette

    @property
    def columns(self) -> Columns:
        """The plan for the widget's width now. A layout gives the widget its new size
        before its ``Resize`` is handled, and a line drawn in between must not be cut
        from the old width's plan (flags and owners fell off the end), so a plan made
        for another width is made again, and the lines cached with it go."""
        planned = self._columns
        if planned is None or planned.width != self.size.width:
            if planned is not None:
                self._cache.clear()
            host_w = max((len(name) for name in self.model.hosts), default=4)
            planned = plan_columns(self.size.width, self.grouped, host_w, held=self.held)
            self._columns = planned
        return planned

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        palette = self.palette
        columns = self.columns  # drops lines cached for another width
        if y == 0:
            if self._header is None or self._header[0] is not columns:
                header = column_header(columns, palette, self.sort)
                self._header = (columns, self._fit(header, width, palette.base))
            return self._header[1]
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(self.rows):
            if index == 0 and self.empty_text:
                line = Strip([Segment(f" {self.empty_text}", palette.muted)])
                return self._fit(line, width, palette.base)
            return Strip.blank(width, palette.base)
        row = self.rows[index]
        lines = self._cache.get(row.host)
        if lines is None:
            lines = self._cache[row.host] = {}
        strip = lines.get(row)
        if strip is None:
            strip = lines[row] = self._render_row(row, width, palette.base)
        if index == self.cursor:
            cursor = self.get_component_rich_style("gpu-grid--cursor", partial=True)
            strip = Strip(Segment.apply_style(list(strip), post_style=cursor), width)
        return strip

    def _render_row(self, row: Row, width: int, base: Style) -> Strip:
        self.renders += 1
        now = self.clock()
        if isinstance(row, HostRow):
            entry = self.model.hosts.get(row.host)
            if entry is None:
                return Strip.blank(width, base)
            strip = host_line(
                entry, self.model, self.columns, self.palette, now, folded=row.host in self.folded
            )
        else:
            gpu = self.model.gpu(row)
            host = self.model.hosts.get(row.host)
            if gpu is None or host is None:
                return Strip.blank(width, base)
            dimmed = host.snapshot.status.is_problem
            if isinstance(row, SliceRow):
                strip = slice_line(
                    gpu, self.model, self.columns, self.palette, now, slot=row.slot, dimmed=dimmed
                )
            else:
                strip = gpu_line(gpu, self.model, self.columns, self.palette, now, dimmed=dimmed)
        return self._fit(strip, width, base)

    @staticmethod
    def _fit(strip: Strip, width: int, base: Style) -> Strip:
        # Lines are made for the planned width, which is the widget's: nothing to do.
        return strip if strip.cell_length == width else strip.adjust_cell_length(width, base)

    # -- cursor ----------------------------------------------------------------

    def _move_to(self, index: int) -> None:
        if not self.rows:
            return
        index = max(0, min(index, len(self.rows) - 1))
        if index != self.cursor:
            old = self.cursor
            self.cursor = index
            self.refresh_line(old + 1)
            self.refresh_line(index + 1)
        self._scroll_cursor_into_view()
        self._announce()

    def _scroll_cursor_into_view(self) -> None:
        visible = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False, immediate=True)

    def _announce(self) -> None:
        row = self.cursor_row
        if row != self._highlighted:
            self._highlighted = row
            self.post_message(self.Highlighted(self, row))

    def action_cursor(self, delta: int) -> None:
        self._move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor + direction * max(1, self.size.height - 2))

    def action_edge(self, end: int) -> None:
        self._move_to(len(self.rows) - 1 if end else 0)

    def action_fold(self, fold: bool | None = None) -> None:
        row = self.cursor_row
        if row is None or not self.grouped:
            return
        if isinstance(row, GpuRow):
            if fold is not True:
                return
            self.post_message(self.FoldRequested(self, row.host, True))
            return
        self.post_message(self.FoldRequested(self, row.host, fold))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        index = int(self.scroll_offset.y) + offset.y - 1
        if 0 <= index < len(self.rows):
            self._move_to(index)
            row = self.rows[index]
            if isinstance(row, HostRow) and (offset.x < 2 or event.chain == 2):
                self.post_message(self.FoldRequested(self, row.host, None))
