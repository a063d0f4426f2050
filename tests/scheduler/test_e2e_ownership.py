"""Ownership flags, ``enforce`` and idle jobs, end to end on the simulated cluster.

A real head over real helpers (``test_e2e_jobs.Cluster``: over SSH on loopback, or a
``local: true`` host), real jobs, and a real "rogue" process: started here with
``GPUTUI_SIM_GPU`` naming a GPU, which the simulator then lists on that GPU with the
process's own pid, owner and start time read from /proc, as NVML would. The rogue
runs as another user (the rules key on the owner), so these tests need root.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import test_e2e_jobs as e2e
from privileged import account, accounts_lock, need_root
from simscope import sim_env
from test_e2e_jobs import Cluster, job, script, state_is, until

from gputui.config.scheduler import Ownership, SchedulerConfig
from gputui.demo.workloads import python_for_everyone
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.server.wire import LIVE_JOB_STATES

ROGUE = """
import os, signal, time
signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(42))
while True:
    time.sleep(0.05)
"""
GOT_SIGTERM = 42
"""The rogue's exit status once its SIGTERM handler ran."""

TEST_USERS = ("gtu_bob", "gputui-test-rogue")


@pytest.fixture
def rogue_user() -> pwd.struct_passwd:
    """A user other than the one running the tests (whose jobs the head runs)."""
    need_root("the rogue process runs as another user")
    if python_for_everyone() is None:
        pytest.skip("no Python interpreter another user may run")
    with accounts_lock():  # another test process may be making it
        for name in TEST_USERS:
            try:
                return pwd.getpwnam(name)
            except KeyError:
                continue
        name = TEST_USERS[-1]
        made = account("useradd", "--no-create-home", name, check=False)
        if made.returncode != 0:
            pytest.skip(f"no test user: useradd {name} failed: {made.stderr[:200]}")
        return pwd.getpwnam(name)


class Rogues:
    """Processes on simulated GPUs with no job or claim behind them; ended at teardown."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, user: pwd.struct_passwd, gpu_uuid: str) -> subprocess.Popen[bytes]:
        python = python_for_everyone() or sys.executable
        env = sim_env(PATH="/usr/bin:/bin", GPUTUI_SIM_GPU=gpu_uuid, GPUTUI_SIM_UTIL="50")
        proc = subprocess.Popen(
            [python, "-c", ROGUE],
            env=env,
            cwd="/",
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=[],
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def rogues() -> Iterator[Rogues]:
    r = Rogues()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(params=["local", "ssh"])
async def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Cluster]:
    """``test_e2e_jobs``' cluster, its simulated GPUs named for this test alone.

    The simulator names a GPU after its host and index, and puts any process that
    names that GPU on it: with the usual name, jobs of another test run on this
    machine (or left over from one) would show up here, and be flagged and signalled.
    """
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    monkeypatch.setattr(e2e, "SIM", f"4xa100-80gb,name=own-{uuid.uuid4().hex[:12]}")
    c = Cluster(tmp_path, request.param)
    try:
        await c.serve_host()
        yield c
    finally:
        await _kill_leftovers(c)
        await c.close()


async def _kill_leftovers(c: Cluster) -> None:
    """Jobs outlive their head by design: a test that failed half-way must not leave any."""
    if c.client is None or c.head is None:
        return
    client = c.client

    async def none_live() -> bool:
        jobs = (await client.call("queue"))["jobs"]
        live = [j for j in jobs if j["state"] in LIVE_JOB_STATES]
        for j in live:
            if j["state"] not in ("killing", "preempting"):
                await client.call("kill", {"job_id": j["id"]})
        return not live

    with contextlib.suppress(Exception):
        await until(none_live, timeout=30)


def sched(mode: str, grace_s: float = 1.0, idle_minutes: float = 60.0) -> SchedulerConfig:
    ownership = Ownership.model_validate({"mode": mode, "grace_s": grace_s})
    return SchedulerConfig(ownership=ownership, idle_job_minutes=idle_minutes)


def rows(cluster: Cluster, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """A read-only query on the head's database (WAL: the head keeps writing)."""
    conn = sqlite3.connect(f"file:{cluster.tmp / 'db' / 'gputui.db'}?mode=ro", uri=True)
    try:
        return list(conn.execute(sql, params).fetchall())
    finally:
        conn.close()


