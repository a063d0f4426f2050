"""MIG slices, AMD cards and submit scripts together, end to end: a real head and a
real (local) helper on a simulated host with an H100 in seven 1g.10gb slices and an
MI300X; an array from a script asks for slices (as ``#GPUTUI --mig`` does), and each
job's visibility variables are read back from its log."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import test_e2e_jobs
from test_e2e_jobs import Cluster, job, until

from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.errors import HeadError

SPEC = "h100-mig+mi300x,name=sim01"
PRINT = (
    "import os; e = os.environ; print(repr(e.get('CUDA_VISIBLE_DEVICES')),"
    " repr(e.get('HIP_VISIBLE_DEVICES')), repr(e.get('ROCR_VISIBLE_DEVICES')))"
)
SCRIPT = f"#!{sys.executable}\n{PRINT.replace('; ', chr(10))}\n"


@pytest.fixture
async def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    monkeypatch.setattr(test_e2e_jobs, "SIM", SPEC)
    c = Cluster(tmp_path, "local")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


async def _known(client: AsyncHeadClient) -> list[dict[str, Any]] | None:
    rows = list((await client.call("gpus"))["gpus"])
    return rows if len(rows) == 1 + 7 + 1 else None


async def test_an_array_on_slices_and_an_amd_job_on_one_host(cluster: Cluster) -> None:
    client = await cluster.start()
    rows = await until(lambda: _known(client))
    by_uuid = {r["uuid"]: r for r in rows}
    amd = [r["uuid"] for r in rows if r["pool"] == "amd-mi300x"]
    assert len(amd) == 1 and by_uuid[amd[0]]["mig_profile"] is None

    answer = await client.call(
        "submit",
        {
            "argv": ["show.py"],
            "script": SCRIPT,
            "gpus": 1,
            "cwd": "/",
            "array": "0-2",
            "mig": "1g.10gb",
        },
    )
    first = answer["array"]["id"]
    assert answer["array"]["tasks"] == 3
    for job_id in range(first, first + 3):
        done = await client.call("wait", {"job_id": job_id}, timeout=60)
        assert done["job"]["state"] == "completed"
        view = await job(client, job_id)
        assert view["array_id"] == first and view["mig"] == "1g.10gb"
        (uuid,) = view["gpu_uuids"]
        assert by_uuid[uuid]["mig_profile"] == "1g.10gb" and uuid.startswith("MIG-")
        log = await client.call("logs", {"job_id": job_id})
        assert log["data"] == f"'{uuid}' None None\n"

    # The AMD card by its pool: ROCm's variables, never a slice.
    argv = [sys.executable, "-c", PRINT]
    on_amd = await client.call(
        "submit", {"argv": argv, "gpus": 1, "pool": "amd-mi300x", "cwd": "/"}
    )
    done = await client.call("wait", {"job_id": on_amd["job"]["id"]}, timeout=60)
    assert done["job"]["state"] == "completed"
    assert (await job(client, on_amd["job"]["id"]))["gpu_uuids"] == amd
    log = await client.call("logs", {"job_id": on_amd["job"]["id"]})
    assert log["data"] == f"'' '0' '{amd[0]}'\n"

    # Slices on AMD cards: there are none, refused at once.
    with pytest.raises(HeadError) as refused:
        await client.call(
            "submit",
            {"argv": argv, "gpus": 1, "pool": "amd-mi300x", "mig": "1g.10gb", "cwd": "/"},
        )
    assert refused.value.code == "impossible"
