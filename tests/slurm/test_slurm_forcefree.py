"""Force-free on a Slurm node: Slurm's steps as the caller, then the head's helpers.

The real test Slurm, and a real head (its own thread, a real socket) with the node as
its one scripted host: ``gputui force-free NODE:0`` drains the node in Slurm, cancels
the Slurm job Slurm gave GPU 0, then the head signals what is still on the card.
Without a head the last step says it needs one, and fails.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from slurmcluster import SlurmCluster

from gputui.cli import verbs
from gputui.wire.messages import ProcessSample

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headthread import ThreadedHead

pytestmark = pytest.mark.root


def gputui(hosts: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = verbs.main(["--hosts", str(hosts), *argv])
    return code, out.getvalue(), err.getvalue()


def running(slurm: SlurmCluster, job: str) -> bool:
    return slurm.cmd("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING"


def test_force_free_drains_the_node_cancels_the_slurm_job_then_the_head_stops_the_rest(
    slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    job = slurm.cmd("sbatch", "--parsable", "--gres=gpu:1", "--wrap", "sleep 120").stdout.strip()
    deadline = time.monotonic() + 30
    while not running(slurm, job):
        assert time.monotonic() < deadline
        time.sleep(0.05)  # polling slurmctld until a deadline
    assert "IDX:0" in slurm.cmd("scontrol", "show", "job", "-d", job).stdout
    with ThreadedHead(Path(tempfile.mkdtemp(dir=tmp_path)), {slurm.node: 4}) as th:
        assert th.head is not None and th.hosts is not None
        th.head.force_frees.memory_wait_s = 0.1
        th.head.force_frees.grace_s = lambda: 0.1
        stuck = (
            ProcessSample(
                pid=4242, uid=0, user="root", command="python stuck.py", gpu_mem_mib=20000
            ),
        )
        th.in_loop(lambda: th.hosts.put_processes(slurm.node, 0, stuck) if th.hosts else None)
        hosts = tmp_path / "hosts.yaml"
        hosts.write_text(f"head:\n  socket: {th.sock}\nslurm:\n  refresh_s: 2\n", encoding="utf-8")
        code, out, err = gputui(hosts, "force-free", f"{slurm.node}:0", "--reason", "stuck 20 GB")
        steps = [
            line.split()[0] for line in out.splitlines() if line and not line.startswith(slurm.node)
        ]
        assert steps[:2] == ["drain", "cancel"], (out, err)
        assert "sigterm" in steps, out
        assert any(signal == "TERM" for _, _, signal in th.hosts.process_signals), out
        # The scripted card keeps listing its process: the head says it is not free.
        assert code == 1 and "is not free" in out
    state, _, reason = slurm.cmd("sinfo", "-h", "-N", "-o", "%T|%E").stdout.strip().partition("|")
    assert "drain" in state and reason.startswith(f"force-free {slurm.node}:0: stuck 20 GB")
    assert not running(slurm, job)


def test_force_free_without_a_head_says_the_last_step_needs_one(
    slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("slurm:\n  refresh_s: 2\n", encoding="utf-8")
    code, out, _ = gputui(hosts, "force-free", f"{slurm.node}:1", "--reason", "stuck")
    assert code == 1
    assert [line.split()[:2] for line in out.splitlines()[:3]] == [
        ["drain", "ok"],
        ["cancel", "ok"],
        ["stop", "FAILED"],
    ]
    assert os.environ["SLURM_CONF"] == str(slurm.conf)
