"""Every action on a job, in every state a job can be in: it takes effect, or it is
refused with the reason. Never acknowledged and dropped.

Each example brings a job to a state through the real ``actions`` and
``lifecycle`` functions on a real SQLite file (submitted, placed, reported
running, preempted, killed, cancelled, ended ...), applies one action as its owner
or an admin, and then plays the host to the end: signals delivered, the process
gone, scheduling passes run. An accepted action must have changed the job, and
the job must end the way the answer said (a cancel ends ``cancelled`` and is never
launched again, a preempt or requeue runs again, ...); a refused one must leave
the store as it was and say why, naming the job.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.scheduler.head import actions, lifecycle, transitions
from gputui.scheduler.head.actions import Context, Rules
from gputui.scheduler.head.lifecycle import HostJob
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy import passes
from gputui.scheduler.server.op_args import JobArgs, RequeueArgs, SubmitArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import (
    FINAL_JOB_STATES,
    LIVE_JOB_STATES,
    PENDING_JOB_STATES,
    JobStateName,
    Refusal,
)
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.queries import SqlTx
from gputui.scheduler.store.sqlstore import SqlStore

LOCAL_MOUNTS = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
HOST = "h1"
SLOTS = tuple(
    policy.GpuSlot(uuid=f"GPU-{HOST}-{i}", host=HOST, index=i, pool="a100", model="A100")
    for i in range(2)
)
RULES = Rules(requeue_limit=1000, kill_grace_s=5.0)
ALICE = Caller(uid=2001, user="alice", group="staff", groups=frozenset({"staff"}), admin=False)
ADMIN = Caller(uid=2003, user="carol", group="staff", groups=frozenset({"staff"}), admin=True)
PROMISE = {
    "cancel": "cancelled",
    "kill": "killed",
    "preempt": "runs again",
    "requeue": "runs again",
    "hold": "held",
    "release_hold": "runs again",
}
"""How a job ends up after an accepted action, once its host has done what it was told."""


def test_the_table_defines_every_action_in_every_state() -> None:
    states = set(get_args(JobStateName))
    assert states == PENDING_JOB_STATES | LIVE_JOB_STATES | FINAL_JOB_STATES
    assert set(transitions.TABLE) == set(transitions.PHASES) == states | {"cancelling"}
    for phase in transitions.PHASES:
        assert set(transitions.TABLE[phase]) == set(transitions.JOB_ACTIONS), phase
        for action in transitions.JOB_ACTIONS:
            step = transitions.TABLE[phase][action]
            fill = {"id": 7, "state": phase, "user": "alice"}
            if step.state is None:
                assert "job 7" in step.refuse.format(**fill), (phase, action)
            else:
                assert step.state in states, (phase, action)
                assert step.told.format(**fill), (phase, action)
                assert step.stop in (None, *transitions.END_OF_STOP)
            if step.force:
                assert "alice" in step.refuse.format(**fill), "a forced step says whose"


class Host:
    """A real store and a small model of one host: what it runs, how each run ended."""

    def __init__(self, root: Path) -> None:
        (root / "mountinfo").write_text(LOCAL_MOUNTS)
        self.store = SqlStore(
            open_store(root / "state" / "gputui.db", mountinfo=root / "mountinfo")
        )
        self.now = 1000.0
        self.up = True
        self.runs: dict[int, HostJob] = {}
        self.launched: list[int] = []
        self.stops: list[int] = []

    @contextmanager
    def batch(self, *, schedule: bool = True) -> Iterator[tuple[SqlTx, Context]]:
        """One committed transaction, as the head's writer runs one (a pass after it)."""
        self.now += 1.0
        ctx = Context(
            now=self.now,
            slots=tuple(replace(s, healthy=self.up) for s in SLOTS),
            pools=frozenset({"a100"}),
            hosts=frozenset({HOST}),
            rules=RULES,
        )
        with self.store.transaction() as tx:
            yield tx, ctx
            launches = lifecycle.schedule(tx, ctx, passes.decide, {HOST: None}) if schedule else []
        self.stops.extend(key for host, key in ctx.stops if host == HOST)
        for spec in launches:
            assert spec.key not in self.launched, f"run key {spec.key} launched twice"
            self.launched.append(spec.key)
            self.runs[spec.key] = HostJob(spec.key, "running", pid=spec.job_id)

    def report(self) -> None:
        """The host's whole list of runs (none while it is down)."""
        if not self.up:
            return
        with self.batch() as (tx, ctx):
            forget = lifecycle.on_report(tx, ctx, HOST, list(self.runs.values()), complete=True)
        for key in forget:
            self.runs.pop(key, None)

    def end(self, job_id: int, **how: Any) -> None:
        """The job's current run exits (``how``: exit_code, signal, timed_out)."""
        for key, run in list(self.runs.items()):
            if actions.split_run_key(key)[0] == job_id and run.state == "running":
                self.runs[key] = HostJob(key, "exited", ended_at=self.now, **how)
        self.report()

    def act(self, action: str, job_id: int, who: Caller = ALICE, **extra: Any) -> dict[str, Any]:
        with self.batch() as (tx, ctx):
            args = RequeueArgs if action == "requeue" else JobArgs
            handler = getattr(actions, action)
            result: dict[str, Any] = handler(tx, who, args(job_id=job_id, **extra), ctx)
        return result

    def row(self, job_id: int) -> tuple[Any, ...]:
        with self.store.transaction() as tx:
            return tuple(
                tx.s.connection().exec_driver_sql(f"SELECT * FROM job WHERE id = {job_id}").one()
            )

    def job(self, job_id: int) -> tuple[str, str | None, int]:
        with self.store.transaction() as tx:
            job = tx.job(job_id)
            assert job is not None
            return job.state, job.stop_kind, job.launches

    def settle(self) -> None:
        """The host does what it was told (TERM delivered: the process ends), comes back
        if it was down, and the head runs its passes; a run that starts anew runs on."""
        self.up = True
        for _ in range(3):
            pending, self.stops = self.stops, []
            for key in pending:
                if key in self.runs and self.runs[key].state == "running":
                    self.runs[key] = HostJob(key, "exited", signal="TERM", ended_at=self.now)
            self.report()
            self.report()  # launches of the pass just run are reported running


