"""The console in front of a real Slurm: who holds each GPU, rogue processes, the queue.

Slurm is the real single-node cluster (``tests/slurmcluster.py``); the console's
telemetry is a fixed picture of that node's four GPUs (their indexes are the ones
``gres.conf`` gives Slurm), with processes on them as a helper would list them. So
which GPU the grid shows a job on comes from Slurm's own allocation (``scontrol show
job -d``'s IDX), and which process is ROGUE from the ownership rule over it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from slurmcluster import SlurmCluster

from gputui.config.models import Config
from gputui.config.slurm import SlurmConfig
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.queue import QueueScreen

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ui"))
from test_scheduler import StaticSource
from ui_fakes import decode
from ui_helpers import grid_line, screen_text, until

pytestmark = pytest.mark.root


def node_snapshot(node: str, procs: dict[int, list[dict[str, object]]]) -> HostSnapshot:
    now = time.time()
    gpus = [
        {"index": i, "uuid": f"GPU-slurm-{i:04d}", "name": "NVIDIA A100", "memory_total_mib": 81920}
        for i in range(4)
    ]
    hello = decode(
        {"type": "hello", "protocol": 1, "helper_version": "t", "hostname": node, "gpus": gpus}
    )
    sample = decode(
        {
            "type": "sample",
            "seq": 1,
            "time": now,
            "gpus": [
                {
                    "index": i,
                    "uuid": f"GPU-slurm-{i:04d}",
                    "util_gpu": 50,
                    "processes": procs.get(i, []),
                }
                for i in range(4)
            ],
        }
    )
    return HostSnapshot(
        name=node, address=node, status=HostStatus.LIVE, pool="gpu", hello=hello,
        sample=sample, received_at=now,
    )  # fmt: skip


def proc(pid: int, user: str, command: str) -> dict[str, object]:
    return {"pid": pid, "uid": 0 if user == "root" else 4242, "user": user, "command": command}


async def test_the_grid_shows_each_slurm_job_on_the_gpus_slurm_gave_it_and_flags_a_rogue(
    slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    blocker = slurm.cmd("sbatch", "--parsable", "--gres=gpu:1", "-J", "warm", "--wrap", "sleep 120")
    job = slurm.cmd("sbatch", "--parsable", "--gres=gpu:2", "-J", "train", "--wrap", "sleep 120")
    first, second = int(blocker.stdout.strip()), int(job.stdout.strip())
    deadline = time.monotonic() + 30
    running: list[str] = []
    while sorted(running) != sorted([str(first), str(second)]):  # squeue's order is its own
        assert time.monotonic() < deadline, f"the jobs never ran: {running} running"
        running = slurm.cmd("squeue", "-h", "-t", "R", "-o", "%i").stdout.split()
        time.sleep(0.05)  # polling slurmctld until a deadline
    detail = slurm.cmd("scontrol", "show", "job", "-d", str(second)).stdout
    idx = [int(i) for i in detail.split("(IDX:")[1].split(")")[0].replace("-", ",").split(",")]
    held = list(range(idx[0], idx[-1] + 1))  # Slurm's own choice, e.g. [1, 2]
    free = [i for i in range(4) if i not in held and i != 0]
    assert len(free) == 1
    procs = {
        held[0]: [proc(501, "root", "python train.py")],  # the job's own: fine
        free[0]: [proc(777, "mallory", "python mine.py")],  # nobody's GPU: ROGUE
    }
    source = StaticSource([node_snapshot(slurm.node, procs)])
    app = GpuTuiApp(source, Config(slurm=SlurmConfig(refresh_s=2)))
    async with app.run_test(size=(200, 50)) as pilot:
        link = app.head.link
        await until(pilot, lambda: link is not None and link.view is not None, "Slurm's state", 30)
        for index in held:
            await until(
                pilot,
                lambda i=index: f"j{second} root" in grid_line(app, f"{slurm.node}:{i}"),
                f"job {second} on GPU {index}",
                30,
            )
        assert f"j{first} root" in grid_line(app, f"{slurm.node}:0")
        line = grid_line(app, f"{slurm.node}:{free[0]}")
        assert "ROGUE" in line and f"j{second} " not in line
        assert "ROGUE" not in grid_line(app, f"{slurm.node}:{held[0]}")
        await pilot.press("Q")
        await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
        await until(pilot, lambda: "RUNNING" in screen_text(app), "Slurm's states on the queue")
        assert "train" in screen_text(app)
