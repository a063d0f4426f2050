"""A line of styled segments built straight into a ``Strip``: pieces in one style
joined into one segment, control codes removed, and the line cut (with "…" if
asked) or padded to exactly its width.

What the grid's lines are drawn into (``grid_render``), kept apart from what they
show: no Rich ``Text`` and no second styling pass, as the visible lines are redrawn
every second.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.control import strip_control_codes
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip


class LineBuilder:
    """A line being built: segments and how many cells they take.

    Pieces in the same style (the same ``Style`` object) one after the other are
    joined into one segment: a GPU line is some twenty pieces in a handful of
    styles, and every segment costs again in Textual's compositor each frame.
    """

    __slots__ = ("_style", "_text", "base", "cells", "segments")

    def __init__(self, base: Style) -> None:
        self.base = base
        self.segments: list[Segment] = []
        self.cells = 0
        self._text: list[str] = []
        self._style: Style | None = None

    def add(self, text: str, style: Style) -> None:
        if text:
            if style is not self._style:
                self._flush()
                self._style = style
            self._text.append(text)

    def used(self) -> int:
        """Cells taken so far, pieces not yet joined included."""
        return self.cells + sum(cell_len(text) for text in self._text)

    def _flush(self) -> None:
        if self._text:
            text = strip_control_codes("".join(self._text))
            self._text = []
            if text:
                self.segments.append(Segment(text, self._style))
                self.cells += cell_len(text)

    def strip(
        self, width: int, fill: Style, *, ellipsis: bool = False, over: Style | None = None
    ) -> Strip:
        """Exactly ``width`` cells: cut (with "…" if ``ellipsis``) or padded with ``fill``.

        ``over`` is laid over the text (not the padding), as Rich's ``stylize`` would.
        """
        self._flush()
        segments = self.segments
        if self.cells > width:
            segments = _cut(segments, width, ellipsis=ellipsis)
        if over is not None:
            segments = [Segment(t, over if s is None else s + over) for t, s, _ in segments]
        if self.cells < width:
            segments.append(Segment(" " * (width - self.cells), fill))
        return Strip(segments, width)


def _cut(segments: list[Segment], width: int, *, ellipsis: bool) -> list[Segment]:
    keep = width - 1 if ellipsis else width
    result: list[Segment] = []
    used = 0
    tail = Style()
    for segment in segments:
        text, style, _ = segment
        cells = cell_len(text)
        if used + cells <= keep:
            result.append(segment)
            used += cells
            continue
        if keep > used:
            result.append(Segment(set_cell_size(text, keep - used), style))
        tail = style or tail  # the style of the first cell cut off
        break
    if ellipsis:
        # As Rich's ``Text.truncate``: "…" takes the style of the cell it replaces.
        result.append(Segment("…", tail))
    return result
