"""The audit screen (``A``): who did what to which job, claim, GPU or host, and why.

Newest first: time, user, action, target, whose work it was, outcome and reason, as
the head records them (every admin action and every automatic one: preempt, enforce,
fence); the highlighted row whole below the table. ``COLUMNS`` says what a narrow
pane keeps: every column, the free text ones shorter. ``/``
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
from textual.widgets import DataTable, Input, Static

from gputui.common.i18n import N_, _
from gputui.common.text import cells, clean
from gputui.ui.widgets.footer import TranslatedFooter
from gputui.ui.widgets.rows import RowTable
from gputui.ui.widgets.titles import view_title

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
    owner: str = ""
    """Whose work it was (a job's or claim's user); empty when the head does not say."""

    def words(self) -> str:
        parts = (self.user, self.action, self.target, self.owner, self.reason, self.outcome)
        return " ".join(parts).lower()

    def when(self) -> str:
        return time.strftime("%m-%d %H:%M:%S", time.localtime(self.time))

    def whole(self) -> Text:
        """Every field, for the line below the table (which wraps it)."""
        text = Text(f"{self.when()}  ")
        text.append(self.user or "-", "bold")
        text.append(f" {self.action} {self.target}")
        if self.owner:
            text.append(" " + _("(of {owner})").format(owner=self.owner))
        reason, outcome = _("reason"), _("outcome")
        room = max(9, cells(reason) + 1, cells(outcome) + 1)
        text.append(f"\n{_pad(reason, room)}{self.reason or '-'}")
        text.append(f"\n{_pad(outcome, room)}{self.outcome or '-'}")
        return text


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - cells(text))


COLUMNS: tuple[tuple[str, int, int], ...] = (
    ("TIME", 14, 11),
    ("ACTOR", 10, 8),
    ("ACTION", 12, 9),
    ("TARGET", 22, 10),
    ("OWNER", 10, 8),
    ("OUTCOME", 30, 9),
    ("REASON", 40, 0),
)
"""(label, width from 120 columns, width below): every column at 80; REASON takes
what is left of a narrow pane (the line below the table has the row whole)."""
_TITLES = {
    "ACTOR": N_("ACTOR"),
    "ACTION": N_("ACTION"),
    "TARGET": N_("TARGET"),
    "OWNER": N_("OWNER"),
    "OUTCOME": N_("OUTCOME"),
    "REASON": N_("REASON"),
}
_WHEN = N_("TIME: when it was done")
"""The audit's TIME is a moment (the queue's TIME, a duration, reads otherwise in
Chinese): its own message, and "TIME" where it has no translation (English)."""


def column_title(label: str) -> str:
    """A column's title in the chosen language."""
    if label == "TIME":
        shown = _(_WHEN)
        return label if shown == _WHEN else shown
    return _(_TITLES[label]) if label in _TITLES else label


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
                text("owner", 64),
            )
        )
    out.sort(key=lambda r: -r.time)
    return out


class AuditScreen(Screen[None]):
    """The audit trail, newest first."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,A", "close", N_("Back"), tooltip=N_("Back to the GPUs")),
        Binding("r", "refresh", N_("Refresh"), tooltip=N_("Ask the head again now")),
        Binding("slash", "filter", N_("Filter"), tooltip=N_("Show only rows with these words")),
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
        yield Input(placeholder=_("filter: user, action, target, reason"), id="audit-filter")
        table: RowTable[Text] = RowTable(id="audit-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="audit-detail")
        yield TranslatedFooter()

    def on_mount(self) -> None:
        table = self.query_one("#audit-table", DataTable)
        wide = self.app.size.width >= 120
        fixed = sum(narrow + 2 for _, _, narrow in COLUMNS if narrow)  # a cell pads 1 a side
        rest = max(8, self.app.size.width - fixed - 4)  # 2 more: the scroll bar
        for label, width, narrow in COLUMNS:
            title = column_title(label)
            table.add_column(title, width=width if wide else narrow or rest, key=label)
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
        wide = self.app.size.width >= 120
        for r in self.shown:
            failed = r.outcome and not r.outcome.startswith(("ok", "done", "sent"))
            table.add_row(
                Text(r.when() if wide else r.when()[:11]),
                Text(r.user),
                Text(r.action, "bold"),
                Text(r.target),
                Text("-" if not r.owner or r.owner == r.user else r.owner),
                Text(r.outcome, "yellow" if failed else ""),
                Text(r.reason),
            )
        self._status()
        self._show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one("#audit-table", DataTable)
        row = self.shown[table.cursor_row] if 0 <= table.cursor_row < len(self.shown) else None
        self.query_one("#audit-detail", Static).update(row.whole() if row else "")

    def _status(self) -> None:
        status = self.query_one("#audit-status", Static)
        title = view_title(_("audit"))
        if self.problem is not None:
            status.update(title + Text(self.problem, "bold red"))
            return
        if not self.rows:
            said = _("no audit rows yet") if self.answered else _("asking the head…")
            status.update(title + Text(said, "dim"))
            return
        counted = _("{shown} of {total} rows, newest first").format(
            shown=len(self.shown), total=len(self.rows)
        )
        status.update(title + Text(counted))

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
