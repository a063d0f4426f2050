"""The keys every table of rows in the console answers to, in one place.

A ``RowTable`` is a ``DataTable`` with a row cursor that also moves as in less, vim
and htop: ``j``/``k`` down and up, ``Home``/``End`` to the first and last row
(Textual's own Home/End scroll sideways). The queue, audit and health tables and
the process table are ``RowTable``s, so a key learnt on one works on all.

A text cell of a one-line row that does not fit its column ends in ``…``: Textual
cut it mid-word where nothing showed it was cut ("it gets S" of "it gets SIGTERM").

Lines are drawn again once the columns' widths are measured. Textual measures them
when the table is idle, after the rows came or a cell grew, but keys the lines it
drew by a count of changes that its measuring does not move: a line drawn before
kept the old widths until the next change (a folded array id or a TIME past a day
stayed cut).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, TypeVar

from rich.text import Text, TextType
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

CellType = TypeVar("CellType")

ROW_KEYS: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False, tooltip="Next row"),
    Binding("k", "cursor_up", "Up", show=False, tooltip="Previous row"),
    Binding("home", "scroll_top", "First", show=False, tooltip="First row"),
    Binding("end", "scroll_bottom", "Last", show=False, tooltip="Last row"),
]
"""The row keys, as the help lists them (with the arrows and Page Up/Down)."""


class RowTable(DataTable[CellType]):
    """A ``DataTable`` that answers ``ROW_KEYS`` as well as the arrows."""

    BINDINGS: ClassVar[list[BindingType]] = ROW_KEYS
    _measured: tuple[int, ...] = ()
    """The columns' widths when the lines were last drawn again."""

    def add_row(
        self,
        *cells: CellType,
        height: int | None = 1,
        key: str | None = None,
        label: TextType | None = None,
    ) -> RowKey:
        if height == 1:
            for cell in cells:
                if isinstance(cell, Text):
                    cell.no_wrap, cell.overflow = True, "ellipsis"
        return super().add_row(*cells, height=height, key=key, label=label)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(new_rows)
        widths = tuple(column.content_width for column in self.ordered_columns)
        if widths != self._measured:
            self._measured = widths
            self._update_count += 1  # what Textual's caches of drawn lines are keyed by
            self.refresh()
