"""The audit screen (``A``): who did what to which job, claim, GPU or host, and why.

Newest first: time, user, action, target, reason and outcome, as the head records
them (every admin action and every automatic one: preempt, enforce, fence). ``/``
filters on any of the words; ``r`` asks again. Like the usage screen it never talks
to the head itself: it posts ``Wanted``; the app asks the head (``audit``) in a
worker and hands back ``show_rows`` or ``show_problem``. A user who is not an admin
sees the rows about their own work, as the head decides.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from gputui.common.text import clean
from gputui.ui.widgets.rows import RowTable

LIMIT = 500
"""Rows asked for: the newest this many."""


@dataclass(frozen=True, slots=True)
class AuditRow:
    time: float
    user: str
    action: str
    target: str
    reason: str
    outcome: str

    def words(self) -> str:
        return f"{self.user} {self.action} {self.target} {self.reason} {self.outcome}".lower()


def parse_rows(answer: object) -> list[AuditRow]:
    """The head's ``audit`` answer as rows, newest first; whatever is malformed in it is
    left out (a bad row, a bad field), never raised."""
    rows = answer.get("rows") if isinstance(answer, Mapping) else None
    if not isinstance(rows, Sequence) or isinstance(rows, str | bytes):
        return []
    out = []
    for row in rows[: LIMIT * 2]:
        if not isinstance(row, Mapping):
            continue
        when = row.get("time")
        if not isinstance(when, int | float) or isinstance(when, bool) or not 0 <= when < 1e10:
            continue

        def text(key: str, limit: int = 128, row: Mapping[str, Any] = row) -> str:
            value = row.get(key)
            return clean(value, limit) if isinstance(value, str) else ""

        out.append(
            AuditRow(
                float(when),
                text("user", 64),
                text("action", 64),
                text("target"),
                text("reason", 512),
                text("outcome", 256),
            )
        )
    out.sort(key=lambda r: -r.time)
    return out


class AuditScreen(Screen[None]):
    """The audit trail, newest first."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,A", "close", "Back", tooltip="Back to the GPUs"),
        Binding("r", "refresh", "Refresh", tooltip="Ask the head again now"),
        Binding("slash", "filter", "Filter", tooltip="Show only rows with these words"),
    ]

    @dataclass
    class Wanted(Message):
        """``screen`` wants the newest rows; its answer carries ``token``."""

        screen: AuditScreen
        token: int

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.clock = clock
        self.rows: list[AuditRow] = []
        self.shown: list[AuditRow] = []
        self.problem: str | None = None
        self.token = 0
        self.asked_at: float | None = None
        self.answered = False

    def compose(self) -> ComposeResult:
        yield Static("", id="audit-status")
        yield Input(placeholder="filter: user, action, target, reason", id="audit-filter")
        table: RowTable[Text] = RowTable(id="audit-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#audit-table", DataTable)
        wide = self.app.size.width >= 120
        for label, width in (
            ("TIME", 14),
            ("ACTOR", 10),
            ("ACTION", 12),
            ("TARGET", 22 if wide else 14),
            ("REASON", 40 if wide else 14),
            ("OUTCOME", 30 if wide else 10),
        ):
            table.add_column(label, width=width, key=label)
        self.query_one("#audit-filter", Input).display = False
        self.action_refresh()
        table.focus()

    def action_refresh(self) -> None:
        self.token += 1
        self.asked_at = self.clock()
        self._status()
        self.post_message(self.Wanted(self, self.token))

    def show_rows(self, token: int, rows: list[AuditRow]) -> None:
        if token != self.token:
            return  # an answer to an older question
        self.rows, self.problem, self.answered = rows, None, True
        self._fill()

    def show_problem(self, token: int, problem: str) -> None:
        if token != self.token:
            return
        self.problem = clean(problem, 300)
        self._status()

    def _fill(self) -> None:
        words = self.query_one("#audit-filter", Input).value.lower().split()
        self.shown = [r for r in self.rows if all(w in r.words() for w in words)]
        table = self.query_one("#audit-table", DataTable)
        table.clear()
        for r in self.shown:
            failed = r.outcome and not r.outcome.startswith(("ok", "done", "sent"))
            table.add_row(
                Text(time.strftime("%m-%d %H:%M:%S", time.localtime(r.time))),
                Text(r.user),
                Text(r.action, "bold"),
                Text(r.target),
                Text(r.reason),
                Text(r.outcome, "yellow" if failed else ""),
            )
        self._status()

    def _status(self) -> None:
        status = self.query_one("#audit-status", Static)
        if self.problem is not None:
            status.update(Text(self.problem, "bold red"))
            return
        if not self.rows:
            said = "no audit rows yet" if self.answered else "asking the head…"
            status.update(Text(said, "dim"))
            return
        text = Text(f"{len(self.shown)} of {len(self.rows)} rows, newest first", "")
        status.update(text)

    def action_filter(self) -> None:
        box = self.query_one("#audit-filter", Input)
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._fill()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#audit-table", DataTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)