async def gpu_uuids(client: AsyncHeadClient) -> list[str]:
    gpus = (await client.call("cluster"))["gpus"]
    return [g["uuid"] for g in sorted(gpus, key=lambda g: g["index"])]


async def flag_of(client: AsyncHeadClient, pid: int) -> dict[str, Any] | None:
    flags = (await client.call("cluster"))["flags"]
    return next((f for f in flags if f["pid"] == pid), None)


def ticks(cluster: Cluster) -> int:
    assert cluster.head is not None
    return cluster.head.batch.flags.ticks


async def stop(client: AsyncHeadClient, job_id: int) -> None:
    await client.call("kill", {"job_id": job_id})
    await until(lambda: state_is(client, job_id, "killed"), timeout=30)


async def sleeper_job(client: AsyncHeadClient, **extra: Any) -> dict[str, Any]:
    body = {"argv": script("import time; time.sleep(120)"), "gpus": 1, "cwd": "/", **extra}
    submitted = await client.call("submit", body)
    return await running_with_pid(client, submitted["job"]["id"])


async def running_with_pid(client: AsyncHeadClient, job_id: int) -> dict[str, Any]:
    """The job's view once it runs and its host has said its pid (a job can be shown
    running a moment before that: the first report may come from its starting run)."""

    async def known() -> dict[str, Any] | None:
        view = await state_is(client, job_id, "running")
        return view if view is not None and view["pid"] is not None else None

    found: dict[str, Any] = await until(known)
    return found


async def test_enforce_sends_a_rogue_process_sigterm_audits_it_and_tells_its_owner(
    cluster: Cluster, rogues: Rogues, rogue_user: pwd.struct_passwd
) -> None:
    client = await cluster.start(sched=sched("enforce", grace_s=1.0))
    mine = await sleeper_job(client)
    free = next(u for u in await gpu_uuids(client) if u not in mine["gpu_uuids"])
    rogue = rogues.start(rogue_user, free)

    flag = await until(lambda: flag_of(client, rogue.pid))
    assert flag["user"] == rogue_user.pw_name and flag["kind"] == "no-allocation"
    assert flag["gpu_uuid"] == free and flag["next_signal"] == "TERM"
    assert flag["signal_at"] == pytest.approx(flag["since"] + 1.0)

    # SIGTERM arrives after the grace (the rogue's handler exits with its own status).
    async def ended() -> bool:
        return rogue.poll() is not None

    await until(ended, timeout=30)
    assert rogue.returncode == GOT_SIGTERM

    index = next(g["index"] for g in (await client.call("cluster"))["gpus"] if g["uuid"] == free)
    target = f"pid {rogue.pid} on sim01 GPU {index}"

    async def audited() -> list[dict[str, Any]]:
        found = [r for r in (await client.call("audit"))["rows"] if r["action"] == "enforce"]
        return found if found and found[0]["outcome"] != "SIGTERM sent" else []

    (row,) = await until(audited)
    assert row["target"] == target and row["owner"] == rogue_user.pw_name
    assert row["user"] == "gputui-head" and row["uid"] == 0
    assert row["reason"].startswith("no-allocation: ran ")
    assert row["outcome"].startswith("SIGTERM delivered"), row
    told = rows(cluster, "SELECT kind, text FROM notice WHERE uid = ?", rogue_user.pw_uid)
    assert ("ownership", f"{target} (") in [(k, t[: len(target) + 2]) for k, t in told]
    assert any("was sent SIGTERM" in t for _, t in told), told

    # The job on its own GPU was never flagged nor signalled; the rogue's flag goes.
    await until(lambda: _no_flag(client, rogue.pid))
    assert (await job(client, mine["id"]))["state"] == "running"
    assert not [f for f in (await client.call("cluster"))["flags"] if f["pid"] == mine["pid"]]
    await stop(client, mine["id"])


async def _no_flag(client: AsyncHeadClient, pid: int) -> bool:
    return await flag_of(client, pid) is None


