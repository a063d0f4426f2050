"""A container job on AMD cards is refused at submit, in one line naming the pool:
gputui's runtimes are given GPUs NVIDIA's way (README: "Containers on AMD cards").
A real head and a real (local) helper on a simulated host with an A100 and an
MI300X: the head knows each card's vendor from the helper's ``hello``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import test_e2e_jobs
from test_e2e_jobs import Cluster, until

from gputui.common.jobenv import RUNTIMES
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.errors import HeadError

SPEC = "a100-80gb+mi300x,name=sim01"


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
    return rows if len(rows) == 2 else None


async def test_an_image_on_an_amd_pool_is_refused_at_submit_in_one_line(cluster: Cluster) -> None:
    client = await cluster.start()
    rows = await until(lambda: _known(client))
    pools = sorted({r["pool"] for r in rows})
    amd = next(p for p in pools if p.startswith("amd-"))
    nvidia = next(p for p in pools if not p.startswith("amd-"))
    argv = [sys.executable, "-c", "print('hi')"]
    before = len((await client.call("queue", {"all": True}))["jobs"])
    for runtime in (None, *RUNTIMES):
        extra = {} if runtime is None else {"runtime": runtime}
        with pytest.raises(HeadError) as refused:
            await client.call(
                "submit",
                {
                    "argv": argv,
                    "gpus": 1,
                    "pool": amd,
                    "cwd": "/",
                    "image": "rocm/pytorch",
                    **extra,
                },
            )
        said = refused.value.message
        assert refused.value.code == "bad-args", said
        assert "\n" not in said and amd in said and "--image" in said, said
        assert said.startswith("submit: --image: pool amd-mi300x has AMD cards"), said
    # Nothing was queued by the refusals.
    assert len((await client.call("queue", {"all": True}))["jobs"]) == before
    # The same image on the NVIDIA pool, and the AMD pool without an image, are taken.
    taken = await client.call(
        "submit",
        {
            "argv": argv,
            "gpus": 1,
            "pool": nvidia,
            "cwd": "/",
            "image": "nvcr.io/x:1",
            "runtime": "docker",
        },
    )
    assert taken["job"]["id"] > 0
    plain = await client.call("submit", {"argv": argv, "gpus": 1, "pool": amd, "cwd": "/"})
    done = await client.call("wait", {"job_id": plain["job"]["id"]}, timeout=60)
    assert done["job"]["state"] == "completed"
