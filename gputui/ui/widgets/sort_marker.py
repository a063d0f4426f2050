"""The sort marker in a table's header, as htop shows it: ``UTIL▼``.

One place says which column a sort key orders and which way, so the GPU grid and any
other table mark the same column the same way. ``▼``: largest first; ``▲``: smallest
(or A to Z) first.
"""

from __future__ import annotations

__all__ = ["ASCENDING", "DESCENDING", "marked", "sorted_column"]

DESCENDING = "▼"
ASCENDING = "▲"

# sort key name -> (column title, marker); a key not here marks nothing.
_COLUMNS: dict[str, tuple[str, str]] = {
    "host": ("HOST", ASCENDING),
    "util": ("UTIL", DESCENDING),
    "mem": ("MEMORY", DESCENDING),
    "temp": ("TEMP", DESCENDING),
    "power": ("POWER", DESCENDING),
    # "free" (unclaimed and idle first) orders by no one column: nothing is marked.
}


def sorted_column(sort: str | None) -> tuple[str, str] | None:
    """(column title, marker) that ``sort`` (a sort key's name) orders, or None."""
    return _COLUMNS.get(sort) if sort else None


def marked(title: str, sort: str | None, width: int | None = None) -> str:
    """``title``, with the marker when ``sort`` orders its column; at most ``width``
    cells (the title is cut, never the marker)."""
    column = sorted_column(sort)
    if column is None or column[0] != title:
        return title if width is None else title[:width]
    if width is not None and len(title) + 1 > width:
        title = title[: max(0, width - 1)]
    return title + column[1]
