"""``explain`` and the scheduling pass work by one set of standing figures: for any
usage history, at every moment the head's clock is moved to, the fair-share factor
and quota state ``explain`` gives each waiting job are the very ones the last pass
used; and a fresh head's first pass already uses the history's figures."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from headkit import SettableClock
from headthread import LineClient, ThreadedHead, poll
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import actions, explain_reads
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.policy import model, passes, shares
from gputui.scheduler.server.op_args import SubmitArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore

GROUPS = ("ga", "gb", "gc")
SLOTS = tuple(model.GpuSlot(f"GPU-gpu01-{i:04d}", "gpu01", i, pool="a100") for i in range(4))
HOUR = 3600.0

span = st.tuples(
    st.sampled_from(GROUPS),
    st.floats(1.0, 180.0),  # how many hours ago it began (inside the 10 days counted)
    st.floats(0.05, 60.0),  # how long it lasted, hours
    st.integers(1, 4),  # GPUs
)


def _sched(limits: dict[str, float]) -> SchedulerConfig:
    return SchedulerConfig.model_validate(
        {
            "preemption": {"enabled": False},
            "groups": {g: [f"u_{g}"] for g in GROUPS},
            "fair_share": {"half_life_days": 2, "shares": {"ga": 1, "gb": 2, "gc": 3}},
            "quotas": [{"group": g, "gpu_hours_per_week": h} for g, h in limits.items()],
        },
        strict=False,
    )


def _caller(group: str) -> Caller:
    uid = 2000 + GROUPS.index(group)
    return Caller(uid=uid, user=f"u_{group}", group=group, groups=frozenset({group}), admin=False)


def _seed(
    db: Path, config: SchedulerConfig, history: list[tuple[str, float, float, int]], now: float
) -> list[int]:
    """The history's allocations (ended), one 1-GPU job of ga and gb that the head
    starts, and a job of each group waiting on it; the waiting jobs' ids."""
    store = SqlStore(open_store(db))
    ctx = actions.Context(
        now=now,
        slots=SLOTS,
        pools=frozenset({"a100"}),
        hosts=frozenset({"gpu01"}),
        rules=Rules(sched=config),
    )
    try:
        with store.transaction() as tx:
            for i, (group, ago, hours, gpus) in enumerate(history):
                done = actions.submit(tx, _caller(group), SubmitArgs(argv=["old"], gpus=gpus), ctx)
                ident = done["job"]["id"]
                start = now - ago * HOUR
                uuids = [f"GPU-old-{i}-{k}" for k in range(gpus)]
                tx.allocate(uuids, "gpu01", start, job_id=ident)
                tx.free(min(start + hours * HOUR, now), job_id=ident)
                job = tx.job(ident)
                assert job is not None
                job.state = "completed"
            runs = [
                actions.submit(tx, _caller(g), SubmitArgs(argv=["run"], gpus=1), ctx)["job"]["id"]
                for g in ("ga", "gb")
            ]
            return [
                actions.submit(tx, _caller(g), SubmitArgs(argv=["w"], gpus=1, after=runs), ctx)[
                    "job"
                ]["id"]
                for g in GROUPS
            ]
    finally:
        store.close()


def _figures(view: model.ClusterView) -> dict[int, tuple[float, bool]]:
    return {w.id: (w.fair, w.over_quota) for w in view.waiting if w.kind == "job"}


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    history=st.lists(span, max_size=6),
    limits=st.dictionaries(st.sampled_from(GROUPS), st.floats(0.5, 300.0), max_size=3),
    steps=st.lists(st.floats(1.0, 3 * HOUR), min_size=1, max_size=3),
)
def test_explain_gives_the_figures_the_pass_used_at_every_moment(
    history: list[tuple[str, float, float, int]],
    limits: dict[str, float],
    steps: list[float],
) -> None:
    config = _sched(limits)
    tmp = Path(tempfile.mkdtemp(prefix="gputui-standing-"))
    clock = SettableClock()
    seen: list[model.ClusterView] = []

    def watched(view: model.ClusterView) -> model.Decisions:
        seen.append(view)
        return passes.decide(view)

    try:
        waiting = _seed(tmp / "db" / "gputui.db", config, history, clock())
        before = _standing(tmp / "db" / "gputui.db", config, clock())
        with (
            ThreadedHead(
                tmp, {"gpu01": 4}, rules=Rules(sched=config), clock=clock, decide=watched
            ) as th,
            LineClient(th.sock) as c,
        ):
            first = seen[0]
            # The first pass of a fresh head: the history's figures, not everyone equal.
            expected = before
            for want in first.waiting:
                assert want.fair == pytest.approx(expected.factor(want.group), rel=1e-9)
                assert want.over_quota == expected.over_quota(want.group, want.pool)
            for step in [0.0, *steps]:
                clock.advance(step)
                moment = clock()
                poll(lambda m=moment: _pass_since(seen, m), what="a pass at the new time")
                for ident in waiting:
                    f = c.ok("explain", {"job_id": ident})["factors"]
                    # Every pass since the last refresh used the same figures: the
                    # latest is the one a person asking now is told about.
                    figures = _figures(seen[-1])
                    assert (f["fair_share"], f["over_quota"]) == figures[ident], (ident, step)
            assert th.problems == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _pass_since(seen: list[model.ClusterView], moment: float) -> model.ClusterView | None:
    last = seen[-1] if seen else None
    return last if last is not None and last.now >= moment else None


def _standing(db: Path, config: SchedulerConfig, now: float) -> shares.Standing:
    """The figures of the stored history, worked out here (before the head starts:
    ended allocations only, whose factors do not change as they age)."""
    store = SqlStore(open_store(db))
    try:
        with store.snapshot() as tx:
            return explain_reads.standing_of(tx, config, now)
    finally:
        store.close()
