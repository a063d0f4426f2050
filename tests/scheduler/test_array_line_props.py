"""An array's waiting tasks are alike but for their number, so a pass reads only the
first few of each (``line.build``, ``Tx.queued_line``): as many as the free GPUs,
and those preemption could free, could take of its shape, then one for each host
(each task that cannot start may reserve a host of its own), and one more. The
property that rests on, on generated clusters: a pass over that short line starts
and preempts exactly what a pass over the whole line does (with fewer it does not:
a reservation moves, and another job backfills where it would not)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_strategies import views

from gputui.scheduler.policy import passes
from gputui.scheduler.policy.line import array_room
from gputui.scheduler.policy.model import ClusterView, Want


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(views(), st.data())
def test_a_pass_over_each_arrays_first_tasks_decides_as_one_over_all_of_them(
    view: ClusterView, data: st.DataObject
) -> None:
    jobs = [w for w in view.waiting if w.kind == "job"]
    if not jobs:
        return
    chosen = data.draw(st.lists(st.sampled_from(jobs), min_size=1, max_size=3, unique=True))
    arrays: list[list[Want]] = []
    next_id = 5000
    for first in chosen:
        copies = data.draw(st.integers(1, 12))
        tasks = [first, *(replace(first, id=next_id + i) for i in range(copies))]
        next_id += copies
        arrays.append(tasks)
    others = [w for w in view.waiting if w not in chosen]
    whole = replace(view, waiting=(*others, *(t for tasks in arrays for t in tasks)))
    room = array_room(
        sum(1 for g in view.gpus if g.free),
        [(len(r.gpus), r.preemptible or r.over_quota) for r in view.running if r.kind == "job"],
        preemption=view.preemption,
    )
    hosts = len({g.host for g in view.gpus})
    short = replace(
        view,
        waiting=(
            *others,
            *(t for tasks in arrays for t in tasks[: room // tasks[0].gpus + hosts + 1]),
        ),
    )
    full, cut = passes.decide(whole), passes.decide(short)
    assert set(cut.place) == set(full.place)
    assert set(cut.preempt) == set(full.preempt)
