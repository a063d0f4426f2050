"""The head's fences end to end: a real head, a real helper on simulated GPUs (over
SSH on loopback, or a ``local: true`` host), faults armed in the simulator.

A condition only a health reading shows (a failed or pending row remap) is in one
sample of every few: the fence holds between readings (one audit row, the card
fenced throughout, a claim on it refused). An admin's unfence waives the condition
it named and nothing else: a new condition on the same card fences it again. On an
NVSwitch system the fabric not ready and an NVLink down fence too.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import pytest
import test_e2e_jobs as e2e
from pydantic import BaseModel, ConfigDict
from test_e2e_jobs import Cluster, until

from gputui.config.loader import parse_config
from gputui.scheduler.client.aio import AsyncHeadClient, HeadError
from gputui.wire.ops import HelperRequest

HEALTH_EVERY_S = 1.5
"""Seconds between the helper's health readings here (samples every 0.5 s)."""
WINDOW_S = 4 * HEALTH_EVERY_S
"""Watched for this long: several reading periods, a dozen samples."""


class _Fast(Cluster):
    """``Cluster`` with health readings every ``HEALTH_EVERY_S``."""

    async def serve_host(self) -> None:
        await super().serve_host()
        self._data["health_every_s"] = HEALTH_EVERY_S
        self._config = parse_config(json.dumps(self._data), "e2e-config")


class _SimResult(BaseModel):
    model_config = ConfigDict(extra="allow")


class SimFault(HelperRequest[_SimResult]):
    """The simulator's ``sim`` request: arm (or clear) a fault at run time."""

    op: ClassVar[str] = "sim"
    result_model: ClassVar[type[BaseModel]] = _SimResult
    fault: str


async def _cluster(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: str
) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    name = f"fe-{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(e2e, "SIM", f"4xa100-80gb,name={name}{faults}")
    c = _Fast(tmp_path, request.param)
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


