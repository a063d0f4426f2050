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
import string
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
from textual.widgets import DataTable, Log, Static

from gputui.common.arrays import fold, task_name
from gputui.common.durations import coarse_text, elapsed_text
from gputui.common.i18n import N_, _
from gputui.common.job_words import idle_text, reason_text, state_text
from gputui.common.text import cells, clean
from gputui.ui.head.flags import idle_for
from gputui.ui.head.view import FINAL_STATES, HeadJob, HeadView
from gputui.ui.screens.confirm import ConfirmScreen, ReasonScreen
from gputui.ui.widgets.footer import TranslatedFooter
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
WHAT = {
    "cancel": N_("cancel job {job}"),
    "kill": N_("kill job {job}"),
    "preempt": N_("preempt job {job}"),
    "requeue": N_("requeue job {job}"),
    "hold": N_("hold job {job}"),
    "release_hold": N_("release-hold job {job}"),
}
"""An action on a job as the title of a toast (``cannot …``, what was done)."""
_QUESTIONS = {
    "cancel": N_("Cancel job {job} ({user}: {name}), {state} on {host}?"),
    "kill": N_("Kill job {job} ({user}: {name}), {state} on {host}?"),
    "preempt": N_("Preempt job {job} ({user}: {name}), {state} on {host}?"),
    "requeue": N_("Requeue job {job} ({user}: {name}), {state} on {host}?"),
    "hold": N_("Hold job {job} ({user}: {name}), {state} on {host}?"),
    "release_hold": N_("Release-hold job {job} ({user}: {name}), {state} on {host}?"),
}
_BUTTONS = {
    "cancel": N_("Cancel job {job}"),
    "kill": N_("Kill job {job}"),
    "preempt": N_("Preempt job {job}"),
    "requeue": N_("Requeue job {job}"),
    "hold": N_("Hold job {job}"),
    "release_hold": N_("Release-hold job {job}"),
}
_LABELS = {
    "job": N_("job"),
    "user": N_("user"),
    "state": N_("state"),
    "gpus": N_("gpus"),
    "wants": N_("wants"),
    "limit": N_("limit"),
    "requeues": N_("requeues"),
    "command": N_("command"),
    "cwd": N_("cwd"),
    "log": N_("log"),
    "runs in": N_("runs in"),
}
"""The detail pane's labels (a waiting job's explain labels come translated)."""
LABEL_CELLS = 10

W = TypeVar("W", bound=Widget)


def what_text(op: str, job: int | str) -> str:
    """``op`` on ``job`` as a toast's title says it: ``kill job 12``."""
    return _(WHAT[op]).format(job=job) if op in WHAT else f"{op.replace('_', '-')} job {job}"


def sentence(template: str, **parts: str | Text) -> Text:
    """``template`` (already translated) with its ``{fields}`` filled; a ``Text``
    part keeps its style, a ``str`` part (a name: data) is put in as it is."""
    out = Text()
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        out.append(literal)
        if field is not None:
            part = parts[field]
            if isinstance(part, Text):
                out.append_text(part)
            else:
                out.append(part)
    return out


def label(job: HeadJob) -> str:
    """Its JOBID: ``12``, or ``12_7`` for task 7 of array 12."""
    if job.array_id is not None and job.array_task is not None:
        return task_name(job.array_id, job.array_task)
    return str(job.id)


def job_cells(
    job: HeadJob, now: float, idle_after_s: float | None = None, shown_as: str | None = None
) -> tuple[str, ...]:
    """One row of the table, in ``COLUMNS`` order; a running job idle past the head's
    limit (``idle_after_s``) says so in its REASON (``Idle 2h05m``). ``shown_as``:
    its JOBID when it stands for several (``12_[4-31]``)."""
    idle = idle_for(job.state, job.idle_since, idle_after_s, now)
    return (
        shown_as or label(job),
        job.user,
        job.name,
        state_text(job.state),
        str(job.gpus),
        job.host or "-",
        elapsed_text(job.elapsed(now)),
        idle_text(coarse_text(idle)) if idle is not None else reason_text(job.reason or "-"),
    )