def bring(host: Host, phase: str) -> int:
    """A new job of alice's, brought to ``phase`` the way a real one gets there."""
    with host.batch(schedule=False) as (tx, ctx):
        job_id = actions.submit(tx, ALICE, SubmitArgs(argv=["train"], gpus=1), ctx)["job"]["id"]
    if phase == "queued":
        return job_id
    if phase in ("held", "cancelled"):
        host.act("hold" if phase == "held" else "cancel", job_id)
        return job_id
    with host.batch() as _:
        pass  # a pass places it: starting
    if phase == "starting":
        return job_id
    host.report()
    if phase == "running":
        return job_id
    if phase == "unknown":
        host.up = False
        with host.batch() as (tx, ctx):
            lifecycle.on_host_down(tx, ctx, HOST, "unreachable")
        return job_id
    by = {"preempting": "preempt", "killing": "kill", "cancelling": "cancel", "killed": "kill"}
    if phase in by:
        host.act(by[phase], job_id)
        if phase == "killed":
            host.end(job_id, signal="TERM")
        return job_id
    how = {
        "completed": {"exit_code": 0},
        "failed": {"exit_code": 1},
        "timeout": {"timed_out": True},
    }
    host.end(job_id, **how[phase])
    return job_id


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    root = Path(tempfile.mkdtemp(prefix="gputui-actions-"))
    made = Host(root)
    try:
        yield made
    finally:
        made.store.close()
        shutil.rmtree(root, ignore_errors=True)


def _clear(host: Host) -> None:
    """End every job an earlier example left queued or running (the GPUs are free)."""
    host.up = True
    with host.batch(schedule=False) as (tx, ctx):
        for job in tx.jobs(LIVE_JOB_STATES | PENDING_JOB_STATES):
            if job.state in PENDING_JOB_STATES:
                job.state, job.ended_at = "cancelled", ctx.now
            else:
                job.state, job.stop_kind = "killing", "kill"
    for key, run in list(host.runs.items()):
        if run.state == "running":
            host.runs[key] = HostJob(key, "exited", signal="KILL", ended_at=host.now)
    host.stops.clear()
    host.report()


