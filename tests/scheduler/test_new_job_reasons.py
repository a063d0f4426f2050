"""A burst of submissions costs what its kinds of job cost, not what its jobs do.

New jobs on a cluster with no usable GPU each get the reason a pass gives them, from
a pass over one stand-in of each kind (``line.alike``), not one per job; and whether
some host could ever run a submission is judged once a batch for each shape.

The shortcut rests on a property of the policy, checked here on generated views:
with every GPU down, fenced or drained, nothing is placed, preempted or reserved,
and a request's reason depends on its kind, what blocks it, its class's window, its
shape and its size alone, whatever else is in line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_strategies import views

from gputui.scheduler.head import actions, lifecycle
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy import passes
from gputui.scheduler.policy.model import ClusterView, Decisions, Want
from gputui.scheduler.server.op_args import SubmitArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import Refusal
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore

SLOTS = (
    *(policy.GpuSlot(f"GPU-root-{i}", "rootbox", i, "p", drained=True) for i in range(2)),
    *(policy.GpuSlot(f"GPU-alice-{i}", "alicebox", i, "p", healthy=False) for i in range(2)),
)
"""rootbox drained, alicebox down: no GPU is usable."""
LOGINS = {"rootbox": "root", "alicebox": "alice"}
"""alicebox runs only alice's jobs."""
ALICE = Caller(uid=1001, user="alice", group="alice", groups=frozenset({"alice"}), admin=False)
BOB = Caller(uid=1002, user="bob", group="bob", groups=frozenset({"bob"}), admin=False)


def _kind(want: Want) -> tuple[object, ...]:
    return (want.kind, want.blocked, want.off_hours_only, want.shape, want.gpus)


def _reasons(decisions: Decisions) -> dict[int, str]:
    return {w.id: w.reason for w in decisions.wait}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(views(), st.data())
def test_with_no_usable_gpu_a_request_waits_for_the_reason_of_its_kind(
    view: ClusterView, data: st.DataObject
) -> None:
    def unusable(g: policy.GpuSlot) -> policy.GpuSlot:
        if not g.healthy or g.drained:
            return g
        drained, down = replace(g, drained=True), replace(g, healthy=False)
        return data.draw(st.sampled_from((drained, down, replace(down, fenced=True))))

    gpus = tuple(unusable(g) for g in view.gpus)
    view = replace(view, gpus=gpus)
    decided = passes.decide(view)
    assert not decided.place and not decided.preempt
    assert all(w.start_at is None and w.host is None for w in decided.wait)  # none reserved
    reasons = _reasons(decided)
    assert sorted(reasons) == sorted(w.id for w in view.waiting)
    first: dict[tuple[object, ...], Want] = {}
    for want in view.waiting:
        first.setdefault(_kind(want), want)
    for want in view.waiting:
        assert reasons[want.id] == reasons[first[_kind(want)].id]
    # One of each kind alone gets the reason it gets among all of them.
    alone = _reasons(passes.decide(replace(view, waiting=tuple(first.values()))))
    assert alone == {w.id: reasons[w.id] for w in first.values()}


def test_new_jobs_get_their_reasons_from_one_stand_in_of_each_kind(tmp_path: Path) -> None:
    seen: list[int] = []

    def decide(view: ClusterView) -> Decisions:
        seen.append(len(view.waiting))
        return passes.decide(view)

    store = SqlStore(open_store(tmp_path / "db" / "g.db"))
    ctx = actions.Context(
        now=1.0,
        slots=SLOTS,
        unknown_hosts=frozenset({"newbox"}),  # not seen yet: no size is refused
        pools=frozenset({"p"}),
        hosts=frozenset({*LOGINS, "newbox"}),
    )
    asked = [
        ("b1", BOB, SubmitArgs(argv=["t"], gpus=1)),
        ("b-there", BOB, SubmitArgs(argv=["t"], gpus=1, host="alicebox")),
        ("a-there", ALICE, SubmitArgs(argv=["t"], gpus=1, host="alicebox")),
        ("b2", BOB, SubmitArgs(argv=["t"], gpus=1)),
        ("b-big", BOB, SubmitArgs(argv=["t"], gpus=3)),
        ("a-two", ALICE, SubmitArgs(argv=["t"], gpus=2)),
        ("b3", BOB, SubmitArgs(argv=["t"], gpus=1)),
        ("a-there-2", ALICE, SubmitArgs(argv=["t"], gpus=1, host="alicebox")),
    ]
    with store.transaction() as tx:
        ids = {name: actions.submit(tx, who, args, ctx)["job"]["id"] for name, who, args in asked}
        assert lifecycle.schedule(tx, ctx, decide, LOGINS) == []
    with store.transaction() as tx:
        got = {}
        for name, job_id in ids.items():
            job = tx.job(job_id)
            assert job is not None
            got[name] = (job.state, job.reason)
    store.close()
    drained, down = ("queued", policy.DRAINED), ("queued", policy.HOST_DOWN)
    assert got == {
        "b1": drained,
        "b2": drained,
        "b3": drained,
        "b-there": ("queued", policy.LOGIN_USER),  # only alice's jobs run there
        "a-there": down,
        "a-there-2": down,
        "b-big": ("queued", policy.RESOURCES),  # no host seen has 3
        "a-two": drained,  # rootbox would hold it but for the drain
    }
    assert seen == [5]  # one pass, over one job of each of the five kinds


def test_a_burst_of_alike_submissions_is_judged_feasible_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether some host could ever run a submission is worked out once a batch for
    each (size, pool, host): a burst of 16 alike costs one look over the GPUs; each is
    still refused, with the same words, when none could."""
    looked: list[int] = []
    impossible = policy.impossible

    def counted(want: Want, gpus: Sequence[policy.GpuSlot]) -> str | None:
        looked.append(want.gpus)
        return impossible(want, gpus)

    monkeypatch.setattr(policy, "impossible", counted)
    ctx = actions.Context(now=1.0, slots=SLOTS, pools=frozenset({"p"}), hosts=frozenset(LOGINS))
    for _ in range(16):
        actions.submit_row(BOB, SubmitArgs(argv=["t"], gpus=2), ctx)
    refusals = []
    for _ in range(3):
        with pytest.raises(Refusal) as refused:
            actions.submit_row(BOB, SubmitArgs(argv=["t"], gpus=3), ctx)
        refusals.append((refused.value.code, refused.value.message))
    assert looked == [2, 3]
    assert refusals == [("impossible", refusals[0][1])] * 3
    assert "3 GPUs asked for, but no host has more than 2" in refusals[0][1]
