"""Whether a table's columns line up, counted in display cells: what the Chinese
tables' tests check at 80 and 200 columns."""

from __future__ import annotations

import re

from gputui.common.text import cells


def titles_of(header: str) -> list[str]:
    """A header's titles (apart by two spaces or more; one may hold one space)."""
    return [t for t in re.split(r" {2,}", header.strip()) if t]


def grid(lines: list[str]) -> list[list[str]]:
    """Each line as its cells: a wide character, then "" for the cell it covers."""
    out = []
    for line in lines:
        row: list[str] = []
        for char in line:
            row += [char] + [""] * (cells(char) - 1)
        out.append(row)
    return out


def gutters(lines: list[str]) -> int:
    """How many runs of two or more cells are blank on every line, between the first
    and the last cell any line fills: the gaps between a table's columns."""
    rows = grid(lines)
    width = max(len(r) for r in rows)
    blank = [all(c >= len(r) or r[c] == " " for r in rows) for c in range(width)]
    runs, run = 0, 0
    for c, empty in enumerate(blank):
        if empty:
            run += 1
        else:
            runs += run >= 2 and run < c  # not the left margin
            run = 0
    return runs


def assert_in_line(lines: list[str], width: int) -> None:
    """Every line in ``width`` cells; the columns apart on every line alike: as many
    gaps blank on every line as there are columns, less one."""
    assert len(lines) >= 2
    for line in lines:
        assert cells(line) <= width, line
    assert gutters(lines) == len(titles_of(lines[0])) - 1, "\n".join(lines)
