"""The sort marker in a table's header, as htop shows it: ``UTIL▼``.

One place says which column a sort key orders and which way, so the GPU grid and any
other table mark the same column the same way. ``▼``: largest first; ``▲``: smallest
(or A to Z) first.
"""

from __future__ import annotations

from gputui.common.i18n import N_, _
from gputui.common.text import cells

__all__ = ["ASCENDING", "DESCENDING", "marked", "sorted_column"]

DESCENDING = "▼"
ASCENDING = "▲"

# sort key name -> (column title, marker); a key not here marks nothing.
_COLUMNS: dict[str, tuple[str, str]] = {
    "host": (N_("HOST"), ASCENDING),
    "util": (N_("UTIL"), DESCENDING),
    "mem": (N_("MEMORY"), DESCENDING),
    "temp": (N_("TEMP"), DESCENDING),
    "power": (N_("POWER"), DESCENDING),
    # "free" (unclaimed and idle first) orders by no one column: nothing is marked.
}


def sorted_column(sort: str | None) -> tuple[str, str] | None:
    """(column title, marker) that ``sort`` (a sort key's name) orders, or None."""
    return _COLUMNS.get(sort) if sort else None


def marked(title: str, sort: str | None, width: int | None = None) -> str:
    """``title`` (the English one, shown in the chosen language), with the marker when
    ``sort`` orders its column; at most ``width`` cells (the title is cut, never the
    marker)."""
    column = sorted_column(sort)
    shown = _(title)
    if column is None or column[0] != title:
        return shown if width is None else _within(shown, width)
    if width is not None and cells(shown) + 1 > width:
        shown = _within(shown, max(0, width - 1))
    return shown + column[1]


def _within(text: str, width: int) -> str:
    """``text``'s first characters that fit in ``width`` cells (no ellipsis)."""
    if text.isascii():
        return text[:width]
    out, used = [], 0
    for char in text:
        used += cells(char)
        if used > width:
            break
        out.append(char)
    return "".join(out)
