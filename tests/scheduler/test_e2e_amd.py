"""End to end on a simulated mixed host: a real head places AMD cards by their own
pool and NVIDIA cards by the host's, never both in one job, and a job on AMD cards
sees them through ROCR_/HIP_VISIBLE_DEVICES (the helper is a real child process)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import test_e2e_jobs
from test_e2e_jobs import GPUTUI, Cluster, job

from gputui.cli import verbs
from gputui.scheduler.client.errors import HeadError

MIXED = "2xa100-80gb+2xmi300x,name=sim01"
PRINT = (
    "import os; e = os.environ; print(repr(e.get('CUDA_VISIBLE_DEVICES')),"
    " repr(e.get('HIP_VISIBLE_DEVICES')), repr(e.get('ROCR_VISIBLE_DEVICES')))"
)


@pytest.fixture
async def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))  # the local helper's
    monkeypatch.setattr(test_e2e_jobs, "SIM", MIXED)
    c = Cluster(tmp_path, "local")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


async def test_amd_cards_are_their_own_pool(cluster: Cluster) -> None:
    client = await cluster.start()
    argv = [sys.executable, "-c", PRINT]
    amd = await client.call("submit", {"argv": argv, "gpus": 2, "pool": "amd-mi300x", "cwd": "/"})
    done = await client.call("wait", {"job_id": amd["job"]["id"]}, timeout=30)
    assert done["job"]["state"] == "completed"
    view = await job(client, amd["job"]["id"])
    uuids = view["gpu_uuids"]
    assert len(uuids) == 2 and all(len(u) == len("GPU-") + 16 for u in uuids)  # ROCm's form
    log = await client.call("logs", {"job_id": amd["job"]["id"]})
    assert log["data"] == f"'' '0,1' '{','.join(uuids)}'\n"

    # No pool: NVIDIA cards only. Three never fit on two, and the refusal says how to
    # ask for the AMD cards; two do fit.
    with pytest.raises(HeadError) as refused:
        await client.call("submit", {"argv": argv, "gpus": 3, "cwd": "/"})
    assert refused.value.code == "impossible"
    assert str(refused.value) == (
        "3 GPUs asked for, but no host has more than 2; all of a job's GPUs are on one"
        " host; amd-mi300x cards are asked for with --pool"
    )
    two = await client.call("submit", {"argv": argv, "gpus": 2, "cwd": "/"})
    done = await client.call("wait", {"job_id": two["job"]["id"]}, timeout=30)
    assert done["job"]["state"] == "completed"
    nvidia = (await job(client, two["job"]["id"]))["gpu_uuids"]
    assert not set(nvidia) & set(uuids)
    log = await client.call("logs", {"job_id": two["job"]["id"]})
    assert log["data"] == f"'{','.join(nvidia)}' None None\n"
    listed = await client.call("gpus", {"pool": "amd-mi300x"})
    assert sorted(r["uuid"] for r in listed["gpus"]) == sorted(uuids)


async def test_a_claim_of_amd_cards_gets_the_rocm_variables(
    cluster: Cluster, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The real CLI against the real head: ``gputui env`` and ``gputui run`` on a claim
    of AMD cards set ROCR_/HIP_VISIBLE_DEVICES, not CUDA_VISIBLE_DEVICES."""
    client = await cluster.start()
    claim = (await client.call("claim", {"gpus": 2, "pool": "amd-mi300x", "host": "sim01"}))[
        "claim"
    ]
    uuids = ",".join(claim["gpu_uuids"])
    sock = str(cluster.sock)
    code = await asyncio.to_thread(verbs.main, ["--socket", sock, "env", "--host", "sim01"])
    out = capfd.readouterr().out
    assert code == 0
    assert out == (
        f"export ROCR_VISIBLE_DEVICES={uuids}; export HIP_VISIBLE_DEVICES=0,1;"
        " export CUDA_VISIBLE_DEVICES=\n"
    )
    seen = tmp_path / "seen"
    code_text = (
        "import os; e = os.environ; open(" + repr(str(seen)) + ", 'w').write(' '.join(["
        "repr(e.get('CUDA_VISIBLE_DEVICES')), repr(e.get('HIP_VISIBLE_DEVICES')),"
        " repr(e.get('ROCR_VISIBLE_DEVICES'))]))"
    )
    await client.call("release", {"claim_ids": [claim["id"]]})
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=sock, HIP_VISIBLE_DEVICES="7")
    proc = await asyncio.create_subprocess_exec(
        *GPUTUI, "run", "--pool", "amd-mi300x", "--host", "sim01", "--",
        sys.executable, "-c", code_text,
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err
    cuda, hip, rocr = seen.read_text().split(" ")
    assert (cuda, hip) == ("''", "'0'")  # HIP counts its one card from 0, whatever the caller had
    assert rocr.strip("'") in claim["gpu_uuids"]
