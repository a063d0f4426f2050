"""The key reference, built from the bindings themselves so it cannot drift."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.common.i18n import _

HelpSection = tuple[str, Sequence[tuple[str, str]]]

_KEY_NAMES = {
    "up": "↑",
    "down": "↓",
    "left": "←",
    "right": "→",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "home": "Home",
    "end": "End",
    "enter": "Enter",
    "space": "Space",
    "escape": "Esc",
    "slash": "/",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "question_mark": "?",
    "colon": ":",
    "tab": "Tab",
    "ctrl+p": "Ctrl+P",
    "ctrl+q": "Ctrl+Q",
}


def key_label(keys: str) -> str:
    """``"up,k"`` -> ``"↑ k"``: how a person would read a binding's keys."""
    return " ".join(_KEY_NAMES.get(key, key) for key in keys.split(","))


def section(title: str, bindings: Sequence[BindingType]) -> HelpSection:
    """A help section from a widget's ``BINDINGS`` (only ``Binding`` objects, described)."""
    rows = [
        (key_label(b.key), b.tooltip or b.description)
        for b in bindings
        if isinstance(b, Binding) and b.description
    ]
    return title, rows


class HelpScreen(ModalScreen[None]):
    """Every key, by where it works; Esc, q or ? closes."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, sections: Sequence[HelpSection]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right", style="bold", no_wrap=True)
        table.add_column()
        for i, (title, rows) in enumerate(self.sections):
            if i:
                table.add_row("", "")
            table.add_row("", Text(title, style="bold underline"))
            for keys, description in rows:
                table.add_row(Text(keys), Text(description))
        with VerticalScroll(id="help-dialog"):
            yield Static(Text(_("gputui keys"), style="bold"), id="help-title")
            yield Static(table, id="help-table")
            yield Static(Text(_("Esc, q or ? to close"), style="dim"), id="help-hint")

    def action_close(self) -> None:
        self.dismiss(None)
