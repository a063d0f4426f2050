"""The week board: GPUs (or pools) down the side, seven days across, bookings, claims
and jobs as bars.

The layout is plain functions (``day_cells``, ``covered``, ``board_lines``) so a test
checks that each bar covers exactly the cells its window meets; the widget only
shows the lines it is given. A booking draws its letter (``A``, ``B`` … in the
legend under the board with its id, user, window and note), a maintenance window
``#``, an active claim ``*`` up to its expiry (to the board's edge when it has
none), a running job ``=`` up to its time limit's end (``>`` to the board's edge
when it has none), a waiting job ``~`` (dim) from its estimated start to that plus
its time limit, on the cards the head's projection gives it (``explain``'s: as if
everything ran to its time limit; the cards it gets may differ), with a legend line
each. A booking wins a cell over a claim or a job (preemptible work on a booked card
before the start), and anything held or booked over an estimate: the board shows
what is promised first, what is guessed last.

By pool (``pools=True``), a pool's line counts its cards booked or held in each
cell, by any bar: ``.`` none, ``1`` … ``9``, then ``a`` (10) … ``z`` (35), ``+``
more. Its label names the pool and how many cards it has. Under a pool with waiting
jobs estimated this week, a ``~`` line counts their cards the same way.

Text is fitted by display cells (``gputui.common.text``), so the board's lines stay
in their width with Chinese day names and legend.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from gputui.common.i18n import N_, _, ngettext
from gputui.common.text import cells as cell_width
from gputui.common.text import cut, fit

DAYS = 7
DAY_S = 86_400.0
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
MAINT = "#"
JOB = "="
OPEN_JOB = ">"
CLAIM = "*"
ESTIMATE = "~"
"""A waiting job, from its estimated start (drawn dim)."""
FREE = "."
COUNTS = "123456789abcdefghijklmnopqrstuvwxyz"
"""A pool's count in a cell: ``COUNTS[n - 1]`` for 1 … 35 cards; ``+`` past that."""
MANY = "+"
ESTIMATE_RUN = re.escape(ESTIMATE) + "+"
ESTIMATES_LISTED = 12
"""Legend lines for estimated jobs at most (then one saying how many more)."""

WEEKDAYS = (N_("Mon"), N_("Tue"), N_("Wed"), N_("Thu"), N_("Fri"), N_("Sat"), N_("Sun"))
"""Day names by ``tm_wday`` (Monday 0), looked up where drawn."""
MONTHS = (
    N_("Jan"), N_("Feb"), N_("Mar"), N_("Apr"), N_("May"), N_("Jun"),
    N_("Jul"), N_("Aug"), N_("Sep"), N_("Oct"), N_("Nov"), N_("Dec"),
)  # fmt: skip
NARROW_DAYS = N_("MTWTFSS")
"""One character per day, Monday first, for a narrow board's header (``M07``); a
translation gives seven characters too."""


def weekday(t: float) -> str:
    """The local day name of ``t`` in the chosen language (``Mon``, ``周一``)."""
    return _(WEEKDAYS[time.localtime(t).tm_wday])


def narrow_day(wday: int) -> str:
    names = _(NARROW_DAYS)
    return names[wday] if len(names) == DAYS else NARROW_DAYS[wday]


def day_text(t: float) -> str:
    """``Thu 03 Dec`` (in Chinese ``12月03日 周四``)."""
    day = time.localtime(t)
    return _("{weekday} {day} {month}").format(
        weekday=_(WEEKDAYS[day.tm_wday]), day=f"{day.tm_mday:02d}", month=_(MONTHS[day.tm_mon - 1])
    )


def moment_text(t: float) -> str:
    """``Thu 14:00`` (in Chinese ``周四 14:00``)."""
    return _("{weekday} {time}").format(
        weekday=weekday(t), time=time.strftime("%H:%M", time.localtime(t))
    )


@dataclass(frozen=True, slots=True)
class BoardRow:
    """A line of the board: one GPU."""

    key: str
    """Its uuid: what bars name."""
    label: str
    """``host:index`` (a MIG slice: ``└`` and its profile, under its card)."""
    pool: str = ""
    counted: bool = True
    """Counted among its pool's cards (a card in MIG mode is not: its slices are)."""


@dataclass(frozen=True, slots=True)
class Bar:
    """A booking, a claim or a job on some GPUs from ``start`` to ``end``."""

    kind: str
    """``booking``, ``maint``, ``claim``, ``job`` or ``estimate`` (a waiting job at
    its estimated start)."""
    ident: int
    rows: tuple[str, ...]
    start: float
    end: float | None
    """None: a job or claim with no end set (it runs on past the board's edge)."""
    user: str = ""
    note: str = ""
    gpus: int = 0
    """How many GPUs (an estimate's: what the job asks for; else: ``len(rows)``)."""

    @property
    def booked(self) -> bool:
        """A booking (maintenance too), not something held now."""
        return self.kind in ("booking", "maint")

    @property
    def estimated(self) -> bool:
        """A waiting job at its estimated start: a guess, not held or promised."""
        return self.kind == "estimate"


