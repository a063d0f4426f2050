"""Energy on Slurm end to end: ``gputui head`` as a process, the simulated helper, Slurm.

The head (``head:`` and ``slurm:`` in hosts.yaml) watches the Slurm node as a
``local: true`` host whose helper simulates four A100s (NVML stubbed by the
simulator: an idle card draws its model's idle power, 60 W, within 2 %). A real job
holds two of them; ``gputui usage --json`` on Slurm then shows the GPU-hours the head
metered (no more than sacct's) and energy whose mean draw per GPU is the idle
power: kWh / metered GPU-hours, computed here from what the simulator is.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
import subprocess
import sys
import time
import uuid
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from realusers import made_users
from slurmcluster import SlurmCluster

from gputui.cli import verbs
from gputui.scheduler.client.aio import AsyncHeadClient

pytestmark = pytest.mark.root

IDLE_W = 60.0
"""The simulated A100-80GB's idle draw (``remote.sim.spec``), jittered by 2 %."""


def gputui(hosts: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = verbs.main(["--hosts", str(hosts), *argv])
    return code, out.getvalue(), err.getvalue()


async def test_a_head_process_meters_a_slurm_jobs_gpus_on_the_simulated_helper(
    slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not slurm.accounting:
        pytest.skip("Slurm accounting not installed (Debian packages slurmdbd and mariadb-server)")
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    monkeypatch.chdir(slurm.jobs)
    sock = tmp_path / "head.sock"
    host = {"name": slurm.node, "local": True, "pool": "a100",
            "sim": f"4xa100-80gb,name=se-{uuid.uuid4().hex[:12]}"}  # fmt: skip
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        json.dumps(
            {
                "refresh_interval": 0.5,
                "hosts": [host],
                "head": {"host": "localhost", "socket": str(sock),
                         "database": str(tmp_path / "db" / "gputui.db")},
                "slurm": {"refresh_s": 2, "partitions": {"a100": "gpu"}},
            }
        ),
        encoding="utf-8",
    )  # fmt: skip
    head = subprocess.Popen(
        [sys.executable, "-m", "gputui", "head", "--hosts", str(hosts)],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "head.log", "wb"),  # noqa: SIM115 (closed with the process)
    )
    try:
        with made_users(1) as (owner,):
            await _metered(slurm, hosts, sock, owner.name, owner.uid, tmp_path)
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()


async def _metered(
    slurm: SlurmCluster, hosts: Path, sock: Path, owner: str, uid: int, tmp: Path
) -> None:
    deadline = time.monotonic() + 60
    while True:  # the head up, its helper's host live
        try:
            client = await AsyncHeadClient.open_local(sock)
            live = any(h["live"] for h in (await client.call("cluster"))["hosts"].values())
            await client.close()
            if live:
                break
        except Exception:  # not listening yet
            pass
        log = (tmp / "head.log").read_text(errors="replace")[-2000:]
        assert time.monotonic() < deadline, f"the head never came up: {log}"
        await asyncio.sleep(0.2)  # polling the head's socket until a deadline
    job = int(
        slurm.cmd("sbatch", "--parsable", "--gres=gpu:2", "--wrap", "sleep 300", user=uid).stdout
    )
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + 86400))
    usage = ("usage", "--json", "--since", "1d", "--until", tomorrow)
    mine: dict[str, Any] = {}
    deadline = time.monotonic() + 90
    while not (mine.get("metered_gpu_h") or 0) >= 2 * 6 / 3600:  # six seconds on each GPU
        assert time.monotonic() < deadline, f"never metered: {mine}"
        await asyncio.sleep(0.5)  # polling the head until a deadline
        code, out, err = await asyncio.to_thread(gputui, hosts, *usage)
        assert code == 0, err
        mine = next((r for r in json.loads(out)["totals"] if r["key"] == owner), {})
    slurm.cmd("scancel", str(job))
    watts = mine["energy_kwh"] * 3.6e6 / (mine["metered_gpu_h"] * 3600)
    assert IDLE_W * 0.97 <= watts <= IDLE_W * 1.03  # the mean draw of an idle card
    assert mine["busy_gpu_h"] == 0  # sleep puts no load on the cards
    assert mine["metered_gpu_h"] <= mine["alloc_gpu_h"] + 2 * 2 / 3600  # not past sacct's
    assert mine["per_node"] is False and mine["cost"] == 0  # no prices configured
