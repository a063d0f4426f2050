"""The health view (``h``): every problem in the cluster, ranked, and what to do.

Top to bottom: one line of totals (critical, warnings, notes, hosts, and the checks
the cards cannot answer), the table of problems worst first (severity, host, GPU,
problem, first seen, last seen, count, acknowledged), and the selected problem in
full: what it means, what to do, its figures, who acknowledged it and why.

The rows come from a board the screen reads again each second: without a head the
app's own ``HealthBoard`` (``gputui.health.board``), fed the hosts' snapshots; with a
head the head's board as last read (``gputui.ui.head.health_acks.SharedBoard``), read
every few seconds while the view is open, so first seen is when the head first saw
a problem. The header counts the rows of the list. ``a`` acknowledges the selected
problem with a note; it stays acknowledged until the problem changes. With a head
the acknowledgement is the head's (kept for every console).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from gputui.common.i18n import N_, _, ngettext, pgettext
from gputui.common.text import cells as cell_width
from gputui.common.text import clean, fit
from gputui.health.board import HealthBoard, Problem
from gputui.health.words import shown
from gputui.ui.screens.confirm import ReasonScreen
from gputui.ui.widgets.footer import TranslatedFooter
from gputui.ui.widgets.rows import RowTable
from gputui.ui.widgets.titles import view_title


class Board(Protocol):
    """What the view reads: ``HealthBoard``, or the head's as last read."""

    def problems(self) -> list[Problem]: ...

    def unknown(self) -> dict[str, list[tuple[int, str, str]]]: ...


Acknowledge = Callable[[Problem, str, Callable[[], None]], None]
"""Acknowledge a problem with a note; the callable given is called once it shows."""

_STYLE = {"crit": "bold red", "warn": "yellow", "info": "cyan"}
_SEVERITIES = ("crit", "warn", "info")


def _word(severity: str) -> str:
    """A severity as the health view shows it ("NOTE" is also a column title elsewhere:
    each has its own translation)."""
    if severity == "crit":
        return pgettext("severity", "CRIT")
    if severity == "warn":
        return pgettext("severity", "WARN")
    return pgettext("severity", "NOTE")


REFRESH_S = 1.0
WIDE = 120
"""From this many columns the table also shows when each problem was last seen."""


def _ago(now: float, then: float) -> str:
    seconds = max(0.0, now - then)
    if seconds < 90:
        return _("{n}s ago").format(n=f"{seconds:.0f}")
    if seconds < 90 * 60:
        return _("{n}m ago").format(n=f"{seconds / 60:.0f}")
    if seconds < 36 * 3600:
        return _("{n}h ago").format(n=f"{seconds / 3600:.0f}")
    return time.strftime("%m-%d %H:%M", time.localtime(then))


_LABEL_W = 9
"""The detail's labels are padded to this many cells (``meaning  ``)."""


def _label(label: str) -> str:
    """A detail line's label in the reader's language, padded by display cells."""
    return fit(_(label), max(_LABEL_W, cell_width(_(label)) + 2))


def _counted(severity: str, n: int) -> str:
    if severity == "crit":
        return ngettext("{n} critical", "{n} critical", n).format(n=n)
    if severity == "warn":
        return ngettext("{n} warning", "{n} warnings", n).format(n=n)
    return ngettext("{n} note", "{n} notes", n).format(n=n)


