"""The main screen: cluster summary, the GPU grid, and the selected GPU's processes and detail.

The app owns the data (``ClusterModel``) and tells this screen what changed; the
screen decides which rows to show (filter, sort, folds) and keeps its widgets in
step. Its keys are ``main_keys``; what the side panes say of the selection is
``main_selection``. Signalling a process is confirmed here and then asked of the app
with a ``SignalConfirmed`` message: the screen itself never talks to a host. The
scheduler's keys (claim, release, queue, submit) are passed up the same way, as a
``SchedulerKey`` message with the selected row; the app talks to the head.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Container, Vertical
from textual.events import Resize
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Input

from gputui.common.i18n import _
from gputui.telemetry import HostStatus
from gputui.ui.gpu_view import GpuRow, HostRow, Row
from gputui.ui.head.view import age_text
from gputui.ui.model import FREE_WORD, SORT_KEYS, ClusterModel, HostChange
from gputui.ui.screens import main_keys
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.main_selection import show_selection
from gputui.ui.widgets.detail import DetailPane
from gputui.ui.widgets.footer import TranslatedFooter
from gputui.ui.widgets.gpu_grid import GpuGrid
from gputui.ui.widgets.process_table import ProcessTable
from gputui.ui.widgets.summary import SummaryBar
from gputui.wire.messages import ProcessSample, Signal

WIDE = 160
"""From this many columns the processes and detail sit beside the grid, not below."""
REBUILD_EVERY_S = 0.5
"""Least time between re-sorts/re-filters caused by new data (not by the user)."""


class MainScreen(Screen[None]):
    """Summary line, GPU grid, processes and detail of the selection, filter input."""

    BINDINGS: ClassVar[list[BindingType]] = main_keys.BINDINGS
    SCHEDULER_BINDINGS: ClassVar[list[BindingType]] = main_keys.SCHEDULER_BINDINGS
    """Offered when hosts.yaml has a head: section (``check_action``)."""
    SCHEDULER_ACTIONS = main_keys.SCHEDULER_ACTIONS

    @dataclass
    class SignalConfirmed(Message):
        """The user confirmed sending ``signal`` to ``process`` on ``host``'s GPU."""

        host: str
        gpu_uuid: str
        gpu_index: int
        process: ProcessSample
        signal: Signal

    @dataclass
    class RetryRequested(Message):
        """The user asked to reconnect ``host`` now (``None``: every host that is waiting)."""

        host: str | None

    @dataclass
    class ViewChanged(Message):
        """What the screen shows changed: ``hosts`` on screen (in order, the selected
        row's host among them) and the selected GPU (host, index), if one is."""

        hosts: tuple[str, ...]
        gpu: tuple[str, int] | None

    @dataclass
    class SchedulerKey(Message):
        """A scheduler key was pressed (``claim``, ``release``, ...) with ``row`` selected."""

        action: str
        row: Row | None

    def __init__(self, model: ClusterModel, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.model = model
        self.clock = clock
        self.query_text = ""
        self.sort_index = 0
        self.grouped = True
        self.folded: set[str] = set()
        self._rebuild_timer: Timer | None = None
        self._rebuild_pending = False
        self._last_rebuild = 0.0
        self._grid: GpuGrid | None = None
        self._summary: SummaryBar | None = None
        self._side: tuple[ProcessTable, DetailPane, Widget] | None = None
        """The process table, the detail pane and their container, looked up at mount."""
        self._ready = False
        self.scheduler = False
        """A head is configured: the scheduler keys and the HELD column are on."""
        self.head_line: tuple[str | tuple[str, ...], bool] | None = None
        self.scheduler_name = "head"
        """What the summary bar calls the scheduler (``slurm`` in front of Slurm)."""
        self.board_problems: int | None = None
        """With a head: how many problems its board lists (the header shows that count,
        the one its health view lists); None: the console's own count."""
        """The summary's scheduler part and whether it is a problem; None: no head."""
        self._held_ages: dict[GpuRow, str] = {}
        self._view: tuple[tuple[str, ...], tuple[str, int] | None] | None = None
        """What the last ``ViewChanged`` said."""

    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")
        with Container(id="body"):
            yield GpuGrid(self.model, clock=self.clock, id="grid")
            with Container(id="side"):
                table = ProcessTable(id="processes")
                table.border_title = _("processes")
                yield table
                yield DetailPane(id="detail")
        with Vertical(id="filter-bar"):
            yield Input(
                placeholder=_("filter: host, pool, model, user, or free (Esc clears)"), id="filter"
            )
        yield TranslatedFooter()

    @property
    def grid(self) -> GpuGrid:
        # Looked up once: this is on the per-sample path, and a DOM query is not cheap.
        if self._grid is None:
            self._grid = self.query_one(GpuGrid)
        return self._grid

    @property
    def _live(self) -> bool:
        """Mounted, its widgets still there: the app closing removes them (in no order
        we may count on) while a last batch of samples or a last tick may still come;
        then nothing is drawn."""
        side = self._side
        return (
            self._ready
            and side is not None
            and self.grid.is_attached
            and all(widget.is_attached for widget in side)
        )

    def on_mount(self) -> None:
        self._summary = self.query_one(SummaryBar)
        self._side = (
            self.query_one(ProcessTable),
            self.query_one(DetailPane),
            self.query_one("#side"),
        )
        self.query_one("#filter-bar").display = False
        self.query_one(DetailPane).clear_detail()
        self.grid.show_held(self.scheduler)
        self._ready = True
        self.rebuild()
        self.grid.focus()

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width >= WIDE, "-wide")
        self.call_after_refresh(self._check_view)  # more hosts on screen, or fewer

    # -- data in (called by the app) -----------------------------------------------

    def hosts_changed(self, changes: list[HostChange], *, tick: bool = False) -> None:
        """Hosts' snapshots changed: redraw their rows, re-sort or re-filter if needed.

        ``tick``: also the once-a-second refresh of ages, totals and the clock, so
        that data and ages are one repaint, and the look at what is on screen.
        """
        if not self._live:
            return  # on_mount builds every row from the model; closing, nothing to draw
        grid = self.grid
        selection_changed = grid.invalidate(changes)
        if tick:
            grid.refresh_hosts()
            selection_changed = self._refresh_held_ages() or selection_changed
            selection_changed = selection_changed or isinstance(grid.cursor_row, HostRow)
        if tick or any(change.status for change in changes):
            # Not only once a second: a host that went down between two ticks would
            # be counted as it was at the last tick (often "connecting", no problem).
            self.refresh_summary()
        if selection_changed:
            self._show_selection(grid.cursor_row)
        if tick:  # what is on screen, which a resize or the mouse wheel moves unsaid
            self._check_view()
        if any(change.structure for change in changes):
            self._schedule_rebuild(immediate=True)
            return
        data_decides_rows = SORT_KEYS[self.sort_index].value is not None or self.query_text
        if data_decides_rows and any(change.gpus for change in changes):
            self._schedule_rebuild()

    def tick(self) -> None:
        """Once a second with no data: ages in host headers, the summary, the clock and
        what is on screen (with data flowing, its batches carry the tick: the same)."""
        self.hosts_changed([], tick=True)

    def _check_view(self) -> None:
        """Say what is on screen when it changed (``ViewChanged``)."""
        if not self._live:
            return
        grid = self.grid
        row = grid.cursor_row
        hosts = grid.visible_hosts()
        if row is not None and row.host not in hosts:
            hosts = (*hosts, row.host)
        gpu = (row.host, row.index) if isinstance(row, GpuRow) else None
        if (hosts, gpu) != self._view:
            self._view = (hosts, gpu)
            self.post_message(self.ViewChanged(hosts, gpu))

    def refresh_summary(self) -> None:
        bar = self._summary
        if bar is None or not self._live or not bar.is_attached:
            return  # not mounted yet (on_mount draws it), or closing (see ``_live``)
        head, problem = self.head_line if self.head_line is not None else (None, False)
        summary = self.model.summary(self.clock())
        if self.board_problems is not None:
            summary = replace(summary, problems=self.board_problems)
        bar.show(
            summary,
            now=self.clock(),
            sort=SORT_KEYS[self.sort_index].name,
            query=self.query_text,
            grouped=self.grouped,
            head=head,
            head_problem=problem,
            scheduler=self.scheduler_name,
        )

    # -- the scheduler (set by the app) ----------------------------------------------

    def enable_scheduler(self) -> None:
        """A head is configured: scheduler keys in the footer, a HELD column."""
        self.scheduler = True
        if self._ready:
            self.grid.show_held(True)
        self.refresh_bindings()

    def holders_changed(self, rows: list[GpuRow]) -> None:
        """The model's holders moved for ``rows``: redraw those lines (and the detail)."""
        if not self._ready:
            return
        if self.grid.invalidate_rows(rows):
            self._show_selection(self.grid.cursor_row)
        if SORT_KEYS[self.sort_index].free_first or FREE_WORD in self.query_text.lower().split():
            self._schedule_rebuild()  # a GPU taken or let go is no longer, or now, free

    def _refresh_held_ages(self) -> bool:
        """Once a second: redraw the held lines whose age (to the minute) moved."""
        holders = self.model.holders
        if not holders:
            self._held_ages = {}
            return False
        now = self.clock()
        ages: dict[GpuRow, str] = {}
        for gpu in self.model.iter_gpus():
            holder = holders.get(gpu.uuid)
            if holder is not None:
                since = holder.since
                ages[gpu.row] = age_text(None if since is None else now - since)
        moved = [row for row, age in ages.items() if self._held_ages.get(row) != age]
        self._held_ages = ages
        return bool(moved) and self.grid.invalidate_rows(moved)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # No head in hosts.yaml: the scheduler keys are not offered.
        return self.scheduler or action != "scheduler"

    def action_scheduler(self, action: str) -> None:
        self.post_message(self.SchedulerKey(action, self.grid.cursor_row))

    def rebuild(self) -> None:
        """Recompute which rows show, in which order, now."""
        self._rebuild_pending = False
        self._last_rebuild = time.monotonic()
        rows = self.model.rows(
            self.query_text,
            SORT_KEYS[self.sort_index],
            grouped=self.grouped,
            collapsed=self.folded,
        )
        query = self.query_text
        self.grid.empty_text = (
            _("no GPU matches {query} (Esc clears the filter)").format(query=repr(query))
            if query
            else ""
        )
        self.grid.set_rows(
            rows, folded=self.folded, grouped=self.grouped, sort=SORT_KEYS[self.sort_index].name
        )
        self.refresh_summary()
        self._check_view()

    def _schedule_rebuild(self, *, immediate: bool = False) -> None:
        if self._rebuild_pending:
            return
        self._rebuild_pending = True
        wait = REBUILD_EVERY_S - (time.monotonic() - self._last_rebuild)
        if immediate or wait <= 0:
            self.call_later(self.rebuild)
        else:
            self._rebuild_timer = self.set_timer(wait, self.rebuild)

    # -- selection -----------------------------------------------------------------

    @on(GpuGrid.Highlighted)
    def _on_highlighted(self, event: GpuGrid.Highlighted) -> None:
        self._show_selection(event.row)
        self._check_view()

    def _show_selection(self, row: Row | None) -> None:
        if not self._live or self._side is None:
            return  # not mounted yet, or closing: nothing to show it in
        table, detail, side = self._side
        show_selection(
            self.model,
            row,
            self.clock(),
            table=table,
            detail=detail,
            side=side,
            scheduler=self.scheduler,
        )

    @on(GpuGrid.FoldRequested)
    def _on_fold(self, event: GpuGrid.FoldRequested) -> None:
        fold = event.host not in self.folded if event.fold is None else event.fold
        if fold:
            self.folded.add(event.host)
        else:
            self.folded.discard(event.host)
        self.rebuild()
        if fold:
            self.grid.select(HostRow(event.host))

    # -- filter, sort, grouping ----------------------------------------------------

    def action_filter(self) -> None:
        bar = self.query_one("#filter-bar")
        bar.display = True
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.value = ""
        self.query_one("#filter-bar").display = False
        self._set_query("")
        self.grid.focus()

    @on(Input.Changed, "#filter")
    def _on_filter_changed(self, event: Input.Changed) -> None:
        self._set_query(event.value)

    @on(Input.Submitted, "#filter")
    def _on_filter_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            self.query_one("#filter-bar").display = False
        self.grid.focus()

    def _set_query(self, query: str) -> None:
        query = query.strip()
        if query != self.query_text:
            self.query_text = query
            self.rebuild()

    def action_sort(self) -> None:
        self.sort_by((self.sort_index + 1) % len(SORT_KEYS))

    def sort_by(self, index: int) -> None:
        """Sort by ``SORT_KEYS[index]``: ``s``, the palette's and ``:sort KEY`` all come
        here. The rows, the header's marker (``UTIL▼``) and the summary follow."""
        self.sort_index = index
        self.rebuild()
        said = _("sort: {order}").format(order=_(SORT_KEYS[index].label))
        self.notify(said, timeout=1.5, markup=False)

    def action_tree(self) -> None:
        """``p``: the processes as a tree per GPU (parents, container), or flat again."""
        table = self.query_one(ProcessTable)
        table.set_tree(not table.as_tree)

    def action_group(self) -> None:
        self.grouped = not self.grouped
        self.rebuild()

    # -- retry and signalling -------------------------------------------------------

    def action_retry(self) -> None:
        row = self.grid.cursor_row
        if row is None:
            self.post_message(self.RetryRequested(None))
            return
        entry = self.model.hosts.get(row.host)
        if entry is not None and entry.snapshot.status is HostStatus.LIVE:
            said = _("{host} is live: nothing to retry").format(host=row.host)
            self.notify(said, timeout=3, markup=False)
            return
        self.post_message(self.RetryRequested(row.host))

    def action_signal(self, signal: Signal) -> None:
        table = self.query_one(ProcessTable)
        selected = table.selected
        if selected is None:
            why = (
                _("a parent line holds nothing on the GPU: pick a process under it")
                if table.row_count
                else _("No process selected: pick a GPU with processes first.")
            )
            self.notify(why, severity="warning")
            return
        gpu, process = selected
        fields = {
            "pid": process.pid,
            "user": process.user or "?",
            "command": process.command or "?",
            "host": gpu.host,
            "index": gpu.index,
        }
        asked = _("Send {signal} to pid {pid} ({user}: {command}) on {host} GPU {index}? y/N")
        before, _signal, after = asked.partition("{signal}")
        question = Text(before.format(**fields))
        question.append(f"SIG{signal}", style="bold")
        question.append(after.format(**fields))

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(
                    self.SignalConfirmed(gpu.host, gpu.uuid, gpu.index, process, signal)
                )

        label = _("Send {signal}").format(signal=f"SIG{signal}")
        self.app.push_screen(ConfirmScreen(question, label), answered)
