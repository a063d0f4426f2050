"""A queued job whose owner's name moved to another uid never runs as the new uid.

End to end: a real head over a real ``local: true`` helper (root), a real user who
submits through the socket (identity from SO_PEERCRED), then ``usermod -u`` moves
that name to another uid while the job waits. When the job's turn comes the helper
refuses it, and the job ends ``failed`` with the one reason; nothing ran.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import test_e2e_jobs as e2e
from privileged import account
from realusers import as_user, made_users
from test_e2e_jobs import Cluster, job, script, state_is, until

from gputui.scheduler.client import HeadClient

pytestmark = pytest.mark.root


@pytest.fixture
async def cluster(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-uid-", dir="/tmp"))
    tmp.chmod(0o755)  # the user reaches the socket by name
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp / "jobs"))
    monkeypatch.setattr(e2e, "SIM", f"2xa100-80gb,name=uid-{uuid.uuid4().hex[:12]}")
    c = Cluster(tmp, "local")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _submit(sock: str, marker: str) -> dict[str, Any]:
    with HeadClient(sock, timeout=20) as client:
        return client.call("submit", {"argv": ["/bin/touch", marker], "gpus": 1, "cwd": "/"})


async def test_a_job_of_a_name_that_moved_to_another_uid_fails_with_the_reason(
    cluster: Cluster,
) -> None:
    client = await cluster.start()
    go = cluster.tmp / "go"
    blocker = await client.call(
        "submit",
        {
            "argv": script(
                f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"
            ),
            "gpus": 2,
            "cwd": "/",
        },
    )
    blocker_id = blocker["job"]["id"]
    await until(lambda: state_is(client, blocker_id, "running"))
    marker = cluster.tmp / "ran"
    with made_users(1, "gtm") as (alice,):
        ran = await asyncio.to_thread(as_user, alice, _submit, str(cluster.sock), str(marker))
        queued = ran.value["job"]
        assert (queued["user"], queued["state"]) == (alice.name, "queued")
        moved = alice.uid + 1000
        account("usermod", "-u", str(moved), alice.name)
        go.touch()
        ended = await until(lambda: state_is(client, queued["id"], "failed", "completed"), 30)
        assert ended["state"] == "failed"
        assert ended["reason"].endswith(
            f" not launched on sim01: user {alice.name} is uid {moved} on this host,"
            f" not uid {alice.uid} who submitted the job: not started"
        )
        assert not marker.exists()
        view = await job(client, queued["id"])
        assert view["user"] == alice.name
