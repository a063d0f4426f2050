"""The Slurm meter and the join with sacct (``policy.slurm_meter``, ``accounting``): pure.

Generated polls (jobs with GPU indexes, jobs held per node) on two 8-GPU nodes and
a constant power per GPU: each job's joules are computed here, from the generated
data alone: an indexed job gets its own GPUs' power; the per-node jobs of a node
share the power of the node's GPUs no indexed job holds, by GPU count. The meter
never charges more than the GPUs drew. The join: a key none of whose jobs was
metered keeps "-" (None), never 0.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.scheduler.client.slurm import accounting
from gputui.scheduler.client.slurm.accounting import Allocation, JobEnergy, Metering
from gputui.scheduler.client.slurm.parse import node_names
from gputui.scheduler.policy.meter import Holder, Meter, Reading
from gputui.scheduler.policy.slurm_meter import SlurmHolder, SlurmMeter, holders_of, holdings

NODES = ("n1", "n2")
GPUS = 8
T0 = 1_800_000_000.0  # the start of an hour
STEP = 10.0


def power(node: str, index: int) -> float:
    return 50.0 + 10 * index + (5 if node == "n2" else 0)


@st.composite
def polls(draw: st.DrawFn) -> tuple[list[dict[str, object]], dict[int, dict[str, list[int]]]]:
    """Running jobs: each on one node, either on indexes no other job has there, or
    per node with a GPU count."""
    jobs: list[dict[str, object]] = []
    indexes: dict[int, dict[str, list[int]]] = {}
    free = {n: list(range(GPUS)) for n in NODES}
    for number in range(1, draw(st.integers(0, 6)) + 1):
        node = draw(st.sampled_from(NODES))
        per_node = draw(st.booleans())
        count = draw(st.integers(1, 3))
        if not per_node:
            if len(free[node]) < count:
                continue
            taken = draw(st.permutations(free[node]))[:count]
            free[node] = [i for i in free[node] if i not in taken]
            indexes[number] = {node: sorted(taken)}
        jobs.append({"id": number, "user": f"u{number}", "partition": "gpu", "state": "RUNNING",
                     "gpus": count, "host": node, "started_at": T0 - 100})  # fmt: skip
    return jobs, indexes


def expected(
    jobs: list[dict[str, object]], indexes: dict[int, dict[str, list[int]]], seconds: float
) -> dict[int, float]:
    """Each job's joules over ``seconds``, from the poll and the powers alone."""
    out = {int(str(j["id"])): 0.0 for j in jobs}
    for node in NODES:
        taken = {i for spec in indexes.values() for i in spec.get(node, [])}
        for job, spec in indexes.items():
            out[job] += sum(power(node, i) for i in spec.get(node, [])) * seconds
        shared = [j for j in jobs if j["host"] == node and int(str(j["id"])) not in indexes]
        rest = [i for i in range(GPUS) if i not in taken]
        if not shared or not rest:
            continue
        total = max(len(rest), sum(int(str(j["gpus"])) for j in shared))
        drawn = sum(power(node, i) for i in rest) * seconds
        for j in shared:
            out[int(str(j["id"]))] += drawn * int(str(j["gpus"])) / total
    return out


@given(polls(), st.integers(1, 5))
def test_each_job_is_charged_its_gpus_power_and_a_nodes_share_by_gpu_count(
    poll: tuple[list[dict[str, object]], dict[int, dict[str, list[int]]]], samples: int
) -> None:
    jobs, indexes = poll
    held = holdings(jobs, indexes, lambda n: n, node_names, T0)
    meter = SlurmMeter()
    for step in range(samples + 1):
        for node in NODES:
            gpus = [(i, f"GPU-{node}-{i}") for i in range(GPUS)]
            readings = [Reading(uuid, 50.0, power(node, i)) for i, uuid in gpus]
            holders = holders_of([held[node]] if node in held else [], gpus)
            meter.observe(node, object(), readings, T0 + STEP * step, holders)
    got: dict[int, float] = {}
    split: dict[int, bool] = {}
    for _hour, job, _user, _part, _held, _busy, joules, per_node in meter.pending.rows():
        got[job] = got.get(job, 0.0) + joules
        split[job] = per_node
    want = expected(jobs, indexes, STEP * samples)
    for job, joules in want.items():
        assert abs(got.get(job, 0.0) - joules) <= 1e-6 * max(1.0, joules), job
        if joules > 0:
            assert split[job] is (job not in indexes)  # a per-node share says so
    drawn = sum(power(n, i) for n in NODES for i in range(GPUS)) * STEP * samples
    assert sum(got.values()) <= drawn * (1 + 1e-9)  # never more than the GPUs drew


