"""Job arrays end to end: a real head, a simulated host of 8 GPUs, real processes.

A 200-task array with ``%4`` runs every task once, with its own id in
``GPUTUI_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_ID``, never more than 4 at once
(seen both by the tasks themselves and in the head's store); a submit script runs
from the copy the head kept; ``--output`` patterns name each task's file; and
cancelling an array mid-way leaves none of it running and none of it to run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import test_e2e_jobs
from test_e2e_jobs import Cluster, alive, job, until

from gputui.scheduler.client.aio import AsyncHeadClient

LIVE = ("starting", "running", "killing", "preempting", "unknown")
FINAL = ("completed", "failed", "timeout", "killed", "cancelled")

# Each task marks itself running (a file named for its task id), counts the marks
# of the tasks running with it, records what it saw, and unmarks itself on its way
# out: a count above the throttle means more ran at once than allowed.
SWEEP = """#!/bin/sh
d="$1"
touch "$d/running/$GPUTUI_ARRAY_TASK_ID"
n=$(ls "$d/running" | wc -l)
echo "$GPUTUI_ARRAY_TASK_ID $SLURM_ARRAY_TASK_ID $GPUTUI_ARRAY_JOB_ID $SLURM_ARRAY_JOB_ID $n" \
  >> "$d/seen/$GPUTUI_ARRAY_TASK_ID"
sleep 0.05
rm "$d/running/$GPUTUI_ARRAY_TASK_ID"
"""


@pytest.fixture(params=["ssh", "local"])
async def cluster(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    monkeypatch.setattr(test_e2e_jobs, "SIM", "8xa100-80gb,name=sim01")
    c = Cluster(tmp_path, request.param)
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


def _live_tasks(db: Path, array_id: int) -> int:
    """How many of the array's tasks hold GPUs, as the head's store says now."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        marks = ",".join("?" * len(LIVE))
        (count,) = conn.execute(
            f"SELECT COUNT(*) FROM job WHERE array_id = ? AND state IN ({marks})",
            (array_id, *LIVE),
        ).fetchone()
    return int(count)


async def _states(client: AsyncHeadClient) -> dict[int, dict[str, Any]]:
    jobs: dict[int, dict[str, Any]] = {}
    after: int | None = None
    while True:
        args: dict[str, Any] = {"all": True, "limit": 1000}
        if after is not None:
            args["after"] = after
        page = await client.call("queue", args)
        jobs.update({j["id"]: j for j in page["jobs"]})
        after = page.get("next")
        if after is None:
            return jobs


async def test_an_array_of_200_with_a_throttle_of_4_runs_each_task_once(cluster: Cluster) -> None:
    client = await cluster.start()
    work = cluster.tmp / "work"
    (work / "running").mkdir(parents=True)
    (work / "seen").mkdir()
    (cluster.tmp / "out").mkdir()
    answer = await client.call(
        "submit",
        {
            "argv": ["sweep.sh", str(work)],
            "script": SWEEP,
            "gpus": 1,
            "cwd": str(cluster.tmp),
            "array": "0-199%4",
            "output": "out/%A_%a.log",
        },
    )
    array_id = answer["array"]["id"]
    assert answer["array"]["tasks"] == 200 and answer["job"]["array_task"] == 0
    db = cluster.tmp / "db" / "gputui.db"
    most = 0

    async def all_ended() -> bool:
        nonlocal most
        most = max(most, _live_tasks(db, array_id))
        jobs = await _states(client)
        mine = [j for j in jobs.values() if j.get("array_id") == array_id]
        return len(mine) == 200 and all(j["state"] in FINAL for j in mine)

    await until(all_ended, timeout=240)
    assert 1 <= most <= 4
    jobs = [j for j in (await _states(client)).values() if j.get("array_id") == array_id]
    assert sorted(j["array_task"] for j in jobs) == list(range(200))
    assert {j["state"] for j in jobs} == {"completed"}
    seen = sorted(work.joinpath("seen").iterdir(), key=lambda p: int(p.name))
    assert [int(p.name) for p in seen] == list(range(200))
    together = 0
    for path in seen:
        lines = path.read_text().splitlines()
        assert len(lines) == 1, f"task {path.name} ran {len(lines)} times"
        task, slurm_task, array, slurm_array, count = lines[0].split()
        assert task == slurm_task == path.name
        assert array == slurm_array == str(array_id)
        together = max(together, int(count))
    assert 1 <= together <= 4
    # --output: each task's own file, named by the array's and the task's ids.
    outs = sorted((cluster.tmp / "out").iterdir())
    assert len(outs) == 200 and (cluster.tmp / "out" / f"{array_id}_7.log").exists()
    queue = await client.call("queue", {})
    assert not [j for j in queue["jobs"] if j.get("array_id") == array_id]


async def test_cancelling_an_array_midway_leaves_none_of_it_running(cluster: Cluster) -> None:
    client = await cluster.start(grace=0.5)
    marks = cluster.tmp / "started"
    marks.mkdir()
    script = '#!/bin/sh\ntouch "$1/$GPUTUI_ARRAY_TASK_ID"\nexec sleep 120\n'
    answer = await client.call(
        "submit",
        {
            "argv": ["long.sh", str(marks)],
            "script": script,
            "gpus": 1,
            "cwd": "/",
            "array": "1-30%3",
        },
    )
    array_id = answer["array"]["id"]

    async def three_running() -> list[dict[str, Any]] | None:
        jobs = await _states(client)
        running = [
            j for j in jobs.values() if j.get("array_id") == array_id and j["state"] == "running"
        ]
        if len(running) != 3:
            return None
        views = [await job(client, j["id"]) for j in running]
        return views if all(v.get("pid") for v in views) else None

    running = await until(three_running, timeout=60)
    # One task on its own first: cancel 12_7 is that task only.
    waiting = [
        j
        for j in (await _states(client)).values()
        if j.get("array_id") == array_id and j["state"] == "queued"
    ]
    one = waiting[-1]
    told = await client.call("cancel", {"job_id": array_id, "task": one["array_task"]})
    assert told["job"]["id"] == one["id"] and told["job"]["state"] == "cancelled"
    others = [j for j in (await _states(client)).values() if j.get("array_id") == array_id]
    assert sum(j["state"] == "cancelled" for j in others) == 1
    # Then the whole array.
    await client.call("cancel", {"job_id": array_id})

    async def all_ended() -> list[dict[str, Any]] | None:
        jobs = [j for j in (await _states(client)).values() if j.get("array_id") == array_id]
        return jobs if all(j["state"] in FINAL for j in jobs) else None

    ended = await until(all_ended, timeout=60)
    assert len(ended) == 30 and {j["state"] for j in ended} == {"cancelled"}
    for view in running:
        assert not alive(view["pid"])
    started = {int(p.name) for p in marks.iterdir()}
    assert started == {v["array_task"] for v in running}
    queue = await client.call("queue", {})
    assert not [j for j in queue["jobs"] if j.get("array_id") == array_id]