class HealthScreen(Screen[None]):
    """Problems across the cluster, worst first."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,h", "close", N_("Back"), tooltip=N_("Back to the GPUs")),
        Binding(
            "a", "acknowledge", N_("Acknowledge"), tooltip=N_("Acknowledge the problem (a note)")
        ),
    ]

    def __init__(
        self,
        board: Board,
        *,
        clock: Callable[[], float] = time.time,
        user: str = "",
        refresh_s: float = REFRESH_S,
        may_acknowledge: Callable[[], str | None] = lambda: None,
        acknowledge: Acknowledge | None = None,
        refresh_board: Callable[[], None] | None = None,
        refresh_board_s: float = 5.0,
        note: Callable[[], tuple[bool, str]] | None = None,
    ) -> None:
        """``may_acknowledge``: None when this user may acknowledge, else why not.
        ``acknowledge``: where an acknowledgement goes (the head); by default this
        board. ``refresh_board``: called at once and every ``refresh_board_s`` while
        the view is open, to read a board kept elsewhere (the head's). ``note``:
        whether there is a board to show yet, and a line on where it comes from."""
        super().__init__()
        self.acknowledge = acknowledge
        self.refresh_board = refresh_board
        self.refresh_board_s = refresh_board_s
        self.note = note
        self.board = board
        self.clock = clock
        self.user = user
        self.refresh_s = refresh_s
        self.may_acknowledge = may_acknowledge
        self.problems: list[Problem] = []
        self.wide = True

    def compose(self) -> ComposeResult:
        yield Static("", id="health-status")
        table: RowTable[Text] = RowTable(id="health-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="health-detail")
        yield TranslatedFooter()

    def on_mount(self) -> None:
        table = self.query_one("#health-table", DataTable)
        self.wide = self.app.size.width >= WIDE
        columns = [(N_("SEV"), 4), (N_("HOST"), 12 if self.wide else 8), ("GPU", 3)]
        columns += [(N_("PROBLEM"), 0), (N_("FIRST"), 9)]
        columns += [(N_("LAST"), 9)] if self.wide else []
        columns += [(N_("N"), 4), (N_("ACK"), 3)]
        # A title wider than its column (in Chinese) widens it, so none is cut.
        columns = [(key, max(width, cell_width(_(key))) if width else 0) for key, width in columns]
        fixed = sum(width + 2 for _key, width in columns)  # each cell is padded by one a side
        problem = max(20, min(72, self.app.size.width - fixed - 2))
        for key, width in columns:
            table.add_column(_(key), width=width or problem, key=key)
        self.reload()
        self.set_interval(self.refresh_s, self.reload, name="health")
        if self.refresh_board is not None:
            self.refresh_board()
            self.set_interval(self.refresh_board_s, self.refresh_board, name="health-board")
        table.focus()

    def reload(self) -> None:
        """Read the board again; keep the cursor on the same problem if it is still there."""
        table = self.query_one("#health-table", DataTable)
        now = self.clock()
        chosen = self._selected()
        # One row a problem: keys are unique on the board, and a second one would be
        # refused by the table, so never let one through.
        seen: set[str] = set()
        self.problems = []
        for problem in self.board.problems():
            if problem.key not in seen:
                seen.add(problem.key)
                self.problems.append(problem)
        table.clear()
        for p in self.problems:
            f = p.finding
            style = _STYLE[f.severity]
            cells = [
                Text(_word(f.severity), style),
                Text(clean(f.host, 64)),
                Text("-" if f.gpu is None else str(f.gpu)),
                Text(clean(shown(f.title), 128) + (f" [{_(f.badge)}]" if f.badge else ""), style),
                Text(_ago(now, p.first_seen)),
            ]
            if self.wide:
                cells.append(Text(_ago(now, p.last_seen)))
            cells += [Text(str(p.count)), Text(_("yes") if p.ack else "", "green")]
            table.add_row(*cells, key=p.key)
        if chosen is not None:
            keys = [p.key for p in self.problems]
            if chosen in keys:
                table.move_cursor(row=keys.index(chosen), animate=False)
        self._show_status()
        self._show_detail()

    def _selected_problem(self) -> Problem | None:
        row = self.query_one("#health-table", DataTable).cursor_row
        return self.problems[row] if 0 <= row < len(self.problems) else None

    def _selected(self) -> str | None:
        problem = self._selected_problem()
        return None if problem is None else problem.key

    def _show_status(self) -> None:
        """The counts of the rows listed (one count per row, so they add up to the list)."""
        ready, said = self.note() if self.note is not None else (True, "")
        title = view_title(_("health"))
        line = Text()
        if not ready:
            self.query_one("#health-status", Static).update(title + Text(said, "dim"))
            return
        counts = {s: sum(1 for p in self.problems if p.finding.severity == s) for s in _SEVERITIES}
        if not self.problems:
            line.append(_("No problems"), "bold green")
        for severity in ("crit", "warn", "info"):
            n = counts[severity]
            if n:
                if line:
                    line.append(" · ")
                line.append(_counted(severity, n), _STYLE[severity])
        unknown = self.board.unknown()
        if unknown:
            checks = sorted(
                {
                    _("{check} ({why})").format(check=_(c), why=shown(why))
                    for items in unknown.values()
                    for _gpu, c, why in items
                }
            )
            gpus = sum(len({gpu for gpu, _c, _why in items}) for items in unknown.values())
            listed = _(", ").join(checks)
            not_checked = ngettext(
                "not checked on {n} GPU (unknown, not ok): {checks}",
                "not checked on {n} GPUs (unknown, not ok): {checks}",
                gpus,
            )
            line.append("   " + not_checked.format(n=gpus, checks=listed), "dim")
        if said:
            line.append("   " + _("({note})").format(note=said), "dim")
        self.query_one("#health-status", Static).update(title + line)

    def _show_detail(self) -> None:
        detail = self.query_one("#health-detail", Static)
        problem = self._selected_problem()
        if problem is None:
            ready = self.note()[0] if self.note is not None else True
            passed = _("Every check passed on every host that answered.") if ready else ""
            detail.update(Text(passed, "dim"))
            return
        f = problem.finding
        host = clean(f.host, 64)
        where = host if f.gpu is None else _("{host} GPU {gpu}").format(host=host, gpu=f.gpu)
        text = Text()
        text.append(_("{where}:").format(where=where) + " ", "bold")
        text.append(clean(shown(f.title), 256), _STYLE[f.severity])
        text.append("\n" + _label(N_("meaning")) + clean(shown(f.meaning), 256))
        text.append("\n" + _label(N_("action")))
        text.append(clean(shown(f.action), 256), "bold")
        if f.detail:
            text.append("\n" + _label(N_("figures")) + clean(shown(f.detail), 256))
        n = problem.count
        times = _("once") if n == 1 else _("{n} times").format(n=n)
        seen = _("{times}, first {ago}").format(
            times=times, ago=_ago(self.clock(), problem.first_seen)
        )
        text.append("\n" + _label(N_("seen")) + seen)
        if problem.ack is not None:
            by = _("by {user}: {note}").format(
                user=clean(problem.ack.by, 64), note=clean(problem.ack.note, 200)
            )
            text.append("\n" + _label(N_("ack")) + by, "green")
        detail.update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_acknowledge(self) -> None:
        problem = self._selected_problem()
        if problem is None:
            self.notify(_("No problem selected."), severity="warning")
            return
        refusal = self.may_acknowledge()
        if refusal is not None:
            self.notify(refusal, title=_("cannot acknowledge"), severity="error", markup=False)
            return
        title = clean(shown(problem.finding.title), 128)
        question = Text(_("Acknowledge: {problem}?").format(problem=title) + "\n", "bold")
        question.append(_("It stays acknowledged until it changes."), "")

        def done(note: str | None) -> None:
            if not note:
                return
            if self.acknowledge is not None:
                self.acknowledge(problem, note, self.reload)
            elif isinstance(self.board, HealthBoard) and self.board.acknowledge(
                problem.key, self.user or "you", note, self.clock()
            ):
                self.reload()

        self.app.push_screen(ReasonScreen(question, _("Acknowledge")), done)
