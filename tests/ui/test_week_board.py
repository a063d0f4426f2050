"""The week board's bars match the bookings: on each GPU's line a cell shows a
booking's mark exactly when that booking's window meets the cell (one of them where
two back-to-back bookings share a cell), an active claim's ``*`` where a claim and no
booking meets it, whatever the width, the week and the jobs drawn beside them; by
pool, each cell counts exactly the pool's cards some booking, claim or job meets
there; every line fits the width."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.common.text import cells as cell_len
from gputui.common.text import fit
from gputui.scheduler.policy import bookings as rules
from gputui.scheduler.policy.model import Booked
from gputui.ui.head.view import HeadClaim, HeadGpu, HeadView, Me
from gputui.ui.head.week import board_of, parse_bookings
from gputui.ui.widgets.week_board import (
    COUNTS,
    DAY_S,
    DAYS,
    MANY,
    Bar,
    BoardRow,
    board_lines,
    covered,
    day_cells,
    label_width,
    letters_for,
    pool_rows,
)

SINCE = 1_700_006_400.0  # a midnight (UTC)
WEEK = DAYS * DAY_S


@st.composite
def boards(draw: st.DrawFn) -> tuple[list[BoardRow], list[Bar]]:
    count = draw(st.integers(1, 40))
    pools = draw(
        st.lists(
            st.sampled_from(["a100", "h100", "amd-mi300x", ""]), min_size=count, max_size=count
        )
    )
    whole = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    rows = [
        BoardRow(f"GPU-{i}", f"host{i // 4}:{i % 4}", pools[i], counted=whole[i] or i % 3 != 0)
        for i in range(count)
    ]
    made: list[Booked] = []
    bars: list[Bar] = []
    for ident in range(1, draw(st.integers(0, 10)) + 1):
        cards = draw(st.lists(st.sampled_from(rows), min_size=1, max_size=4, unique=True))
        start = SINCE + draw(st.floats(-2 * DAY_S, WEEK + DAY_S, allow_nan=False))
        end = start + draw(st.floats(60, 4 * DAY_S, allow_nan=False))
        new = Booked(ident, "alice", tuple(r.key for r in cards), start, end)
        if rules.conflict(new, made) is None:  # as the head keeps them: never two at once
            made.append(new)
            kind = "maint" if draw(st.booleans()) and draw(st.booleans()) else "booking"
            bars.append(Bar(kind, ident, new.uuids, start, end, "alice", "note"))
    for ident in range(100, 100 + draw(st.integers(0, 6))):
        cards = draw(st.lists(st.sampled_from(rows), min_size=1, max_size=2, unique=True))
        start = SINCE + draw(st.floats(-DAY_S, WEEK, allow_nan=False))
        end = draw(st.one_of(st.none(), st.floats(start + 60, start + 3 * DAY_S)))
        bars.append(Bar("job", ident, tuple(r.key for r in cards), start, end, "bob"))
    for ident in range(200, 200 + draw(st.integers(0, 6))):
        cards = draw(st.lists(st.sampled_from(rows), min_size=1, max_size=3, unique=True))
        start = SINCE + draw(st.floats(-DAY_S, WEEK, allow_nan=False))
        end = draw(st.one_of(st.none(), st.floats(start + 60, start + 3 * DAY_S)))
        bars.append(Bar("claim", ident, tuple(r.key for r in cards), start, end, "carol"))
    return rows, bars


def _meets(bar: Bar, c: int, cells: int) -> bool:
    end = SINCE + WEEK if bar.end is None else bar.end
    return c in covered(bar.start, end, SINCE, cells)


@settings(max_examples=300)
@given(boards(), st.integers(40, 240))
def test_the_bars_on_each_gpu_are_exactly_its_bookings_windows(
    board: tuple[list[BoardRow], list[Bar]], width: int
) -> None:
    rows, bars = board
    lines = board_lines(rows, bars, SINCE, width)
    assert all(cell_len(line) <= width for line in lines)
    label = label_width(width, rows)
    cells = day_cells(width, label)
    letters = letters_for(bars)
    booked = [b for b in bars if b.booked]
    for i, row in enumerate(rows):
        drawn = lines[1 + i][label + 1 : label + 1 + DAYS * cells]
        on_row = [b for b in booked if row.key in b.rows]
        for c, shown in enumerate(drawn):
            # The bookings whose window meets this cell (back-to-back ones may share one).
            there = [b for b in on_row if c in covered(b.start, b.end or b.start, SINCE, cells)]
            marks = {"#" if b.kind == "maint" else letters[b.ident] for b in there}
            claimed = any(
                _meets(b, c, cells) for b in bars if b.kind == "claim" and row.key in b.rows
            )
            if not there:
                if claimed:
                    assert shown == "*", (row, c, drawn)
                else:
                    assert shown in ".=>", (row, c, drawn)
            elif len(there) == 1:
                assert shown == marks.pop(), (there, c, drawn)
            else:
                assert shown in marks, (there, c, drawn)
    legend = "\n".join(lines[len(rows) + 1 :])
    for bar in bars:
        if bar.booked and width >= 60:
            assert f"b{bar.ident} " in legend


@settings(max_examples=200)
@given(boards(), st.integers(40, 240))
def test_by_pool_each_cell_counts_the_pools_cards_booked_or_held_there(
    board: tuple[list[BoardRow], list[Bar]], width: int
) -> None:
    rows, bars = board
    lines = board_lines(rows, bars, SINCE, width, pools=True)
    assert all(cell_len(line) <= width for line in lines)
    pools = pool_rows(rows)
    counted = [r for r in rows if r.counted]  # (a card in MIG mode: its slices count)
    assert sorted(p.pool for p in pools) == sorted({r.pool for r in counted})
    assert sum(len(p.keys) for p in pools) == len(counted)
    label = label_width(width, pools)
    cells = day_cells(width, label)
    for i, pool in enumerate(pools):
        line = lines[1 + i]
        assert line[:label] == fit(pool.label, label)
        drawn = line[label + 1 : label + 1 + DAYS * cells]
        assert len(drawn) == DAYS * cells
        for c, shown in enumerate(drawn):
            taken = {k for b in bars if _meets(b, c, cells) for k in b.rows if k in pool.keys}
            n = len(taken)
            want = "." if n == 0 else COUNTS[n - 1] if n <= len(COUNTS) else MANY
            assert shown == want, (pool.pool, c, n, drawn)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "id": st.integers(1, 50),
                "state": st.sampled_from(["active", "waiting", "released"]),
                "gpu_uuids": st.lists(st.sampled_from(["GPU-0", "GPU-1", "GPU-2"]), max_size=3),
                "granted_at": st.one_of(st.none(), st.floats(SINCE - DAY_S, SINCE + WEEK)),
                "expires_at": st.one_of(st.none(), st.floats(SINCE - DAY_S, SINCE + 2 * WEEK)),
                "user": st.just("carol"),
            }
        ),
        max_size=5,
        unique_by=lambda c: c["id"],
    )
)
def test_active_claims_the_head_pushed_become_claim_bars(claims: list[dict[str, object]]) -> None:
    parsed = [c for c in (HeadClaim.parse(raw) for raw in claims) if c is not None]
    view = HeadView(me=Me(0, "root", True), claims=tuple(parsed))
    _rows, bars = board_of(view, [])
    got = {b.ident for b in bars if b.kind == "claim"}
    want = {
        c.id
        for c in parsed
        if c.state == "active"
        and c.gpu_uuids
        and c.granted_at is not None
        and (c.expires_at is None or c.expires_at > c.granted_at)
    }
    assert got == want
    for bar in bars:
        claim = next(c for c in parsed if c.id == bar.ident)
        assert (bar.rows, bar.start, bar.end) == (
            claim.gpu_uuids,
            claim.granted_at,
            claim.expires_at,
        )


@given(st.floats(SINCE - WEEK, SINCE + 2 * WEEK), st.floats(1, WEEK), st.integers(2, 40))
def test_a_cell_is_covered_exactly_when_the_window_meets_it(
    start: float, length: float, cells: int
) -> None:
    end = start + length
    size = DAY_S / cells
    got = set(covered(start, end, SINCE, cells))
    for c in range(DAYS * cells):
        t0, t1 = SINCE + c * size, SINCE + (c + 1) * size
        meets = start < t1 and t0 < end
        # Floating-point edges aside (a window ending within a nanosecond of a cell).
        if abs(end - t0) > 1e-6 and abs(start - t1) > 1e-6:
            assert (c in got) == meets, (c, start, end)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "id": JSON | st.integers(0, 2**60),
                "start": JSON | st.floats(0, 2e10),
                "end": JSON | st.floats(0, 2e10),
                "gpu_uuids": JSON | st.lists(st.text(max_size=200), max_size=4),
                "user": JSON,
                "note": JSON | st.just("evil\x1b[31m [bold]note[/]\u202e"),
                "maint": JSON,
                "state": JSON,
            },
        ),
        max_size=6,
    )
)
def test_a_hostile_bookings_answer_gives_clean_bars_or_none(items: list[object]) -> None:
    for bar in parse_bookings({"bookings": items}):
        assert 1 <= bar.ident <= 2**53 and bar.end is not None and bar.start < bar.end
        for text in (bar.user, bar.note, *bar.rows):
            assert not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in text)
            assert "\u202e" not in text
    assert parse_bookings(None) == parse_bookings({"bookings": "x"}) == []


def test_a_cards_mig_slices_are_lines_under_it_named_by_profile() -> None:
    def gpu(uuid: str, index: int, state: str = "free") -> HeadGpu:
        return HeadGpu(uuid, "gpu01", index, "a100", state, None)

    view = HeadView(
        me=Me(0, "root", True),
        gpus=(
            gpu("GPU-b", 1),
            gpu("MIG-z", 0),
            gpu("GPU-a", 0),  # (in MIG mode: its slices say so, whatever its state)
            gpu("MIG-y", 0),
        ),
    )
    rows, _bars = board_of(view, [], {"MIG-y": "3g.40gb", "MIG-z": "1g.10gb"})
    assert [(r.label, r.counted) for r in rows] == [
        ("gpu01:0", False),
        ("└3g.40gb", True),
        ("└1g.10gb", True),
        ("gpu01:1", True),
    ]
    (pool,) = pool_rows(rows)
    assert pool.label == "a100 (3)"