@dataclass(frozen=True, slots=True)
class PoolRow:
    """A line of the board by pool: the pool and its cards (the GPU rows' keys)."""

    pool: str
    keys: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.pool or '-'} ({len(self.keys)})"


def pool_rows(rows: Sequence[BoardRow]) -> list[PoolRow]:
    """The pools of ``rows``, by name, each with its cards."""
    out: dict[str, list[str]] = {}
    for row in rows:
        if row.counted:
            out.setdefault(row.pool, []).append(row.key)
    return [PoolRow(pool, tuple(keys)) for pool, keys in sorted(out.items())]


def day_cells(width: int, label: int) -> int:
    """Cells per day for a board ``width`` cells wide with a ``label`` column (at
    least 2)."""
    return max(2, (width - label - 1) // DAYS)


def label_width(width: int, rows: Sequence[BoardRow | PoolRow]) -> int:
    """The label column: as wide as the longest label, at most 16 (a GPU's: 10 under
    120 columns; a pool's name and count keep 16, there are few pools)."""
    pools = bool(rows) and isinstance(rows[0], PoolRow)
    most = 16 if width >= 120 or pools else 10
    return max(4, min(most, max((cell_width(r.label) for r in rows), default=4)))


def covered(start: float, end: float, since: float, cells: int) -> range:
    """The board cells (0 .. 7 * cells - 1) that ``[start, end)`` meets, for a board
    from ``since`` with ``cells`` per day: each cell is its own ``[t0, t1)``."""
    size = DAY_S / cells
    total = DAYS * cells
    if end <= start or end <= since or start >= since + DAYS * DAY_S:
        return range(0)
    first = max(0, int((start - since) // size))
    last = min(total, int(-((since - end) // size)))  # ceiling: a cell it only enters counts
    return range(first, last)


def bar_cells(bar: Bar, since: float, cells: int) -> range:
    """The cells ``bar`` covers (one with no end: to the board's edge)."""
    end = since + DAYS * DAY_S if bar.end is None else bar.end
    return covered(bar.start, end, since, cells)


def letters_for(bars: Sequence[Bar]) -> dict[int, str]:
    """Each booking's letter, in order of start (then id); maintenance ones get ``#``."""
    out: dict[int, str] = {}
    ordered = sorted((b for b in bars if b.kind == "booking"), key=lambda b: (b.start, b.ident))
    for i, bar in enumerate(ordered):
        out[bar.ident] = LETTERS[i % len(LETTERS)]
    return out


_DRAW_ORDER = {"estimate": -1, "job": 0, "claim": 1, "maint": 2, "booking": 2}


def row_cells(row: BoardRow, bars: Sequence[Bar], since: float, cells: int) -> list[str]:
    """What each cell of ``row`` shows: a booking's letter, ``#``, a claim, a job, an
    estimate, or ``.``."""
    out = [FREE] * (DAYS * cells)
    letters = letters_for(bars)
    # Estimates first, then jobs, then claims, then bookings: a booking wins its cells.
    for bar in sorted(bars, key=lambda b: _DRAW_ORDER.get(b.kind, 0)):
        if row.key not in bar.rows:
            continue
        if bar.estimated:
            mark = ESTIMATE
        elif bar.kind == "job":
            mark = JOB if bar.end is not None else OPEN_JOB
        elif bar.kind == "claim":
            mark = CLAIM
        elif bar.kind == "maint":
            mark = MAINT
        else:
            mark = letters.get(bar.ident, "?")
        for i in bar_cells(bar, since, cells):
            out[i] = mark
    return out


def count_mark(count: int) -> str:
    """A pool cell's character for ``count`` cards booked or held."""
    if count <= 0:
        return FREE
    return COUNTS[count - 1] if count <= len(COUNTS) else MANY


def pool_counts(
    pool: PoolRow, bars: Sequence[Bar], since: float, cells: int, *, estimated: bool = False
) -> list[int]:
    """How many of ``pool``'s cards some bar (a booking, claim or job) covers, per cell
    (``estimated``: some waiting job's estimate)."""
    mine = set(pool.keys)
    taken: list[set[str]] = [set() for _ in range(DAYS * cells)]
    for bar in bars:
        if bar.estimated != estimated:
            continue
        cards = mine.intersection(bar.rows)
        if not cards:
            continue
        for i in bar_cells(bar, since, cells):
            taken[i] |= cards
    return [len(cards) for cards in taken]


def header(since: float, cells: int, label: int) -> str:
    """Day names over their columns (``Mon 07``; ``M07`` where a day is narrow)."""
    parts = []
    for d in range(DAYS):
        at = since + d * DAY_S + 3600  # (past a DST change at 00:00)
        day = time.localtime(at)
        date = f"{day.tm_mday:02d}"
        name = (
            f"{_(WEEKDAYS[day.tm_wday])} {date}" if cells >= 7 else narrow_day(day.tm_wday) + date
        )
        parts.append(fit(name, cells))
    return " " * (label + 1) + "".join(parts)


def legend(bars: Sequence[Bar], width: int) -> list[str]:
    """One line per booking on the board: its letter, id, user, window and note."""
    letters = letters_for(bars)
    out = []
    for bar in sorted((b for b in bars if b.booked), key=lambda b: (b.start, b.ident)):
        first, last = moment_text(bar.start), moment_text(bar.end or bar.start)
        if bar.kind == "maint":
            line = _("{mark} b{ident} {user} maintenance {first}-{last}").format(
                mark=MAINT, ident=bar.ident, user=bar.user, first=first, last=last
            )
        else:
            line = _("{mark} b{ident} {user} {count} GPU {first}-{last}").format(
                mark=letters[bar.ident],
                ident=bar.ident,
                user=bar.user,
                count=len(bar.rows),
                first=first,
                last=last,
            )
        if bar.note:
            line += f" {bar.note}"
        out.append(cut(line, width))
    return out + estimate_legend(bars, width)


def estimate_legend(bars: Sequence[Bar], width: int) -> list[str]:
    """One line per waiting job estimated on the board, soonest first (at most
    ``ESTIMATES_LISTED``, then how many more): its id, user, GPUs, window and name."""
    shown = sorted((b for b in bars if b.estimated), key=lambda b: (b.start, b.ident))
    out = []
    for bar in shown[:ESTIMATES_LISTED]:
        count = bar.gpus or len(bar.rows)
        if bar.end is None:
            line = _("{mark} job {ident} {user} {count} GPU est. from {first}, no limit").format(
                mark=ESTIMATE,
                ident=bar.ident,
                user=bar.user,
                count=count,
                first=moment_text(bar.start),
            )
        else:
            line = _("{mark} job {ident} {user} {count} GPU est. {first}-{last}").format(
                mark=ESTIMATE,
                ident=bar.ident,
                user=bar.user,
                count=count,
                first=moment_text(bar.start),
                last=moment_text(bar.end),
            )
        if bar.note:
            line += f" {bar.note}"
        out.append(cut(line, width))
    more = len(shown) - ESTIMATES_LISTED
    if more > 0:
        out.append(
            cut(
                ngettext(
                    "{mark} … and {n} more waiting job estimated",
                    "{mark} … and {n} more waiting jobs estimated",
                    more,
                ).format(mark=ESTIMATE, n=more),
                width,
            )
        )
    return out


def board_lines(
    rows: Sequence[BoardRow],
    bars: Sequence[Bar],
    since: float,
    width: int,
    *,
    pools: bool = False,
    note: str | None = None,
) -> list[str]:
    """The whole board in ``width`` cells: the day header, one line per GPU (per pool
    with ``pools``), the key to its marks (``note``: what the board lacks, under it),
    the legend."""
    lines: list[str] = []
    estimate_key = ""
    if pools:
        by_pool = pool_rows(rows)
        label = label_width(width, by_pool)
        cells = day_cells(width, label)
        lines.append(cut(header(since, cells, label), width))
        for pool in by_pool:
            counts = pool_counts(pool, bars, since, cells)
            drawn = "".join(count_mark(n) for n in counts)
            lines.append(cut(fit(pool.label, label) + " " + drawn, width))
            guessed = pool_counts(pool, bars, since, cells, estimated=True)
            if any(guessed):
                drawn = "".join(count_mark(n) for n in guessed)
                lines.append(cut(fit(" " + ESTIMATE, label) + " " + drawn, width))
        key = _("1-9, a=10 … z=35: cards booked or held  . none")
        if any(b.estimated for b in bars):
            estimate_key = _("~ line: cards of waiting jobs at their estimated start")
    else:
        label = label_width(width, rows)
        cells = day_cells(width, label)
        lines.append(cut(header(since, cells, label), width))
        for row in rows:
            drawn = "".join(row_cells(row, bars, since, cells))
            lines.append(cut(fit(row.label, label) + " " + drawn, width))
        key = _("= job  > job, no limit  * claim  # maintenance  . free")
        if any(b.estimated for b in bars):
            estimate_key = _(
                "~ waiting job, estimated (if all runs to its time limit; cards may differ)"
            )
    lines.append(cut(key, width))
    if estimate_key:
        lines.append(cut(estimate_key, width))
    if note:
        lines.append(cut(note, width))
    lines.extend(legend(bars, width))
    return lines


class WeekBoard(Static):
    """Shows the lines ``board_lines`` made (the screen gives them; no I/O here)."""

    DEFAULT_CSS = """
    WeekBoard { height: auto; }
    """

    def show(self, lines: Sequence[str]) -> None:
        text = Text(no_wrap=True, overflow="crop", end="")
        for i, line in enumerate(lines):
            if i:
                text.append("\n")
            text.append(line, "bold" if i == 0 else "")
        text.highlight_regex(ESTIMATE_RUN, "dim")  # (a guess, drawn fainter than what is held)
        self.update(text)
