"""``idleheld`` rows on both databases: added batches sum up by hour and usage key, in
SQLite and PostgreSQL alike (the upsert is the same text on both), and
``idle_hours`` reads the hours starting in a range, and only those."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from gputui.scheduler.store.sqlstore import SqlStore

HOUR = 3600
T0 = 1_800_000_000 // HOUR * HOUR
_runs = itertools.count(1)

ROW = st.tuples(
    st.integers(0, 3),  # hour, from T0
    st.sampled_from(["alice", "bob"]),
    st.sampled_from(["", "p1"]),
    st.floats(0, 3600),
    st.floats(0, 1e9),
)


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(ROW, max_size=5), max_size=4), st.integers(0, 4))
def test_batches_add_up_by_hour_and_key_on_both_databases(
    store_on_both: Engine, batches: list[list[tuple[int, str, str, float, float]]], cut: int
) -> None:
    store = SqlStore(store_on_both)
    base = T0 + next(_runs) * 10 * HOUR  # each example its own hours
    want: dict[tuple[int, str, str, str, str], list[float]] = {}
    for batch in batches:
        rows = {(base + h * HOUR, u, "g", p, "a40"): (s, e) for h, u, p, s, e in batch}
        with store.transaction() as tx:
            tx.usage.add_metered([], [], [], [(k, s, e) for k, (s, e) in rows.items()])
        for key, (seconds, joules) in rows.items():
            cell = want.setdefault(key, [0.0, 0.0])
            cell[0] += seconds
            cell[1] += joules
    with store.snapshot() as tx:
        got = tx.usage.idle_hours(base, base + cut * HOUR)
    assert {tuple(r[:5]) for r in got} == {k for k in want if k[0] < base + cut * HOUR}
    for *key, seconds, joules in got:
        cell = want[tuple(key)]  # type: ignore[index]
        assert abs(seconds - cell[0]) <= 1e-9 * max(1.0, cell[0])
        assert abs(joules - cell[1]) <= 1e-9 * max(1.0, cell[1])
