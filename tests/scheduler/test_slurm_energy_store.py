"""``slurm_energy`` rows on both databases: added batches sum up by hour and job.

What the relaying head's Slurm meter hands the writer (``add_slurm_energy``) adds to
the row of its hour and job, in SQLite and PostgreSQL alike (the upsert is the same
text on both); a per-node share anywhere marks the row; a job id past 2^31 (Slurm's
are 32-bit unsigned) is kept whole; ``slurm_energy`` reads the hours starting in a
range, and only those.
"""

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
    st.sampled_from([7, 2**31 + 5, 2**32 - 2]),  # job (offset per example below)
    st.floats(0, 1e6),
    st.floats(0, 1e6),
    st.floats(0, 1e9),
    st.booleans(),
)


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(ROW, max_size=5), max_size=4), st.integers(0, 4))
def test_batches_add_up_by_hour_and_job_on_both_databases(
    store_on_both: Engine,
    batches: list[list[tuple[int, int, float, float, float, bool]]],
    cut: int,
) -> None:
    store = SqlStore(store_on_both)
    base = T0 + next(_runs) * 10 * HOUR  # each example its own hours
    want: dict[tuple[int, int], list[float]] = {}
    for batch in batches:
        rows = {}  # one row a key a batch, as the meter hands them
        for h, job, held, busy, joules, split in batch:
            rows[(base + h * HOUR, job)] = (held, busy, joules, split)
        with store.transaction() as tx:
            tx.usage.add_slurm_energy(
                [(hour, job, "alice", "gpu", *v) for (hour, job), v in rows.items()]
            )
        for key, (held, busy, joules, split) in rows.items():
            cell = want.setdefault(key, [0.0, 0.0, 0.0, False])
            cell[0] += held
            cell[1] += busy
            cell[2] += joules
            cell[3] = cell[3] or split
    with store.snapshot() as tx:
        got = tx.usage.slurm_energy(base, base + cut * HOUR)
    assert {(h, j) for h, j, *_ in got} == {k for k in want if k[0] < base + cut * HOUR}
    for hour, job, user, partition, held, busy, joules, split in got:
        cell = want[(hour, job)]
        assert (user, partition, split) == ("alice", "gpu", cell[3])
        for value, expected in zip((held, busy, joules), cell[:3], strict=True):
            assert abs(value - expected) <= 1e-9 * max(1.0, expected)
