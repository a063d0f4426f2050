"""Whose jobs run where: a host the head reaches as a user other than root runs only
that user's jobs, unless ``run_as_login_user`` runs every job as that user."""

from __future__ import annotations

import json
from pathlib import Path

from gputui.scheduler.head import actions, lifecycle
from gputui.scheduler.policy import model, passes
from gputui.scheduler.server.op_args import SubmitArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore

SLOTS = tuple(
    model.GpuSlot(uuid=f"GPU-{host}-{i}", host=host, index=i, pool="p")
    for host in ("rootbox", "alicebox")
    for i in range(2)
)
ALICE = Caller(uid=1001, user="alice", group="alice", groups=frozenset({"alice"}), admin=False)
BOB = Caller(uid=1002, user="bob", group="bob", groups=frozenset({"bob"}), admin=False)
LOGINS = {"rootbox": "root", "alicebox": "alice"}


def _run(tmp_path: Path, jobs: list[tuple[Caller, str]], **kw: bool) -> dict[str, tuple]:
    store = SqlStore(open_store(tmp_path / "db" / "g.db"))
    ctx = actions.Context(now=1.0, slots=SLOTS, pools=frozenset({"p"}), hosts=frozenset(LOGINS))
    with store.transaction() as tx:
        ids = {}
        for caller, name in jobs:
            args = SubmitArgs(argv=["train"], gpus=2, name=name)
            ids[name] = actions.submit(tx, caller, args, ctx)["job"]["id"]
        lifecycle.schedule(tx, ctx, passes.decide, LOGINS, **kw)
        out = {}
        for name, job_id in ids.items():
            job = tx.job(job_id)
            assert job is not None
            out[name] = (job.state, job.host, job.run_as, json.loads(job.gpu_uuids))
    store.close()
    return out


def test_a_host_reached_as_alice_runs_only_alices_jobs(tmp_path: Path) -> None:
    # bob's job comes first but may not use alicebox; alice's fits there.
    got = _run(tmp_path, [(BOB, "b1"), (BOB, "b2"), (ALICE, "a1")])
    assert got["b1"][:3] == ("starting", "rootbox", "bob")
    assert got["b2"][0] == "queued"
    assert got["a1"][:3] == ("starting", "alicebox", "alice")


def test_run_as_login_user_runs_everyone_as_the_login_user_there(tmp_path: Path) -> None:
    got = _run(tmp_path, [(BOB, "b1"), (BOB, "b2")], run_as_login_user=True)
    assert {got["b1"][1], got["b2"][1]} == {"rootbox", "alicebox"}
    by_host = {v[1]: v[2] for v in got.values()}
    assert by_host == {"rootbox": "bob", "alicebox": "alice"}


def test_a_job_only_a_host_of_another_login_user_could_take_says_so(tmp_path: Path) -> None:
    store = SqlStore(open_store(tmp_path / "db" / "g.db"))
    ctx = actions.Context(now=1.0, slots=SLOTS, pools=frozenset({"p"}), hosts=frozenset(LOGINS))
    with store.transaction() as tx:
        there = actions.submit(tx, BOB, SubmitArgs(argv=["t"], gpus=1, host="alicebox"), ctx)
        anywhere = actions.submit(tx, BOB, SubmitArgs(argv=["t"], gpus=2), ctx)
        big = actions.submit(tx, BOB, SubmitArgs(argv=["t"], gpus=2), ctx)
        lifecycle.schedule(tx, ctx, passes.decide, LOGINS)
        reasons = {}
        for key, made in (("there", there), ("anywhere", anywhere), ("big", big)):
            job = tx.job(made["job"]["id"])
            assert job is not None
            reasons[key] = (job.state, job.reason)
    store.close()
    assert reasons["there"] == ("queued", model.LOGIN_USER)
    assert reasons["anywhere"][0] == "starting"  # on rootbox
    assert reasons["big"] == ("queued", model.PRIORITY)  # rootbox is taken, its turn comes
