"""The store's queries for job arrays, on SQLite and on PostgreSQL: the tasks linked
under the first one's id, a line that reads only the first few waiting tasks of each
array, one statement that gives the rest their reason, a task found by its number,
and a script kept once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from gputui.scheduler.store.sqlstore import SqlStore


@pytest.fixture
def jobs(store_on_both: Engine) -> Iterator[SqlStore]:
    kept = SqlStore(store_on_both)
    yield kept
    kept.close()


def _row(**over: Any) -> dict[str, Any]:
    row = {
        "uid": 1000,
        "user": "alice",
        "argv": '["sweep.sh"]',
        "gpus": 1,
        "submitted_at": 1.0,
        "state": "queued",
        "reason": "Resources",
    }
    return {**row, **over}


def test_an_array_is_linked_read_a_few_at_a_time_and_told_why_in_one_statement(
    jobs: SqlStore,
) -> None:
    with jobs.batch() as tx:
        (single,) = tx.insert_jobs([_row()])
        script_id = tx.add_script("#!/bin/sh\necho hi\n", 1.0)
        one = [_row(gpus=2, array_task=t, array_throttle=3, script_id=script_id) for t in range(50)]
        two = [_row(array_task=t) for t in (1, 3, 5)]
        ids_one = tx.insert_jobs(one)
        tx.link_array(ids_one)
        ids_two = tx.insert_jobs(two)
        tx.link_array(ids_two)
    first, second = ids_one[0], ids_two[0]
    with jobs.batch() as tx:
        assert {j.array_id for j in tx.array_tasks(first)} == {first}
        assert [j.array_task for j in tx.array_tasks(second)] == [1, 3, 5]
        task = tx.array_task(first, 7)
        assert task is not None and task.id == ids_one[7]
        assert tx.array_task(first, 50) is None and tx.array_task(single, 0) is None
        assert tx.script_text(script_id) == "#!/bin/sh\necho hi\n"
        # 9 free GPUs: four of the 2-GPU array's tasks and one more, all of the other's.
        line = tx.queued_line(9)
        assert [j.id for j in line] == sorted([single, *ids_one[:5], *ids_two])
        assert [j.id for j in tx.queued_line(9, 2)] == sorted([single, *ids_one[:7], *ids_two])
        assert [j.id for j in tx.queued_line(0)] == [single, first, second]
        # Jobs outside an array stay out of it.
        assert [j.id for j in tx.jobs(("queued",), arrays=False)] == [single]
        tx.set_array_reason(first, "JobArrayTaskLimit")
    with jobs.batch() as tx:
        reasons = {j.reason for j in tx.array_tasks(first)}
        assert reasons == {"JobArrayTaskLimit"}
        assert {j.reason for j in tx.array_tasks(second)} == {"Resources"}
        only = tx.job(single)
        assert only is not None and only.reason == "Resources" and only.array_id is None
        # A task that is not waiting keeps its reason.
        started = tx.array_task(second, 3)
        assert started is not None
        started.state, started.reason = "running", ""
        tx.flush()
        tx.set_array_reason(second, "Priority")
    with jobs.batch() as tx:
        got = {j.array_task: (j.state, j.reason) for j in tx.array_tasks(second)}
        assert got == {1: ("queued", "Priority"), 3: ("running", ""), 5: ("queued", "Priority")}
        assert [j.array_task for j in tx.array_tasks(second, ("queued",))] == [1, 5]


def test_an_arrays_id_stands_for_all_of_it_as_a_dependency(jobs: SqlStore) -> None:
    with jobs.batch() as tx:
        ids = tx.insert_jobs([_row(array_task=t) for t in range(3)])
        tx.link_array(ids)
        (single,) = tx.insert_jobs([_row()])

    def states(*tasks: str) -> dict[int, str]:
        with jobs.batch() as tx:
            for job_id, state in zip(ids, tasks, strict=True):
                job = tx.job(job_id)
                assert job is not None
                job.state = state
            tx.flush()
            return tx.job_states([ids[0], ids[1], single])

    got = states("completed", "running", "queued")
    assert got == {ids[0]: "queued", ids[1]: "running", single: "queued"}
    assert states("completed", "completed", "running")[ids[0]] == "running"
    assert states("completed", "failed", "completed")[ids[0]] == "failed"
    assert states("completed", "completed", "completed")[ids[0]] == "completed"
