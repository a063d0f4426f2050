"""MIG slices end to end: a real head, a real (local) helper on a simulated host with
a MIG-enabled A100 (3g.40gb + 2x 2g.20gb), an H100 in seven 1g.10gb slices and a
plain A100, and real jobs whose ``CUDA_VISIBLE_DEVICES`` is read back from their log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import test_e2e_jobs
from test_e2e_jobs import Cluster, job, script, state_is, until

from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.errors import HeadError

SPEC = "a100-80gb-migmix+h100-mig+a100-80gb,name=sim01"
SHOW_ENV = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"


@pytest.fixture
async def mig_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    monkeypatch.setattr(test_e2e_jobs, "SIM", SPEC)
    c = Cluster(tmp_path, "local")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


async def _gpus(client: AsyncHeadClient) -> list[dict[str, Any]]:
    return list((await client.call("gpus"))["gpus"])


async def test_jobs_get_slices_of_their_profile_by_mig_uuid(mig_cluster: Cluster) -> None:
    client = await mig_cluster.start()
    rows = await until(lambda: _slices_known(client))
    by_uuid = {r["uuid"]: r for r in rows}
    cards = [r for r in rows if r["mig_profile"] is None]
    assert [(r["index"], r["state"]) for r in cards] == [(0, "mig"), (1, "mig"), (2, "free")]
    two_g = sorted(r["uuid"] for r in rows if r["mig_profile"] == "2g.20gb")
    assert len(two_g) == 2 and all(u.startswith("MIG-") for u in two_g)
    assert {by_uuid[u]["mig_parent"] for u in two_g} == {cards[0]["uuid"]}

    # One job on one 2g.20gb slice: CUDA_VISIBLE_DEVICES names that slice's MIG- UUID.
    done = await client.call(
        "submit", {"argv": script(SHOW_ENV), "gpus": 1, "cwd": "/", "mig": "2g.20gb"}
    )
    ended = await client.call("wait", {"job_id": done["job"]["id"]}, timeout=30)
    view = await job(client, done["job"]["id"])
    assert ended["job"]["state"] == "completed"
    assert view["gpu_uuids"][0] in two_g
    log = await client.call("logs", {"job_id": view["id"]})
    assert log["data"] == f"{view['gpu_uuids'][0]}\n"

    # Two long jobs take the two 2g.20gb slices, one each; a third waits for one.
    sleep = script("import time; time.sleep(60)")
    ids = [
        (await client.call("submit", {"argv": sleep, "gpus": 1, "cwd": "/", "mig": "2g.20gb"}))[
            "job"
        ]["id"]
        for _ in range(3)
    ]
    first = await until(lambda: state_is(client, ids[0], "running"))
    second = await until(lambda: state_is(client, ids[1], "running"))
    assert sorted(first["gpu_uuids"] + second["gpu_uuids"]) == two_g
    third = await until(lambda: state_is(client, ids[2], "queued"))
    assert third["reason"] == "Resources"
    # Two 1g.10gb slices: both on the H100, by MIG- UUID, in one CUDA_VISIBLE_DEVICES.
    pair = await client.call(
        "submit", {"argv": script(SHOW_ENV), "gpus": 2, "cwd": "/", "mig": "1g.10gb"}
    )
    await client.call("wait", {"job_id": pair["job"]["id"]}, timeout=30)
    pair_view = await job(client, pair["job"]["id"])
    assert {by_uuid[u]["mig_profile"] for u in pair_view["gpu_uuids"]} == {"1g.10gb"}
    log = await client.call("logs", {"job_id": pair_view["id"]})
    assert log["data"] == ",".join(pair_view["gpu_uuids"]) + "\n"
    # A whole card: never a MIG-enabled one, never a slice.
    whole = await client.call("submit", {"argv": script(SHOW_ENV), "gpus": 1, "cwd": "/"})
    await client.call("wait", {"job_id": whole["job"]["id"]}, timeout=30)
    assert (await job(client, whole["job"]["id"]))["gpu_uuids"] == [cards[2]["uuid"]]
    assert (await job(client, pair["job"]["id"]))["mig"] == "1g.10gb"
    # A claim of the 3g.40gb slice: active on it at once; a second one waits.
    three_g = [r["uuid"] for r in rows if r["mig_profile"] == "3g.40gb"]
    held = (await client.call("claim", {"gpus": 1, "mig": "3g.40gb", "wait": False}))["claim"]
    assert held["state"] == "active" and held["gpu_uuids"] == three_g and held["mig"] == "3g.40gb"
    with pytest.raises(HeadError) as busy:
        await client.call("claim", {"gpus": 1, "mig": "3g.40gb", "wait": False})
    assert "not free now" in str(busy.value)
    # By name: a slice by its MIG- UUID; a MIG-enabled card is refused in one line.
    free_1g = next(
        u
        for u in by_uuid
        if by_uuid[u]["mig_profile"] == "1g.10gb" and u not in pair_view["gpu_uuids"]
    )
    named = (await client.call("claim", {"gpu_refs": [free_1g], "wait": False}))["claim"]
    assert named["gpu_uuids"] == [free_1g]
    with pytest.raises(HeadError) as whole_card:
        await client.call("claim", {"gpu_refs": ["sim01:1"], "wait": False})
    assert "MIG mode on" in str(whole_card.value)
    for job_id in ids:
        await client.call("cancel", {"job_id": job_id})


async def test_a_profile_no_card_has_is_refused_in_one_line(mig_cluster: Cluster) -> None:
    client = await mig_cluster.start()
    await until(lambda: _slices_known(client))
    with pytest.raises(HeadError) as refused:
        await client.call(
            "submit", {"argv": script("pass"), "gpus": 1, "cwd": "/", "mig": "7g.80gb"}
        )
    assert "MIG 7g.80gb slices" in str(refused.value)
    with pytest.raises(HeadError) as bad:
        await client.call("submit", {"argv": script("pass"), "gpus": 1, "cwd": "/", "mig": "big"})
    assert "not a MIG profile" in str(bad.value)
    with pytest.raises(HeadError) as whole:  # 4 whole cards: only one has MIG off
        await client.call("submit", {"argv": script("pass"), "gpus": 2, "cwd": "/"})
    assert "more than 1" in str(whole.value)


async def test_a_drained_card_takes_no_work_on_its_slices(mig_cluster: Cluster) -> None:
    client = await mig_cluster.start()
    await until(lambda: _slices_known(client))
    await client.call("drain", {"target": "sim01:0", "reason": "fan noise"})
    sent = await client.call(
        "submit", {"argv": script("pass"), "gpus": 1, "cwd": "/", "mig": "3g.40gb"}
    )
    waiting = await until(lambda: _reason(client, sent["job"]["id"], "Drained"))
    assert waiting["state"] == "queued" and waiting["gpu_uuids"] == []
    await client.call("undrain", {"target": "sim01:0"})
    done = await client.call("wait", {"job_id": sent["job"]["id"]}, timeout=30)
    assert done["job"]["state"] == "completed"


async def _reason(client: AsyncHeadClient, job_id: int, reason: str) -> dict[str, Any] | None:
    view = await job(client, job_id)
    return view if view["reason"] == reason else None


async def _slices_known(client: AsyncHeadClient) -> list[dict[str, Any]] | None:
    rows = await _gpus(client)
    return rows if len(rows) == 3 + 3 + 7 and rows[0]["state"] == "mig" else None