def runs_in_text(full: dict[str, Any]) -> str:
    """What a job's command runs in, from its full view (the head's ``show``): ``conda
    ENV``, ``venv PATH`` or ``RUNTIME IMAGE`` (and its container); "" on the host."""
    parts: list[str] = []
    for key in ("conda", "venv"):
        if isinstance(full.get(key), str):
            parts.append(f"{key} {full[key]}")
    if isinstance(full.get("image"), str):
        parts.append(f"{full.get('runtime') or _('container')} {full['image']}")
        if isinstance(full.get("container_id"), str):
            parts.append(_("container {id}").format(id=full["container_id"]))
    return "  ".join(parts)


def folded(jobs: list[HeadJob], expanded: set[int]) -> list[tuple[HeadJob, str, int]]:
    """The table's rows: (job, JOBID, how many jobs it stands for); an array's waiting
    tasks in one row at the first one's place, unless the array is ``expanded``."""
    by_id = {j.id: j for j in jobs}
    rows = [
        {"id": j.id, "array_id": j.array_id, "array_task": j.array_task, "state": j.state}
        for j in jobs
    ]
    return [(by_id[row["id"]], text, n) for text, row, n in fold(rows, keep=expanded)]


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
        Binding("escape,Q", "close", N_("Back"), tooltip=N_("Back to the GPUs")),
        Binding("n", "submit", N_("Submit"), tooltip=N_("Enqueue a job (a form)")),
        Binding("x", "act('cancel')", N_("Cancel"), tooltip=N_("Cancel the job (asks if it runs)")),
        Binding("K", "act('kill')", N_("Kill"), tooltip=N_("Kill the running job (asks)")),
        Binding(
            "P", "act('preempt')", N_("Preempt"), tooltip=N_("Preempt: stop and requeue (asks)")
        ),
        Binding("R", "act('requeue')", N_("Requeue"), show=False, tooltip=N_("Requeue the job")),
        Binding("h", "act('hold')", N_("Hold"), show=False, tooltip=N_("Hold a queued job")),
        Binding("H", "act('release_hold')", N_("Unhold"), show=False, tooltip=N_("Release a hold")),
        Binding("m", "mine", N_("Mine/all"), tooltip=N_("Show only your jobs, or everyone's")),
        Binding(
            "e",
            "expand",
            N_("Expand"),
            tooltip=N_("Show an array's waiting tasks one a row, or fold"),
        ),
        Binding(
            "a",
            "attach",
            N_("Attach"),
            show=False,  # the footer is full at 80 columns; README and the palette say it
            tooltip=N_(
                "A terminal on the running interactive job (run --pty); Ctrl-] d comes back"
            ),
        ),
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
        task: int | None = None
        """With it, ``job_id`` is an array and this one task of it (a cancel of the
        array's id alone is of all of it)."""

    @dataclass
    class SubmitWanted(Message):
        """The user asked for the enqueue form."""

    @dataclass
    class AttachWanted(Message):
        """The user asked for a terminal on an interactive job."""

        job_id: int

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
        self.expanded: set[int] = set()
        """Arrays whose waiting tasks show one a row (``e``)."""
        self._counts: dict[str, int] = {}
        """How many jobs each row stands for (an array's folded waiting tasks)."""

    def compose(self) -> ComposeResult:
        yield Static("", id="queue-status")
        table: RowTable[str] = RowTable(id="jobs", cursor_type="row", zebra_stripes=False)
        table.border_title = _("jobs")
        yield table
        with Horizontal(id="job-panes"):
            with Vertical(id="job-detail-box"):
                yield Static("", id="job-detail")
            log = Log(id="job-log", max_lines=LOG_LINES, highlight=False)
            log.border_title = _("output")
            yield log
        yield TranslatedFooter()

    def on_mount(self) -> None:
        table = self.query_one("#jobs", DataTable)
        for name in COLUMNS:
            table.add_column(_(name), key=name)
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
        log.border_title = _("output of job {job}").format(job=job_id)
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
            title = _("output of job {job}").format(job=job_id) + (f" · {note}" if note else "")
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
        text.append(" " + _("gputui queue") + " ", "bold reverse")
        if self.unreachable is not None:
            unreachable = _("head unreachable ({reason})").format(reason=self.unreachable)
            text.append(f"  !! {unreachable}", "bold red")
        if self.view is not None:
            running, pending = self.view.counts()
            counts = _("{running} running, {pending} waiting")
            text.append("  " + counts.format(running=running, pending=pending))
            me = self.view.me
            you = _("you: {user} (admin)") if me.admin else _("you: {user}")
            text.append("  " + you.format(user=me.user))
        text.append(
            "  " + (_("showing: your jobs") if self.only_mine else _("showing: everyone's"))
        )
        self.query_one("#queue-status", Static).update(text)

    def _refresh(self) -> None:
        self._status()
        table = self.query_one("#jobs", DataTable)
        view = self.view
        me = view.me.user if view is not None and self.only_mine else None
        jobs = ordered(view.jobs, me) if view is not None else []
        now = self.clock()
        after = view.idle_after_s if view is not None else None
        lines = folded(jobs, self.expanded)
        rows = {str(j.id): job_cells(j, now, after, text) for j, text, _n in lines}
        self._counts = {str(j.id): n for j, _text, n in lines}
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
        for key, row in rows.items():
            old = self._cells.get(key)
            if old == row:
                continue
            for i, (column, value) in enumerate(zip(COLUMNS, row, strict=True)):
                if old is None or old[i] != value:
                    # A longer value widens its column (a TIME past a day, an array's
                    # folded id): the table sizes a column only by cells it is given.
                    table.update_cell(key, column, value, update_width=True)
            self._cells[key] = row

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
                self._detail_text(job_id, self._problem)
                if job_id is not None
                else Text(_("no jobs"))
            )

    def _detail_text(self, job_id: int, problem: str = "") -> Text:
        """The selected job as the head's latest state has it; its command, directory
        and log from its record (they never change); why it waits while it waits."""
        text = Text(no_wrap=True, overflow="ellipsis")
        job = self.view.job(job_id) if self.view is not None else None
        full = self._detail or {}
        if job is None:
            text.append(_("job {job}: no longer listed by the head").format(job=job_id))
            if not full:
                return text
            text.append("\n")

        def pair(label: str, value: object) -> None:
            shown = _(_LABELS.get(label, label))  # explain's labels: as their file marks them
            text.append(shown + " " * max(0, LABEL_CELLS - cells(shown)), "dim")
            text.append(clean(value if value not in (None, "") else "-", 300))
            text.append("\n")

        if job is not None:
            pair("job", f"{job.id}  {job.name}")
            runs_as = _("{user} (runs as {run_as})")
            pair(
                "user", runs_as.format(user=job.user, run_as=job.run_as) if job.run_as else job.user
            )
            state = state_text(job.state) + (f": {reason_text(job.reason)}" if job.reason else "")
            if job.exit_code is not None or job.exit_signal:
                code = job.exit_code if job.exit_code is not None else "-"
                ended = (
                    _("exit {code}, SIG{signal}").format(code=code, signal=job.exit_signal)
                    if job.exit_signal
                    else _("exit {code}").format(code=code)
                )
                state += f"  ({ended})"
            pair("state", state)
            where = f"{job.host} " + ",".join(job.gpu_uuids) if job.host else "-"
            pair("gpus", f"{job.gpus}  {where}")
            pool = job.pool or _("any")
            wants = _("pool {pool} preemptible") if job.preemptible else _("pool {pool}")
            pair("wants", wants.format(pool=pool))
            if job.time_limit_s:
                pair("limit", elapsed_text(job.time_limit_s))
            if job.requeues:
                pair("requeues", job.requeues)
        argv = full.get("argv")
        if isinstance(argv, list):
            pair("command", " ".join(str(a) for a in argv))
        if full.get("private") is True:  # scheduler.private_data: another user's job
            pair("command", _("(private to its owner and admins)"))
        elif full:
            pair("cwd", full.get("cwd"))
            pair("log", full.get("log_path"))
            runs_in = runs_in_text(full)
            if runs_in:
                pair("runs in", runs_in)
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

    def action_expand(self) -> None:
        job = self.selected
        if job is None or job.array_id is None:
            self.notify(_("Not a task of an array."), severity="warning")
            return
        self.expanded ^= {job.array_id}
        self._refresh()

    def action_submit(self) -> None:
        self.post_message(self.SubmitWanted())

    def action_attach(self) -> None:
        job = self.selected
        if job is None:
            self.notify(_("No job selected."), severity="warning")
            return
        title = _("cannot attach to job {job}").format(job=job.id)
        lacking = self.lacks("attach")
        if lacking is not None:
            self.notify(lacking, title=title, severity="error", timeout=8, markup=False)
            return
        if not job.interactive:
            why = _("it has no terminal: only jobs started with gputui run --pty have one")
            self.notify(why, title=title, severity="warning", markup=False)
            return
        if job.state != "running":
            not_running = _("it is {state}, not running").format(state=state_text(job.state))
            self.notify(not_running, title=title, severity="warning", markup=False)
            return
        self.post_message(self.AttachWanted(job.id))

    def action_act(self, op: str) -> None:
        job = self.selected
        if job is None:
            self.notify(_("No job selected."), severity="warning")
            return
        title = _("cannot {what}").format(what=what_text(op, job.id))
        lacking = self.lacks(op)
        if lacking is not None:
            self.notify(lacking, title=title, severity="error", timeout=8, markup=False)
            return
        if job.state in FINAL_STATES and op in ("cancel", "kill", "preempt"):
            # Said at once, not after a question about work that is no longer there
            # (the head answers the others in its own words).
            ended = _("job {job} already ended ({state}); R requeues it").format(
                job=job.id, state=state_text(job.state)
            )
            self.notify(ended, title=title, severity="warning", markup=False)
            return
        if op == "cancel" and job.array_id is not None:
            self._cancel_task(job)
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
        question = sentence(
            _(_QUESTIONS[op]),
            job=str(job.id),
            user=job.user,
            name=job.name,
            state=state_text(job.state),
            host=job.host or "-",
        )
        question.append(" ")
        button = _(_BUTTONS[op]).format(job=job.id)
        if label is not None:
            if force:
                warning = _("It runs {user}'s command again, as {user}.").format(user=job.user)
            elif op == "preempt":
                warning = _("It is stopped and requeued.")
            else:
                warning = _("Its work so far is lost.")
            question.append(warning, "bold")
        if for_another:
            told = _("It is {user}'s job: say why; {user} is told.").format(user=job.user)
            question.append("\n" + told)

            def reasoned(reason: str | None) -> None:
                if reason:
                    self.post_message(self.JobAction(op, job.id, reason, force))

            self.app.push_screen(ReasonScreen(question, button), reasoned)
            return
        question.append(" y/N")

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(self.JobAction(op, job.id, force=force))

        self.app.push_screen(ConfirmScreen(question, button), answered)

    def _cancel_task(self, job: HeadJob) -> None:
        """``x`` on an array's row: a folded row is the whole array (every task not
        ended, as ``gputui cancel ARRAY``), a task's own row that task alone."""
        assert job.array_id is not None
        count = self._counts.get(str(job.id), 1)
        whole = count > 1
        me = self.view.me if self.view is not None else None
        for_another = me is not None and me.admin and job.user != me.user
        task = None if whole else job.array_task
        if whole:
            button = _("Cancel array {array}").format(array=job.array_id)
            question = sentence(
                _(
                    "Cancel array {array} ({user}: {name})? Every task of it not ended: "
                    "{count} waiting here, and {stopped}"
                ),
                array=str(job.array_id),
                user=job.user,
                name=job.name,
                count=str(count),
                stopped=Text(_("its running tasks are stopped."), "bold"),
            )
        else:
            button = _("Cancel {task}").format(task=label(job))
            question = sentence(
                _("Cancel {task} ({user}: {name}), {state}?"),
                task=label(job),
                user=job.user,
                name=job.name,
                state=state_text(job.state),
            )
            question.append(" ")
            if job.live:
                question.append(_("Its work so far is lost."), "bold")
        if for_another:
            told = _("It is {user}'s: say why; {user} is told.").format(user=job.user)
            question.append("\n" + told)

            def reasoned(reason: str | None) -> None:
                if reason:
                    self.post_message(
                        self.JobAction("cancel", job.array_id or 0, reason, task=task)
                    )

            self.app.push_screen(ReasonScreen(question, button), reasoned)
            return
        question.append(" y/N")

        def answered(yes: bool | None) -> None:
            if yes:
                self.post_message(self.JobAction("cancel", job.array_id or 0, task=task))

        self.app.push_screen(ConfirmScreen(question, button), answered)