@pytest.fixture(params=["local", "ssh"])
async def remap(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    """GPU 1 an RMA card (a failed remap), GPU 2 idle with a remap pending."""
    async for c in _cluster(
        request, tmp_path, monkeypatch, ",fault=remap-failed@1,fault=remap-pending@2"
    ):
        yield c


@pytest.fixture(params=["local", "ssh"])
async def plain(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    async for c in _cluster(request, tmp_path, monkeypatch, ""):
        yield c


def _fence_rows(cluster: Cluster) -> list[tuple[str, str, str, str]]:
    engine = cluster.head.store.engine if cluster.head is not None else None
    assert engine is not None
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT action, target, user, outcome FROM audit"
            " WHERE action IN ('fence', 'unfence') ORDER BY id"
        ).all()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


async def _fences(client: AsyncHeadClient) -> dict[int, str | None]:
    gpus = (await client.call("cluster"))["gpus"]
    return {g["index"]: (g["fence"] or {}).get("code") for g in gpus}


async def _claim_refused(client: AsyncHeadClient, ref: str) -> str:
    try:
        got = await client.call("claim", {"gpu_refs": [ref], "wait": False})
    except HeadError as exc:
        return str(exc)
    raise AssertionError(f"a claim on the fenced {ref} was granted: {got}")


async def _sim(cluster: Cluster, fault: str) -> None:
    assert cluster.head is not None
    outcome = await cluster.head.hosts.fleet.request("sim01", SimFault(fault=fault))  # type: ignore[attr-defined]
    assert outcome.ok, outcome.message


async def test_a_fence_on_a_health_reading_holds_between_readings(remap: Cluster) -> None:
    client = await remap.start()
    wanted = {1: "remap-failed", 2: "remap-pending"}

    async def fenced() -> bool:
        now = await _fences(client)
        return all(now.get(i) == code for i, code in wanted.items())

    await until(fenced)
    rows = _fence_rows(remap)
    deadline = time.monotonic() + WINDOW_S
    while time.monotonic() < deadline:
        now = await _fences(client)
        assert {i: now.get(i) for i in wanted} == wanted, now  # never lifted in between
        assert now.get(0) is None and now.get(3) is None
        await asyncio.sleep(0.1)
    assert _fence_rows(remap) == rows
    # Exactly one fence row per card, none lifting it.
    assert sorted((a, t, u) for a, t, u, _ in rows) == [
        ("fence", "sim01:1", "gputui-head"),
        ("fence", "sim01:2", "gputui-head"),
    ]
    for ref in ("sim01:1", "sim01:2"):
        assert "not free" in await _claim_refused(client, ref)


async def test_an_unfence_waives_only_the_condition_it_named(plain: Cluster) -> None:
    client = await plain.start()
    await _sim(plain, "xid:48@1")
    await until(lambda: _code_is(client, 1, "xid-48"))
    done = await client.call("unfence", {"target": "sim01:1", "reason": "ran a memtest, fine"})
    assert done["outcome"] == "fence xid-48 lifted"
    assert (await _fences(client)).get(1) is None
    # Uncorrected ECC errors now: a new condition fences it again.
    await _sim(plain, "ecc@1")
    await until(lambda: _code_is(client, 1, "ecc-uncorrected"))
    assert "not free" in await _claim_refused(client, "sim01:1")
    rows = [(a, t) for a, t, _, _ in _fence_rows(plain)]
    assert rows == [("fence", "sim01:1"), ("unfence", "sim01:1"), ("fence", "sim01:1")]
    # Unfenced again, then a failed remap: fenced again, and the two waivers stay.
    await client.call("unfence", {"target": "sim01:1", "reason": "ECC counted by a test rig"})
    await _sim(plain, "remap-failed@1")
    await until(lambda: _code_is(client, 1, "remap-failed"))
    await _sim(plain, "xid:79@1")
    await until(lambda: _code_is(client, 1, "xid-79"))  # worse than a remap: named


async def _code_is(client: AsyncHeadClient, index: int, code: str) -> bool:
    return (await _fences(client)).get(index) == code


async def test_the_unfence_of_a_still_lost_gpu_says_so(plain: Cluster) -> None:
    client = await plain.start()
    await _sim(plain, "lost@3")
    await until(lambda: _code_is(client, 3, "lost"))
    done = await client.call("unfence", {"target": "sim01:3", "reason": "try it"})
    assert done["outcome"] == (
        "fence lost lifted; the GPU is still lost (NVML GpuIsLost):"
        " no work lands there until it is back"
    )
    assert _fence_rows(plain)[-1][3] == done["outcome"]  # the audit row says so too
    assert "not free" in await _claim_refused(client, "sim01:3")
    assert (await _fences(client)).get(3) is None  # waived: not fenced again for it


@pytest.fixture(params=["local"])
async def nvswitch(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    """An HGX-like host: H100s on an NVSwitch fabric."""
    async for c in _cluster(request, tmp_path, monkeypatch, ""):
        c._data["hosts"][0]["sim"] = (
            f"4xh100,name=fe-{uuid.uuid4().hex[:12]},fault=fabric@0,fault=nvlink-down@1"
        )
        c._config = parse_config(json.dumps(c._data), "e2e-config")
        yield c


async def test_fabric_not_ready_and_an_nvlink_down_fence_on_an_nvswitch_system(
    nvswitch: Cluster,
) -> None:
    client = await nvswitch.start()
    wanted = {0: "fabric", 1: "nvlink-down", 2: None, 3: None}
    await until(lambda: _all_codes(client, wanted))
    deadline = time.monotonic() + WINDOW_S
    while time.monotonic() < deadline:
        assert await _all_codes(client, wanted), await _fences(client)
        await asyncio.sleep(0.2)
    assert sorted(t for _, t, _, _ in _fence_rows(nvswitch)) == ["sim01:0", "sim01:1"]


async def _all_codes(client: AsyncHeadClient, wanted: dict[int, str | None]) -> bool:
    return await _fences(client) == wanted
