"""A job that crosses its group's weekly quota while it runs, end to end: a real
head on a clock the test moves, a real helper, real processes, and a second real
Unix user whose work is within quota."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from headkit import SettableClock
from test_authz import People, people  # noqa: F401 (the fixture)
from test_e2e_jobs import Cluster, _with_pid, job, state_is, until

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.head import standings

HEAVY = SchedulerConfig.model_validate(
    {
        "preemption": {"min_runtime_minutes": 0},
        "groups": {"heavy": ["root"]},
        "quotas": [{"group": "heavy", "gpu_hours_per_week": 1}],
    },
    strict=False,
)


@pytest.fixture
async def cluster(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    """A cluster whose socket the test users can reach (a 0755 directory under /tmp)."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-quota-", dir="/tmp"))
    tmp.chmod(0o755)
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp / "jobs"))
    c = Cluster(tmp, "local")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()
        shutil.rmtree(tmp, ignore_errors=True)


async def test_a_long_job_that_crosses_its_quota_is_preempted_by_work_within_quota(
    cluster: Cluster,
    people: People,  # noqa: F811 (the fixture)
) -> None:
    clock = SettableClock()
    client = await cluster.start(grace=0.5, sched=HEAVY, clock=clock)
    long = await client.call(
        "submit", {"argv": ["/bin/sleep", "300"], "gpus": 4, "cwd": "/", "name": "long"}
    )
    long_id = long["job"]["id"]
    placed = await until(lambda: _with_pid(client, long_id))
    assert placed["over_quota"] is False  # within quota when it started
    # Twenty minutes on four GPUs: 1.33 GPU-hours, over the group's one.
    clock.advance(20 * 60)
    assert standings.REFRESH_S <= 20 * 60  # the head's next refresh judges it again

    async def over() -> dict[str, object] | None:
        view = await job(client, long_id)
        return view if view["over_quota"] else None

    crossed = await until(over)
    assert crossed["state"] == "running"
    quota = await client.call("quota")
    assert quota["quotas"][0]["over"] is True
    # Work of another group, within its quota, now takes the GPUs it needs.
    bob = people.bob
    ask = {"argv": ["/bin/sleep", "300"], "gpus": 2, "cwd": "/"}
    answer = await asyncio.to_thread(bob.ok, cluster.sock, "submit", ask)  # the head's loop runs
    bobs = answer["job"]["id"]

    async def requeued() -> dict[str, object] | None:
        view = await job(client, long_id)
        return view if view["requeues"] == 1 and view["state"] == "queued" else None

    await until(requeued, timeout=30)
    with sqlite3.connect(cluster.tmp / "db" / "gputui.db") as db:
        told = [t for (t,) in db.execute("SELECT text FROM notice WHERE job_id = ?", (long_id,))]
    why = f"preempted for job {bobs} (normal, {bob.name}): job {long_id} ran over its group's quota"
    assert any(why in text for text in told), told
    await until(lambda: state_is(client, bobs, "running"), timeout=30)
    await client.call("cancel", {"job_id": long_id})
    await client.call("kill", {"job_id": bobs, "reason": "end of the test"})
    await until(lambda: state_is(client, bobs, "killed"), timeout=30)
