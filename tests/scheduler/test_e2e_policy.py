"""The policy end to end on the demo's simulated cluster, with real processes:
an urgent job preempts a low one (which ignores SIGTERM, so it is killed after
the grace period, then requeued), and dependencies run in order."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_e2e_jobs import Cluster, _with_pid, alive, job, script, state_is, until

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.client.aio import AsyncHeadClient

NO_MIN_RUNTIME = SchedulerConfig.model_validate(
    {"preemption": {"min_runtime_minutes": 0}}, strict=False
)


@pytest.fixture(params=["ssh", "local"])
async def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    c = Cluster(tmp_path, request.param)
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


async def test_an_urgent_job_preempts_a_low_one_that_ignores_sigterm(cluster: Cluster) -> None:
    client = await cluster.start(grace=0.5, sched=NO_MIN_RUNTIME)
    marker = cluster.tmp / "low-ready"
    code = (
        "import signal, time, pathlib, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " pathlib.Path(sys.argv[1]).touch(); time.sleep(120)"
    )
    low = await client.call(
        "submit",
        {"argv": [*script(code), str(marker)], "gpus": 4, "cwd": "/", "priority": "low"},
    )
    low_id = low["job"]["id"]
    first = await until(lambda: _with_pid(client, low_id))

    async def ready() -> bool:
        return marker.exists()

    await until(ready)  # its SIGTERM handler is in place
    urgent = await client.call(
        "submit",
        {"argv": script("print('urgent done')"), "gpus": 2, "cwd": "/", "priority": "urgent"},
    )
    urgent_id = urgent["job"]["id"]
    preempting = await until(lambda: state_is(client, low_id, "preempting"))
    assert preempting["reason"].startswith(f"preempted for job {urgent_id} (urgent, ")
    # SIGTERM is ignored: SIGKILL after the grace period, then it is requeued.
    done = await until(lambda: state_is(client, urgent_id, "completed"), timeout=30)
    assert done["exit_code"] == 0
    assert not alive(first["pid"])
    again = await until(lambda: _requeued_once(client, low_id), timeout=30)
    assert again["requeues"] == 1
    # Its owner was told why, when it happened.
    with sqlite3.connect(cluster.tmp / "db" / "gputui.db") as db:
        told = [t for (t,) in db.execute("SELECT text FROM notice WHERE job_id = ?", (low_id,))]
    assert any(f"is being preempted: preempted for job {urgent_id} (urgent" in t for t in told)
    await client.call("kill", {"job_id": low_id})
    await until(lambda: state_is(client, low_id, "killed"), timeout=30)


async def _requeued_once(client: AsyncHeadClient, job_id: int) -> dict[str, Any] | None:
    view = await job(client, job_id)
    return view if view["requeues"] == 1 and view["state"] in ("queued", "running") else None


async def test_dependencies_run_in_order_and_a_failed_one_cancels(cluster: Cluster) -> None:
    client = await cluster.start(grace=0.5)
    out = cluster.tmp / "order"
    append = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')"
    gate = cluster.tmp / "gate"
    first_code = (
        "import pathlib, sys, time\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"
        "open(sys.argv[2], 'a').write('first\\n')"
    )
    first = await client.call(
        "submit", {"argv": [*script(first_code), str(gate), str(out)], "gpus": 1, "cwd": "/"}
    )
    a = first["job"]["id"]
    second = await client.call(
        "submit",
        {"argv": [*script(append), str(out), "second"], "cwd": "/", "after": [a], "after_ok": True},
    )
    b = second["job"]["id"]
    fails = await client.call(
        "submit", {"argv": script("raise SystemExit(3)"), "cwd": "/", "after": [b]}
    )
    c = fails["job"]["id"]
    never = await client.call(
        "submit",
        {"argv": [*script(append), str(out), "never"], "cwd": "/", "after": [c], "after_ok": True},
    )
    d = never["job"]["id"]
    waiting = await until(lambda: state_is(client, b, "queued"))
    assert waiting["reason"] == "Dependency"
    gate.touch()
    await until(lambda: state_is(client, c, "failed"), timeout=30)
    cancelled = await until(lambda: state_is(client, d, "cancelled"), timeout=30)
    assert cancelled["reason"] == f"dependency job {c} failed"
    assert out.read_text().splitlines() == ["first", "second"]