@pytest.mark.parametrize("action", transitions.JOB_ACTIONS)
@pytest.mark.parametrize("phase", transitions.PHASES)
def test_each_action_in_each_state_takes_effect_or_is_refused(
    host: Host, phase: str, action: str
) -> None:
    """Every pair, once (the owner acting, with --force); the property below varies
    the rest."""
    check(host, phase, action, admin=False, force=True, ends_first=False)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    phase=st.sampled_from(transitions.PHASES),
    action=st.sampled_from(transitions.JOB_ACTIONS),
    admin=st.booleans(),
    force=st.booleans(),
    ends_first=st.booleans(),
)
def test_every_action_in_every_state_takes_effect_or_is_refused_with_its_reason(
    host: Host, phase: str, action: str, admin: bool, force: bool, ends_first: bool
) -> None:
    check(host, phase, action, admin=admin, force=force, ends_first=ends_first)


def check(
    host: Host, phase: str, action: str, *, admin: bool, force: bool, ends_first: bool
) -> None:
    """``action`` on a job in ``phase``: refused with its reason and nothing changed,
    or a change, and the job ends as promised once its host has done as told."""
    _clear(host)
    job_id = bring(host, phase)
    state, stop_kind, launches = host.job(job_id)
    assert transitions.phase(state, stop_kind) == phase
    before = host.row(job_id)
    stops = len(host.stops)
    who = ADMIN if admin else ALICE
    extra: dict[str, Any] = {"reason": "maintenance"} if admin else {}
    if action == "requeue":
        extra["force"] = force
    step = transitions.step(action, state, stop_kind)
    try:
        answer = host.act(action, job_id, who, **extra)
    except Refusal as refusal:
        assert step.state is None or (step.force and not force), (phase, action)
        assert f"job {job_id}" in refusal.message and "\n" not in refusal.message
        if step.force:
            assert refusal.code == "force-required" and "alice's command" in refusal.message
        assert host.row(job_id) == before, "a refused action changed the job"
        assert len(host.stops) == stops, "a refused action sent a signal"
        return
    assert step.state is not None, f"{action} of a {phase} job was accepted: {answer}"
    assert host.row(job_id) != before, f"{action} of a {phase} job acknowledged, nothing done"
    assert answer["job"]["state"] == step.state and answer["told"]
    if ends_first and state in LIVE_JOB_STATES:
        host.end(job_id, exit_code=0)  # the process ends on its own meanwhile
    host.settle()
    end, _, now = host.job(job_id)
    promise = PROMISE[action]
    if promise == "runs again":
        assert now == launches + 1 and end == "running", (phase, action, end)
    elif promise == "held":
        assert (end, now) == ("held", launches)
    else:
        assert (end, now) == (promise, launches), f"{action} of a {phase} job ended {end}"


def test_a_cancel_while_preempting_ends_cancelled_and_never_runs_again(host: Host) -> None:
    """The repro: preempt, then cancel before the process is gone."""
    _clear(host)
    job_id = bring(host, "running")
    _, _, launches = host.job(job_id)
    assert host.act("preempt", job_id)["job"]["state"] == "preempting"
    answer = host.act("cancel", job_id)
    assert answer["job"]["state"] == "killing" and "cancelled" in answer["told"]
    host.settle()
    for _ in range(3):
        with host.batch() as _:
            pass
    assert host.job(job_id) == ("cancelled", None, launches)


@pytest.mark.parametrize(("action", "ends"), [("cancel", "cancelled"), ("kill", "killed")])
def test_a_job_stopped_before_its_refused_launch_ends_and_frees_its_gpus(
    host: Host, action: str, ends: str
) -> None:
    """Stopped while ``starting``; then the host refuses the launch: no run exists to
    report an end, so the job ends here, as its stop says (not ``killing`` forever)."""
    _clear(host)
    job_id = bring(host, "starting")
    _, _, launch = host.job(job_id)
    host.act(action, job_id)
    with host.batch() as (tx, ctx):
        lifecycle.on_launch_failed(tx, ctx, job_id, launch, code="refused", message="no such user")
    assert host.job(job_id) == (ends, None, launch)
    with host.store.transaction() as tx:
        assert [a for a in tx.live_allocations() if a.job_id == job_id] == []