@given(
    st.lists(st.tuples(st.sampled_from(["alice", "bob", "carol"]), st.booleans()), max_size=8),
    st.floats(0, 10),
)
def test_a_key_with_no_metered_job_shows_no_energy_and_the_rest_add_up(
    jobs: list[tuple[str, bool]], price: float
) -> None:
    allocs = [
        Allocation(str(n), user, "lab", "gpu", 2, T0, T0 + 3600) for n, (user, _) in enumerate(jobs)
    ]

    def energy(n: int) -> JobEnergy:
        return JobEnergy(
            1800.0, 3.6e6 * (n + 1), False, {"2027-01-15": (1800.0, 3.6e6 * (n + 1), 3600.0)}
        )

    metered = Metering(
        {str(n): energy(n) for n, (_, known) in enumerate(jobs) if known}, price_per_kwh=price
    )
    body = accounting.usage(allocs, T0, T0 + 3600, "user", pools={}, now=T0 + 7200, metered=metered)
    for row in body["totals"]:
        mine = [n for n, (user, _) in enumerate(jobs) if user == row["key"]]
        known = [n for n in mine if jobs[n][1]]
        if not known:
            assert row["energy_kwh"] is None and row["busy_gpu_h"] is None
        else:
            assert abs(row["energy_kwh"] - sum(n + 1 for n in known)) < 1e-9
        assert abs(row["unmetered_gpu_h"] - 2 * (len(mine) - len(known))) < 1e-9
        if price > 0 and len(known) < len(mine):
            assert row["cost"] is None  # energy not known for all of it: nor the cost


ANSWER = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)
JOB_ROW = st.fixed_dictionaries(
    {"job": st.integers(-5, 2**40) | ANSWER, "busy_gpu_s": ANSWER | st.floats(),
     "energy_j": st.floats() | ANSWER, "per_node": ANSWER,
     "days": st.dictionaries(st.text(max_size=12) | st.just("2027-01-15"),
                             st.lists(st.floats() | ANSWER, max_size=4), max_size=3) | ANSWER}
)  # fmt: skip


HEAD_ANSWER = st.fixed_dictionaries(
    {"jobs": st.lists(JOB_ROW, max_size=4) | ANSWER},
    optional={"price_per_kwh": st.floats() | ANSWER, "gpu_hour_rate": ANSWER,
              "currency": ANSWER},
)  # fmt: skip


@given(HEAD_ANSWER)
def test_any_answer_from_the_head_is_figures_or_refused_in_one_line(
    answer: dict[str, object],
) -> None:
    try:
        read = accounting.metering(answer)
    except ValueError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    for energy in read.jobs.values():
        figures = [energy.busy_s, energy.energy_j, *(v for d in energy.days.values() for v in d)]
        assert all(0 <= f <= 1e15 for f in figures)
    assert 0 <= read.price_per_kwh <= 1e15 and len(read.currency) <= 8


@given(st.lists(st.booleans(), min_size=1, max_size=6))
def test_a_per_node_share_is_said_once_under_the_figures(split: list[bool]) -> None:
    allocs = [Allocation(str(n), "alice", "lab", "gpu", 1, T0, T0 + 60) for n in range(len(split))]
    metered = Metering({str(n): JobEnergy(0.0, 10.0, s, {}) for n, s in enumerate(split)})
    body = accounting.usage(allocs, T0, T0 + 3600, "user", pools={}, now=T0, metered=metered)
    assert body["note"] == (accounting.SPLIT_NOTE if any(split) else "")
    assert body["totals"][0]["per_node"] is any(split)
    assert body["unknown"] == ""  # every job metered: nothing unknown


