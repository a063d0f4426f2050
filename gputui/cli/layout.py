"""How the verbs' tables fit a terminal: cut the free-text columns, then leave out the
least important ones, never wrap a row by accident.

The width is ``COLUMNS`` when it is set, else the terminal's when the output is one;
output into a pipe or a file is not cut (``terminal_width`` is None), so a script gets
whole rows (and ``--json`` gets everything). Each table names its columns' importance:
``flex`` columns (free text: a reason, a note, a name) are cut with "…" down to their
least width first, then ``drop`` columns are left out in that order. Prose lines
(a problem's meaning, a timeline entry) are wrapped with a hanging indent instead.

Stdlib only: a scheduler verb must stay light.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Mapping, Sequence

SEP = "  "
MIN_WIDTH, MAX_WIDTH = 20, 10_000
"""A ``COLUMNS`` outside these is not believed (the terminal's size is used)."""


def terminal_width() -> int | None:
    """The width to fit, in cells: ``COLUMNS``, else the terminal's; None: not a terminal."""
    text = os.environ.get("COLUMNS", "").strip()
    if text.isdigit() and MIN_WIDTH <= int(text) <= MAX_WIDTH:
        return int(text)
    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):  # no stdout, or a closed one
        return None
    try:
        columns = os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return 80
    return columns if MIN_WIDTH <= columns <= MAX_WIDTH else 80


def cells(text: str) -> int:
    """Terminal cells ``text`` takes: wide (East Asian) characters count two."""
    if text.isascii():
        return len(text)
    return sum(
        0
        if unicodedata.combining(ch)
        else 2
        if unicodedata.east_asian_width(ch) in ("W", "F")
        else 1
        for ch in text
    )


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, ending in "…" when something was cut."""
    if cells(text) <= width:
        return text
    if width <= 0:
        return ""
    out, used = [], 0
    for ch in text:
        size = cells(ch)
        if used + size > width - 1:
            break
        out.append(ch)
        used += size
    return "".join(out) + "…"


def pad(text: str, width: int, *, right: bool = False) -> str:
    gap = " " * max(0, width - cells(text))
    return gap + text if right else text + gap


def fit_widths(
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    flex: Mapping[int, int] | None = None,
    drop: Sequence[int] = (),
) -> dict[int, int]:
    """The columns kept (by index, in order) and the width of each, for ``width`` cells.

    ``flex``: column -> the least width it may be cut to (never below its header's);
    ``drop``: the columns that may be left out, the first to go first."""
    return _fit([[cells(c) for c in row] for row in rows], width, flex or {}, drop)


def _fit(
    sizes: Sequence[Sequence[int]], width: int | None, flex: Mapping[int, int], drop: Sequence[int]
) -> dict[int, int]:
    """``fit_widths`` from each cell's size in cells (worked out once, not per try)."""
    widest = [max(size[i] for size in sizes) for i in range(len(sizes[0]))] if sizes else []
    kept = list(range(len(widest)))
    while True:
        widths = {i: widest[i] for i in kept}
        over = sum(widths.values()) + len(SEP) * (len(kept) - 1) - (width or 0)
        if width is None or over <= 0:
            return widths
        floor = {i: max(least, sizes[0][i]) for i, least in flex.items() if i in widths}
        while over > 0:  # the widest cut by one cell at a time: the cuts come out even
            slack = [i for i in floor if widths[i] > floor[i]]
            if not slack:
                break
            most = max(slack, key=lambda i: widths[i])
            widths[most] -= 1
            over -= 1
        gone = next((i for i in drop if i in kept), None)
        if over <= 0 or gone is None:
            return widths
        kept.remove(gone)


def table_lines(
    rows: Sequence[Sequence[str]],
    widths: Mapping[int, int],
    width: int | None,
    *,
    right: Sequence[int] = (),
) -> list[str]:
    """The rows in ``widths``' columns, each cell cut to its column; every line in
    ``width`` cells (a last resort cut for a terminal too narrow for any table)."""
    return _lines(rows, [[cells(c) for c in row] for row in rows], widths, width, right)


def _lines(
    rows: Sequence[Sequence[str]],
    sizes: Sequence[Sequence[int]],
    widths: Mapping[int, int],
    width: int | None,
    right: Sequence[int],
) -> list[str]:
    """``table_lines`` from each cell's size: a cell that fits is padded, not measured
    again, and a line known to fit is not cut (a queue of thousands of jobs)."""
    fits = width is None or sum(widths.values()) + len(SEP) * (len(widths) - 1) <= width
    on_right = frozenset(right)
    out = []
    for row, size in zip(rows, sizes, strict=True):
        parts = []
        for i, w in widths.items():
            text, used = row[i], size[i]
            if used > w:
                text = cut(text, w)
                used = cells(text)
            gap = " " * (w - used)
            parts.append(gap + text if i in on_right else text + gap)
        line = SEP.join(parts).rstrip()
        out.append(line if fits else cut(line, width or 0))
    return out


def fit_table(
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    flex: Mapping[int, int] | None = None,
    drop: Sequence[int] = (),
    right: Sequence[int] = (),
) -> list[str]:
    """``rows`` (the header first) as lines of at most ``width`` cells (None: any)."""
    sizes = [[cells(c) for c in row] for row in rows]
    widths = _fit(sizes, width, flex or {}, drop)
    return _lines(rows, sizes, widths, width, right)


def wrap(text: str, width: int | None, indent: int) -> list[str]:
    """A prose line in ``width`` cells, the lines after the first indented by ``indent``
    (None: one line, as it is)."""
    if width is None or cells(text) <= width:
        return [text]
    import textwrap  # only a line too long for the terminal needs it

    hang = " " * min(indent, width // 2)
    lines = textwrap.wrap(
        text, width, subsequent_indent=hang, break_long_words=True, break_on_hyphens=False
    )
    return [cut(line, width) for line in lines] or [""]
