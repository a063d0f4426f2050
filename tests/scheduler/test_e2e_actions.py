"""End to end: actions on a job while it is being stopped, through the real CLI,
on a real head whose host runs the job as a real process that is signalled for real."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_e2e_jobs import GPUTUI, Cluster, job, script, state_is, until

from gputui.scheduler.client.errors import HeadError


@pytest.fixture
async def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    c = Cluster(tmp_path, "local")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


async def gputui(sock: Path, *argv: str) -> tuple[int, str, str]:
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(sock))
    proc = await asyncio.create_subprocess_exec(
        *GPUTUI, *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_cancel_of_a_job_being_preempted_ends_it_and_it_never_runs_again(
    local: Cluster,
) -> None:
    """The repro: ``gputui preempt J`` then ``gputui cancel J`` while J still runs (it
    ignores SIGTERM): J ends cancelled once its process is gone, never requeued, and
    its command never starts a second time."""
    client = await local.start(grace=2.0)
    starts = local.tmp / "starts"
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "with open(sys.argv[1], 'a') as fh: fh.write('start\\n')\n"
        "time.sleep(120)"
    )
    submitted = await client.call("submit", {"argv": [*script(code), str(starts)], "gpus": 1})
    job_id = submitted["job"]["id"]

    async def started() -> bool:
        return starts.exists() and starts.read_text() == "start\n"

    await until(started)
    preempted = await gputui(local.sock, "preempt", str(job_id))
    cancelled = await gputui(local.sock, "cancel", str(job_id))
    # A second cancel is refused, and says why (not acknowledged and dropped). Asked
    # in-process: a CLI's start on a loaded machine can outlast the 2 s grace, and then
    # the job has ended (and the refusal says that instead).
    with pytest.raises(HeadError, match=f"job {job_id} is already being cancelled"):
        await client.call("cancel", {"job_id": job_id})
    ended = await until(lambda: state_is(client, job_id, *SETTLED), timeout=40)
    assert (ended["state"], ended["requeues"]) == ("cancelled", 0), ended
    assert starts.read_text() == "start\n", "its command ran a second time"
    view = await job(client, job_id)
    assert view["state"] == "cancelled" and view["reason"] == "cancelled by request"
    rc, out, err = preempted
    assert rc == 0 and out.startswith(f"job {job_id}: preempting"), (out, err)
    rc, out, err = cancelled
    assert rc == 0 and out.startswith(f"job {job_id}: killing"), (out, err)
    assert "ends cancelled" in out and "not requeued" in out, (out, err)


SETTLED = ("completed", "failed", "timeout", "killed", "cancelled", "queued", "starting")
"""Ended, or back in the queue (where the bug left it)."""