@given(st.lists(st.tuples(st.sampled_from(["gpu", "cpu"]), st.integers(1, 4)), max_size=6))
def test_report_prices_each_pool_as_usage_does(jobs: list[tuple[str, int]]) -> None:
    allocs = [Allocation(str(n), f"u{n % 2}", "lab", part, gpus, T0, T0 + 1800)
              for n, (part, gpus) in enumerate(jobs)]  # fmt: skip
    metered = Metering(
        {str(n): JobEnergy(0.0, 3.6e6, False, {}) for n in range(len(jobs))},
        price_per_kwh=0.25,
        gpu_hour_rate={"a100": 2.0},
    )
    pools = {"gpu": "a100"}
    summed = accounting.report(allocs, T0, T0 + 3600, T0, pools=pools, metered=metered)
    want = sum(gpus * 0.5 * (2.0 if part == "gpu" else 0.0) + 0.25 for part, gpus in jobs)
    assert abs((summed["cost"] or 0.0) - want) < 1e-9
    by_user = accounting.usage(allocs, T0, T0 + 3600, "user", pools=pools, now=T0, metered=metered)
    assert abs(sum(r["cost"] for r in by_user["totals"]) - want) < 1e-9


# -- the same time as the head's meter ------------------------------------------------

_UUIDS = ("GPU-a", "GPU-b")
_step = st.tuples(
    st.one_of(st.floats(-5, 90, allow_nan=False), st.just(math.nan)),  # since the last
    st.lists(
        st.tuples(
            st.sampled_from(_UUIDS),
            st.one_of(st.none(), st.floats(0, 100)),
            st.one_of(st.none(), st.floats(0, 700)),
        ),
        max_size=3,
    ),
    st.one_of(st.none(), st.floats(0.1, 60)),  # the host's stale limit, when it says
    st.sampled_from(["new", "new", "new", "again", "lost"]),
)


@settings(max_examples=300)
@given(steps=st.lists(_step, max_size=30))
def test_a_gpu_held_by_one_job_is_counted_as_the_heads_meter_counts_it(
    steps: list[tuple[float, list[tuple[str, float | None, float | None]], float | None, str]],
) -> None:
    """Both meters take a GPU's time from the same samples the same way (the gap since
    its previous sample, capped; a sample re-sent, a clock gone back, a GPU lost and
    back): a job holding every GPU throughout is charged what the head's meter
    charges a holder of them, hour by hour."""
    head, slurm = Meter(), SlurmMeter()
    since = T0 - 100
    holder = Holder("alice", "ml", "", "a100", since)
    job = SlurmHolder(7, "alice", "gpu", since)
    t, sample = T0, object()
    for dt, readings, stale, how in steps:
        t += dt
        if how == "lost":
            for uuid, *_ in readings:
                head.forget(uuid)
                slurm.forget(uuid)
            continue
        if how == "new":
            sample = object()
        got = [Reading(*r) for r in readings]
        head.observe("n1", sample, got, t, dict.fromkeys(_UUIDS, holder), max_gap_s=stale)
        slurm.observe("n1", sample, got, t, dict.fromkeys(_UUIDS, (job,)), max_gap_s=stale)
    counted = head.take()
    charged = {hour: cell for (hour, *_), cell in counted.usage.items()}
    present = {hour: cell[0] for hour, cell in counted.cluster.items()}
    cells = slurm.take().cells
    assert {hour for hour, _ in cells} == set(charged) == set(present)
    for (hour, number), (held, busy, joules) in cells.items():
        assert number == 7
        assert held == pytest.approx(present[hour])  # held from before the first sample
        assert busy == pytest.approx(charged[hour][0])
        assert joules == pytest.approx(charged[hour][1])
