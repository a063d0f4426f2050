"""Force-free end to end: a real head, real helpers on simulated GPUs, real processes.

The cluster is ``test_e2e_ownership``'s (over SSH on loopback, or a ``local: true``
host), its GPU 3 holding 20 GiB that no process owns (the simulator's ``orphan``
fault, which a GPU reset clears). On GPU 0 runs a job and, beside it, another
user's process that ignores SIGTERM; GPU 1 is claimed and runs its owner's
process. Each card is force-freed and every step checked: in the pushes as they
come, in the final answer, in the audit trail, and on the processes themselves.
Needs root (the stray processes run as another user).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import test_e2e_jobs as e2e
from simscope import sim_env
from test_e2e_jobs import Cluster, state_is, until
from test_e2e_ownership import _kill_leftovers, rogue_user, rows, sleeper_job  # noqa: F401

from gputui.demo.workloads import python_for_everyone
from gputui.scheduler.client.aio import AsyncHeadClient

STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(0.05)
"""
POLITE = """
import os, signal, time
signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(42))
while True:
    time.sleep(0.05)
"""
REPO = Path(__file__).resolve().parents[2]


class Strays:
    """Processes on simulated GPUs with no job behind them; killed at teardown."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, user: pwd.struct_passwd | None, gpu_uuid: str, code: str
    ) -> subprocess.Popen[bytes]:
        python = python_for_everyone() or sys.executable
        env = sim_env(PATH="/usr/bin:/bin", GPUTUI_SIM_GPU=gpu_uuid, GPUTUI_SIM_UTIL="50")
        who: dict[str, Any] = {}
        if user is not None:
            who = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        proc = subprocess.Popen(
            [python, "-c", code], env=env, cwd="/", start_new_session=True, **who
        )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def strays() -> Iterator[Strays]:
    s = Strays()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=["local", "ssh"])
async def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    name = f"ff-{uuid.uuid4().hex[:12]}"
    monkeypatch.setattr(e2e, "SIM", f"4xa100-80gb,name={name},fault=orphan@3")
    c = Cluster(tmp_path, request.param)
    try:
        await c.serve_host()
        yield c
    finally:
        await _kill_leftovers(c)
        await c.close()


async def _gpus(client: AsyncHeadClient) -> dict[int, str]:
    return {g["index"]: g["uuid"] for g in (await client.call("cluster"))["gpus"]}


async def _on_card(cluster: Cluster, index: int, *pids: int) -> bool:
    assert cluster.head is not None
    got = cluster.head.watch.samples().get("sim01")
    if got is None:
        return False
    seen = {p.pid for g in got[1].gpus if g.index == index for p in g.processes}
    return set(pids) <= seen


async def _force_free(client: AsyncHeadClient, gpu: int, **extra: Any) -> dict[str, Any]:
    args = {"host": "sim01", "gpu": str(gpu), "reason": "stuck card, ticket 42", **extra}
    return await client.call("force_free", args, timeout=90)


async def _pushed(client: AsyncHeadClient, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pushes = client.pushes()
    while len(out) < count:
        message = await asyncio.wait_for(pushes.__anext__(), 10)
        if message.get("push") == "force-free":
            out.append(message["step"])
    return out


def _audit(cluster: Cluster, target: str) -> list[tuple[str, str, str]]:
    return [
        (user, reason, outcome)
        for user, reason, outcome in rows(
            cluster,
            "SELECT user, reason, outcome FROM audit WHERE action = 'force-free' AND target = ?"
            " ORDER BY id",
            target,
        )
    ]


async def test_force_free_takes_a_card_back_from_a_job_and_a_process_that_ignores_sigterm(
    cluster: Cluster,
    strays: Strays,
    rogue_user: pwd.struct_passwd,  # noqa: F811
) -> None:
    client = await cluster.start(grace=1.0)
    mine = await sleeper_job(client)
    gpus = await _gpus(client)
    card = next(i for i, u in gpus.items() if u in mine["gpu_uuids"])
    stubborn = strays.start(rogue_user, gpus[card], STUBBORN)
    await until(lambda: _on_card(cluster, card, stubborn.pid, mine["pid"]))

    result = await _force_free(client, card)
    steps = [(s["step"], s["ok"]) for s in result["steps"]]
    told = [(s["step"], s["ok"], s["outcome"]) for s in result["steps"]]
    pids = f"job pid {mine.get('pid')}, the stubborn one {stubborn.pid}"
    assert steps == [
        ("drain", True), ("stop", True), ("sigterm", True), ("sigkill", True), ("memory", True),
    ], f"{told} ({pids})"  # fmt: skip
    assert result["free"] is True and result["target"] == f"sim01:{card}"
    assert await _pushed(client, len(steps)) == result["steps"], "each step pushed as it came"
    by_step = {s["step"]: s["outcome"] for s in result["steps"]}
    assert by_step["stop"] == f"killing job {mine['id']}; 1 other process to signal"
    assert by_step["sigterm"] == f"pid {stubborn.pid} ({rogue_user.pw_name}) SIGTERM delivered"
    assert f"pid {stubborn.pid} ({rogue_user.pw_name}) SIGKILL delivered" in by_step["sigkill"]
    assert stubborn.wait(10) == -signal.SIGKILL, "it ignored SIGTERM; SIGKILL ended it"
    assert await until(lambda: state_is(client, mine["id"], "killed"), timeout=30)
    assert by_step["memory"].endswith("MiB used, no process: free")

    audit = _audit(cluster, f"sim01:{card}")
    assert [o.split(":")[0] for _, _, o in audit] == [
        "drain", "stop", "sigterm", "sigkill", "memory", "done",
    ]  # fmt: skip
    assert {(u, r) for u, r, _ in audit} == {("root", "stuck card, ticket 42")}
    assert audit[-1][2] == "done: the card is free (still drained)"
    kill_rows = rows(cluster, "SELECT target, reason FROM audit WHERE action = 'kill'")
    assert kill_rows == [] or kill_rows == [
        (f"job {mine['id']}", f"force-free sim01:{card}: stuck card, ticket 42")
    ]
    told = rows(cluster, "SELECT text FROM notice WHERE uid = ?", rogue_user.pw_uid)
    assert any(f"pid {stubborn.pid} sent SIGTERM by root" in t for (t,) in told), told
    # Drained: a new job does not land there.
    drained = rows(cluster, "SELECT drained_by, drain_reason FROM gpu WHERE uuid = ?", gpus[card])
    assert drained == [("root", "force-free: stuck card, ticket 42")]
    (drain_row,) = rows(cluster, "SELECT target, outcome FROM audit WHERE action = 'drain'")
    assert drain_row == (f"sim01:{card}", "drained")


async def test_force_free_releases_a_claim_and_frees_held_memory_with_a_reset_where_allowed(
    cluster: Cluster,
    strays: Strays,
    rogue_user: pwd.struct_passwd,  # noqa: F811
) -> None:
    client = await cluster.start(grace=1.0)
    assert cluster.head is not None
    cluster.head.force_frees.memory_wait_s = 3.0
    gpus = await _gpus(client)
    claim = (await client.call("claim", {"gpu_refs": ["sim01:1"], "note": "debug"}))["claim"]
    assert claim["state"] == "active"
    polite = strays.start(rogue_user, gpus[1], POLITE)
    await until(lambda: _on_card(cluster, 1, polite.pid))

    # The shell command, as an admin runs it: a line per step, exit 0 once free.
    cli = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gputui", "--socket", str(cluster.sock), "force-free", "sim01:1",
        "--reason", "stuck card, ticket 42",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    out, err = await asyncio.wait_for(cli.communicate(), 90)
    lines = out.decode().splitlines()
    assert cli.returncode == 0, (out, err)
    assert [line.split()[:2] for line in lines[:-1]] == [
        ["drain", "ok"], ["stop", "ok"], ["sigterm", "ok"], ["sigkill", "ok"], ["memory", "ok"],
    ], lines  # fmt: skip
    assert lines[1].endswith(f"released claim {claim['id']}; 1 other process to signal")
    assert lines[-1] == "sim01:1 is free; it stays drained until `gputui undrain sim01:1`"
    assert polite.wait(10) == 42, "SIGTERM reached it (its handler's exit status)"
    (released,) = rows(cluster, "SELECT state, release_reason FROM claim WHERE id = ?", claim["id"])
    assert released == ("released", "released")  # root released its own claim

    # GPU 3: 20 GiB held with no process. Not permitted here: the holders, no reset.
    result = await _force_free(client, 3, reset=True)
    by_step = {s["step"]: s for s in result["steps"]}
    assert result["free"] is False
    assert by_step["memory"]["ok"] is False
    assert by_step["memory"]["outcome"].endswith("MiB still held with no process")
    assert by_step["holders"]["ok"] is True and "/dev/nvidia3" in by_step["holders"]["outcome"]
    assert by_step["reset"] == {
        **by_step["reset"], "ok": False,
        "outcome": "refused: head.allow_gpu_reset is false in hosts.yaml",
    }  # fmt: skip
    # Permitted, but not asked: offered. Asked: done, and the memory is back.
    cluster.head.force_frees.allow_reset = True
    offered = await _force_free(client, 3)
    assert offered["steps"][-1]["outcome"] == (
        "not asked: force-free again with --reset to reset the GPU"
    )
    done = await _force_free(client, 3, reset=True)
    assert [(s["step"], s["ok"]) for s in done["steps"][-3:]] == [
        ("holders", True), ("reset", True), ("memory", True),
    ]  # fmt: skip
    assert done["free"] is True
    outcomes = [o for _, _, o in _audit(cluster, "sim01:3")]
    assert outcomes[-4:] == [
        outcomes[-4], outcomes[-3], outcomes[-2], "done: the card is free (still drained)",
    ]  # fmt: skip
    assert re.fullmatch(r"reset: GPU reset; NVML then read \d+ MiB used, 0 process\(es\): free",
                        outcomes[-3]), outcomes[-3]  # fmt: skip
    assert outcomes[-4].startswith("holders: ") and outcomes[-2].startswith("memory: ")
    assert outcomes[0] == "drain: drained" and outcomes.count("drain: already drained by root") == 2