@pytest.mark.parametrize("cluster", ["local"], indirect=True)  # enforce runs over both
async def test_warn_flags_a_rogue_and_a_job_process_outside_its_gpus_and_signals_nothing(
    cluster: Cluster, rogues: Rogues, rogue_user: pwd.struct_passwd
) -> None:
    client = await cluster.start(sched=sched("warn", grace_s=0.0))
    uuids = await gpu_uuids(client)
    # A job that starts a child on a GPU it was not given (past CUDA_VISIBLE_DEVICES).
    code = (
        "import os, subprocess, sys, time\n"
        "mine = os.environ['CUDA_VISIBLE_DEVICES'].split(',')\n"
        "other = next(u for u in sys.argv[1:] if u not in mine)\n"
        "env = dict(os.environ, GPUTUI_SIM_GPU=other)\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], env=env)\n"
        "time.sleep(120)\n"
    )
    submitted = await client.call(
        "submit", {"argv": [*script(code), *uuids], "gpus": 1, "cwd": "/"}
    )
    escaped = await running_with_pid(client, submitted["job"]["id"])
    rogue_gpu = next(u for u in uuids if u not in escaped["gpu_uuids"])
    rogue = rogues.start(rogue_user, rogue_gpu)

    async def both() -> list[dict[str, Any]] | None:
        flags = (await client.call("cluster"))["flags"]
        kinds = {f["kind"] for f in flags}
        return flags if kinds == {"no-allocation", "outside-allocation"} else None

    flags = await until(both)
    by_kind = {f["kind"]: f for f in flags}
    assert by_kind["no-allocation"]["pid"] == rogue.pid
    outside = by_kind["outside-allocation"]
    assert outside["pid"] != escaped["pid"] and outside["gpu_uuid"] not in escaped["gpu_uuids"]
    assert all(f["signal_at"] is None and f["signalled"] is None for f in flags)
    assert escaped["pid"] not in {f["pid"] for f in flags}, "the job on its own GPU"

    # Its owner is told once; a few ticks on, nothing was signalled.
    async def told() -> list[tuple[Any, ...]]:
        return rows(cluster, "SELECT text FROM notice WHERE kind = 'ownership'")

    await until(told)
    later = ticks(cluster) + 4

    async def ticked() -> bool:
        return ticks(cluster) >= later

    await until(ticked)
    notices = rows(cluster, "SELECT uid, text FROM notice WHERE kind = 'ownership'")
    assert sorted(uid for uid, _ in notices) == sorted({rogue_user.pw_uid, os.getuid()})
    assert rogue.poll() is None, "warn signals nothing"
    assert rows(cluster, "SELECT id FROM audit WHERE action = 'enforce'") == []
    queue = await client.call("queue")
    assert {f["pid"] for f in queue["flags"]} == {f["pid"] for f in flags}
    await stop(client, escaped["id"])


@pytest.mark.parametrize("cluster", ["local"], indirect=True)  # enforce runs over both
async def test_an_idle_job_is_flagged_and_its_owner_told_once(cluster: Cluster) -> None:
    # 3.6 s: longer than the simulator may take to list a new job's process (its /proc
    # listing is every 2 s), until which the busy job's GPU reads idle too.
    client = await cluster.start(sched=sched("warn", idle_minutes=0.06))
    idle = await sleeper_job(client, env={"GPUTUI_SIM_UTIL": "0"})
    busy = await sleeper_job(client)

    async def notified() -> list[tuple[Any, ...]]:
        return rows(cluster, "SELECT job_id, text FROM notice WHERE kind = 'idle'")

    ((job_id, text),) = await until(notified)
    assert job_id == idle["id"]
    assert text.startswith(f"job {idle['id']} (") and "has used none of its 1 GPU for" in text
    later = ticks(cluster) + 4

    async def ticked() -> bool:
        return ticks(cluster) >= later

    await until(ticked)
    assert len(rows(cluster, "SELECT id FROM notice WHERE kind = 'idle'")) == 1, "told once"
    state = await client.call("cluster")
    views = {j["id"]: j for j in state["jobs"]}
    assert state["idle_after_s"] == pytest.approx(3.6)
    assert views[idle["id"]]["idle_since"] is not None
    assert views[busy["id"]]["idle_since"] is None
    assert rows(cluster, "SELECT idle_told FROM job WHERE id = ?", busy["id"]) == [(0,)]
    for j in (idle, busy):
        await stop(client, j["id"])
