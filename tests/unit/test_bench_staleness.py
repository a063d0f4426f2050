"""``bench/consoles.py``'s staleness: the time-weighted quantile of the age of what a
console held, computed from when its samples arrived (``age_quantile``), against the
same age looked at on a fine clock."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from consoles import age_quantile

STEP = 0.001
_SPAN = st.tuples(
    st.integers(0, 2000),  # from, in hundredths of a second
    st.integers(1, 300),  # how long it was held
    st.integers(0, 500),  # how old the sample was when it came
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_SPAN, min_size=1, max_size=6), st.sampled_from([0.5, 0.9, 0.99]))
def test_the_quantile_is_the_age_a_clock_looking_often_would_see(
    raw: list[tuple[int, int, int]], q: float
) -> None:
    spans = [(a / 100, (a + n) / 100, (a - age) / 100) for a, n, age in raw]
    looked: list[float] = []
    for start, end, taken in spans:
        steps = round((end - start) / STEP)
        looked += [start + (i + 0.5) * STEP - taken for i in range(steps)]
    looked.sort()
    seen = looked[math.ceil(q * len(looked)) - 1]
    found = age_quantile(spans, q)
    assert found is not None
    assert abs(found - seen) <= STEP


def test_nothing_held_has_no_quantile() -> None:
    assert age_quantile([], 0.99) is None
    assert age_quantile([(5.0, 5.0, 1.0)], 0.99) is None
