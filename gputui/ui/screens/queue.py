"""The queue screen: the scheduler's jobs, the selected job's detail and its live output.

The app hands it each new ``HeadView`` (``show_view``), the selected job's full
record (``show_detail``) and its output as it arrives (``append_log``); the screen
keeps its table in step, changing only the cells that moved. Actions on a job are
asked of the app with ``JobAction`` (kill, preempt and cancelling a running job are
confirmed first, they destroy work); the screen itself never talks to the head. An
action the scheduler cannot do (``lacks``) is said in one line before anything is
asked.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Log, Static

from gputui.common.durations import elapsed_text
from gputui.common.text import clean
from gputui.ui.head.flags import idle_for, idle_text
from gputui.ui.head.view import FINAL_STATES, HeadJob, HeadView
from gputui.ui.screens.confirm import ConfirmScreen, ReasonScreen
from gputui.ui.widgets.rows import RowTable

COLUMNS = ("JOBID", "USER", "NAME", "STATE", "GPUS", "HOST", "TIME", "REASON")
LOG_LINES = 5000
"""Lines of output kept on screen for the selected job."""
_ORDER = {"running": 0, "starting": 0, "killing": 0, "preempting": 0, "unknown": 0}
_DESTRUCTIVE = {
    "kill": "Kill",
    "preempt": "Preempt",
}
ACTIONS = ("cancel", "kill", "preempt", "requeue", "hold", "release_hold")

W = TypeVar("W", bound=Widget)


def job_cells(job: HeadJob, now: float, idle_after_s: float | None = None) -> tuple[str, ...]:
    """One row of the table, in ``COLUMNS`` order; a running job idle past the head's
    limit (``idle_after_s``) says so in its REASON (``Idle 2h05m``)."""
    idle = idle_for(job.state, job.idle_since, idle_after_s, now)
    return (
        str(job.id),
        job.user,
        job.name,
        job.state,
        str(job.gpus),
        job.host or "-",
        elapsed_text(job.elapsed(now)),
        idle_text(idle) if idle is not None else job.reason or "-",
    )


def ordered(jobs: tuple[HeadJob, ...], user: str | None) -> list[HeadJob]:
    """Running first, then waiting (oldest first), then the recently ended (newest first)."""
    shown = [j for j in jobs if user is None or j.user == user]

    def key(job: HeadJob) -> tuple[int, float]:
        if job.live:
            return 0, job.id
        if job.pending:
            return 1, job.id
        return 2, -(job.ended_at or 0.0)

    return sorted(shown, key=key)


class QueueScreen(Screen[None]):
    """Jobs table, the selected job's detail and output; actions on the selected job."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,Q", "close", "Back", tooltip="Back to the GPUs"),
        Binding("n", "submit", "Submit", tooltip="Enqueue a job (a form)"),
        Binding("x", "act('cancel')", "Cancel", tooltip="Cancel the job (asks if it runs)"),
        Binding("K", "act('kill')", "Kill", tooltip="Kill the running job (asks)"),
        Binding("P", "act('preempt')", "Preempt", tooltip="Preempt: stop and requeue (asks)"),
        Binding("R", "act('requeue')", "Requeue", show=False, tooltip="Requeue the job"),
        Binding("h", "act('hold')", "Hold", show=False, tooltip="Hold a queued job"),
        Binding("H", "act('release_hold')", "Unhold", show=False, tooltip="Release a hold"),
        Binding("m", "mine", "Mine/all", tooltip="Show only your jobs, or everyone's"),
    ]

    @dataclass
    class JobSelected(Message):
        """The cursor is on job ``job_id`` (None: the table is empty)."""

        job_id: int | None

    @dataclass
    class JobAction(Message):
        """The user asked (and, where it destroys work, confirmed) ``op`` on a job."""

        op: str
        job_id: int
        reason: str | None = None
        """Given where an admin acts on another user's job (the head requires it)."""
        force: bool = False
        """Confirmed: requeue a job that ended (its owner's command runs again)."""

    @dataclass
    class SubmitWanted(Message):
        """The user asked for the enqueue form."""

    def __init__(
        self,
        view: HeadView | None,
        *,
        clock: Callable[[], float] = time.time,
        lacks: Callable[[str], str | None] = lambda op: None,
    ) -> None:
        """``lacks``: for an action on a job, the line saying the scheduler cannot do
        it (None: it can)."""
        super().__init__()
        self.view = view
        self.clock = clock
        self.lacks = lacks
        self.only_mine = False
        self.unreachable: str | None = None
        self._keys: list[str] = []
        self._cells: dict[str, tuple[str, ...]] = {}
        self._selected: int | None = None
        self._log_job: int | None = None
        self._detail: dict[str, Any] | None = None
        self._problem = ""
        self._explain: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="queue-status")
        table: RowTable[str] = RowTable(id="jobs", cursor_type="row", zebra_stripes=False)
        table.border_title = "jobs"
        yield table
        with Horizontal(id="job-panes"):
            with Vertical(id="job-detail-box"):
                yield Static("", id="job-detail")
            log = Log(id="job-log", max_lines=LOG_LINES, highlight=False)
            log.border_title = "output"
            yield log
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#jobs", DataTable)
        for name in COLUMNS:
            table.add_column(name, key=name)
        self._refresh()
        self.set_interval(1.0, self._tick, name="queue-times")
        table.focus()

    # -- data in (from the app) -----------------------------------------------------

    def show_view(self, view: HeadView) -> None:
        self.view = view
        self.unreachable = None
        if self.is_mounted:
            with contextlib.suppress(NoMatches):  # its widgets are gone: it is closing
                self._refresh()

    def show_unreachable(self, reason: str) -> None:
        self.unreachable = reason
        if self.is_mounted:
            with contextlib.suppress(NoMatches):  # as in ``show_view``
                self._status()

    def show_detail(self, job_id: int, detail: dict[str, Any] | None, problem: str = "") -> None:
        """The full record of ``job_id`` (``show``), or why it could not be had."""
        if job_id != self._selected:
            return
        self._detail = detail
        self._problem = problem
        self._draw_detail()

    def show_explain(self, job_id: int, pairs: list[tuple[str, str]]) -> None:
        """Why the selected waiting job waits (place, factors, start estimate)."""
        if job_id != self._selected:
            return
        self._explain = pairs
        self._draw_detail()

    def _widget(self, selector: str, kind: type[W]) -> W | None:
        """One of this screen's widgets, or None once they are gone (the screen is
        closing, or the app is: news from the head may still arrive then)."""
        try:
            return self.query_one(selector, kind)
        except NoMatches:
            return None

    def reset_log(self, job_id: int, note: str = "") -> None:
        self._log_job = job_id
        log = self._widget("#job-log", Log)
        if log is None:
            return
        log.clear()
        log.border_title = f"output of job {job_id}"
        if note:
            log.write_line(note)

    def append_log(self, job_id: int, data: str) -> None:
        """Output of ``job_id`` as it comes (cleaned: a job may print anything)."""
        if job_id != self._log_job or not data:
            return
        lines = data.split("\n")
        safe = "\n".join(clean(line, 2000) for line in lines)
        log = self._widget("#job-log", Log)
        if log is not None:
            log.write(safe)

    def log_note(self, job_id: int, note: str) -> None:
        """A word on the output's title line: following, ended, or why it is not coming."""
        if job_id == self._log_job:
            title = f"output of job {job_id}" + (f" · {note}" if note else "")
            log = self._widget("#job-log", Log)
            if log is not None:
                log.border_title = title

    @property
    def selected(self) -> HeadJob | None:
        if self.view is None or self._selected is None:
            return None
        return self.view.job(self._selected)

    # -- drawing ---------------------------------------------------------------------

    def _status(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" gputui queue ", "bold reverse")
        if self.unreachable is not None:
            text.append(f"  !! head unreachable ({self.unreachable})", "bold red")
        if self.view is not None:
            running, pending = self.view.counts()
            text.append(f"  {running} running, {pending} waiting")
            me = self.view.me
            text.append(f"  you: {me.user}" + (" (admin)" if me.admin else ""))
        text.append("  showing: " + ("your jobs" if self.only_mine else "everyone's"))
        self.query_one("#queue-status", Static).update(text)

    def _refresh(self) -> None:
        self._status()
        table = self.query_one("#jobs", DataTable)
        view = self.view
        me = view.me.user if view is not None and self.only_mine else None
        jobs = ordered(view.jobs, me) if view is not None else []
        now = self.clock()
        after = view.idle_after_s if view is not None else None
        rows = {str(j.id): job_cells(j, now, after) for j in jobs}
        keys = list(rows)
        if keys != self._keys:
            selected = str(self._selected) if self._selected is not None else None
            table.clear()
            for key in keys:
                table.add_row(*rows[key], key=key)
            self._keys, self._cells = keys, rows
            if selected in rows:
                table.move_cursor(row=keys.index(selected), animate=False)
        else:
            self._update_cells(table, rows)
        self._announce(table)
        # Every new state redraws the detail: its state, reason, host and exit are the
        # view's, not the record asked for when the job was selected.
        self._draw_detail()

    def _update_cells(self, table: DataTable[Any], rows: dict[str, tuple[str, ...]]) -> None:
        for key, cells in rows.items():
            old = self._cells.get(key)
            if old == cells:
                continue
            for i, (column, value) in enumerate(zip(COLUMNS, cells, strict=True)):
                if old is None or old[i] != value:
                    table.update_cell(key, column, value)
            self._cells[key] = cells

    def _tick(self) -> None:
        if self.view is None:
            return
        now = self.clock()
        table = self.query_one("#jobs", DataTable)
        after = self.view.idle_after_s
        live = {str(j.id): job_cells(j, now, after) for j in self.view.jobs if j.live}
        self._update_cells(table, {k: v for k, v in live.items() if k in self._cells})

    def _announce(self, table: DataTable[Any]) -> None:
        job_id: int | None = None
        if self._keys and 0 <= table.cursor_row < len(self._keys):
            job_id = int(self._keys[table.cursor_row])
        if job_id != self._selected:
            self._selected = job_id
            self._detail = None
            self._problem = ""
            self._explain = []
            self._draw_detail()
            self.post_message(self.JobSelected(job_id))

    @on(DataTable.RowHighlighted, "#jobs")
    def _on_row(self, event: DataTable.RowHighlighted) -> None:
        self._announce(self.query_one("#jobs", DataTable))

    def _draw_detail(self) -> None:
        job_id = self._selected
        detail = self._widget("#job-detail", Static)
        if detail is not None:
            detail.update(
                self._detail_text(job_id, self._problem) if job_id is not None else Text("no jobs")
            )

    def _detail_text(self, job_id: int, problem: str = "") -> Text:
        """The selected job as the head's latest state has it; its command, directory
        and log from its record (they never change); why it waits while it waits."""
        text = Text(no_wrap=True, overflow="ellipsis")
        job = self.view.job(job_id) if self.view is not None else None
        full = self._detail or {}
        if job is None:
            text.append(f"job {job_id}: no longer listed by the head")
            if not full:
                return text
            text.append("\n")

        def pair(label: str, value: object) -> None:
            text.append(f"{label:<10}", "dim")
            text.append(clean(value if value not in (None, "") else "-", 300))
            text.append("\n")

        if job is not None:
            pair("job", f"{job.id}  {job.name}")
            pair("user", job.user + (f" (runs as {job.run_as})" if job.run_as else ""))
            state = job.state + (f": {job.reason}" if job.reason else "")
            if job.exit_code is not None or job.exit_signal:
                state += f"  (exit {job.exit_code if job.exit_code is not None else '-'}"
                state += f", SIG{job.exit_signal})" if job.exit_signal else ")"
            pair("state", state)
            where = f"{job.host} " + ",".join(job.gpu_uuids) if job.host else "-"
            pair("gpus", f"{job.gpus}  {where}")
            pair("wants", f"pool {job.pool or 'any'}" + (" preemptible" if job.preemptible else ""))
            if job.time_limit_s:
                pair("limit", elapsed_text(job.time_limit_s))
            if job.requeues:
                pair("requeues", job.requeues)
        argv = full.get("argv")
        if isinstance(argv, list):
            pair("command", " ".join(str(a) for a in argv))
        if full.get("private") is True:  # scheduler.private_data: another user's job
            pair("command", "(private to its owner and admins)")
        elif full:
            pair("cwd", full.get("cwd"))
            pair("log", full.get("log_path"))
        if job is not None and job.pending:  # a job that left the queue no longer waits
            for label, value in self._explain:
                pair(label, value)
        if problem:
            text.append(problem, "bold red")
        return text

    # -- actions ---------------------------------------------------------------------

    def action_close(self) -> None:
        self.dismiss(None)

    def action_mine(self) -> None:
        self.only_mine = not self.only_mine
        self._refresh()

    def action_submit(self) -> None:
        self.post_message(self.SubmitWanted())

    def action_act(self, op: str) -> None:
        job = self.selected
        if job is None:
            self.notify("No job selected.", severity="warning")
            return
        title = f"cannot {op.replace('_', '-')} job {job.id}"
        lacking = self.lacks(op)
        if lacking is not None:
            self.notify(lacking, title=title, severity="error", timeout=8, markup=False)
            return
        if job.state in FINAL_STATES and op in ("cancel", "kill", "preempt"):
            # Said at once, not after a question about work that is no longer there
            # (the head answers the others in its own words).
            ended = f"job {job.id} already ended ({job.state}); R requeues it"
            self.notify(ended, title=title, severity="warning", markup=False)
            return
        label = _DESTRUCTIVE.get(op)
        if op == "cancel" and job.live:
            label = "Cancel"
        force = op == "requeue" and job.state in FINAL_STATES
        if force:
            label = "Requeue"
        me = self.view.me if self.view is not None else None
        for_another = me is not None and me.admin and job.user != me.user
        if label is None and not for_another:
            self.post_message(self.JobAction(op, job.id))
            return
        shown = label or op.replace("_", "-").capitalize()
        question = Text(f"{shown} job {job.id} (")
        question.append(job.user)
        question.append(": ")
        question.append(job.name)
        question.append(f"), {job.state} on {job.host or '-'}? ")
        if label is not None:
            if force:
                warning = f"It runs {job.user}'s command again, as {job.user}."
            elif op == "preempt":
                warning = "It is stopped and requeued."
            else:
                warning = "Its work so far is lost."
            question.append(warning, "bold")
        if for_another:
            question.append(f"\nIt is {job.user}'s job: say why; {job.user} is told.")

            def reasoned(reason: str | None) -> None:
                if reason:
                    self.post_message(self.JobAction(op, job.id, reason, force))

            self.app.push_screen(ReasonScreen(question, f"{shown} job {job.id}"), reasoned)
            return
        question.append(" y/N")

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(self.JobAction(op, job.id, force=force))

        self.app.push_screen(ConfirmScreen(question, f"{shown} job {job.id}"), answered)
