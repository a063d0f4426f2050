"""The console's view of Slurm, joined with the hosts' GPUs (``slurm_state``): pure.

Jobs and GPU indexes as Slurm would give them (generated), hosts as helpers would
report them: each GPU's holder is the running job Slurm gave that index on that node
(or every GPU of a node a job holds per node), never another's, and the nodes no
host of hosts.yaml is are listed once.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gputui.config.slurm import SlurmConfig
from gputui.scheduler.client.slurm.backend import Snapshot
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.head.slurm import NODE_MARK, SlurmConsole, slurm_state

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ui"))
from ui_fakes import decode

ME = {"uid": 1000, "user": "alice", "admin": False}


def host(name: str, count: int) -> HostSnapshot:
    sample = decode(
        {
            "type": "sample",
            "seq": 1,
            "time": time.time(),
            "gpus": [{"index": i, "uuid": f"GPU-{name}-{i}"} for i in range(count)],
        }
    )
    return HostSnapshot(name=name, address=name, status=HostStatus.LIVE, sample=sample)


def job(number: int, node: str, gpus: int, state: str = "RUNNING") -> dict[str, object]:
    return {"id": number, "user": f"u{number}", "name": f"j{number}", "state": state,
            "gpus": gpus, "host": node, "started_at": 1.0}  # fmt: skip


@given(
    st.lists(
        st.tuples(st.sampled_from(["n1", "n2"]), st.lists(st.integers(0, 7), max_size=4),
                  st.booleans()),
        max_size=6,
    )
)  # fmt: skip
def test_each_gpu_is_held_by_the_job_slurm_gave_it_never_another(
    jobs: list[tuple[str, list[int], bool]],
) -> None:
    views, indexes = [], {}
    for n, (node, idx, per_gpu) in enumerate(jobs, start=1):
        views.append(job(n, node, max(1, len(idx))))
        if per_gpu and idx:
            indexes[n] = {node: idx}
    snap = Snapshot(
        views,
        indexes,
        [{"name": "n1", "state": "mixed", "gres": "", "partition": "p", "reason": ""}],
    )
    state = slurm_state(snap, {"n1": host("n1", 8), "n2": host("n2", 8)}, SlurmConfig(), me=ME)
    for gpu in state["gpus"]:
        holder = gpu["holder"]
        if holder is None:
            continue
        number = holder["id"]
        node, idx, per_gpu = jobs[number - 1]
        assert gpu["host"] == node
        if number in indexes:
            assert gpu["index"] in idx and not holder["name"].endswith(NODE_MARK)
        else:
            assert holder["name"].endswith(NODE_MARK)


def test_nodes_no_host_is_are_said_once_and_again_when_they_change() -> None:
    nodes = [{"name": n, "state": "idle", "gres": "gpu:4", "partition": "p", "reason": ""}
             for n in ("n1", "n9")]  # fmt: skip
    snaps = iter([Snapshot([], {}, nodes), Snapshot([], {}, nodes), Snapshot([], {}, nodes[:1])])

    class Fake:
        name, local = "Slurm", True
        runner = type("R", (), {"version": staticmethod(lambda: (22, 5))})()

        def supports(self, capability: str) -> bool:
            return True

        def snapshot(self) -> Snapshot:
            return next(snaps)

    console = SlurmConsole(Fake(), SlurmConfig(refresh_s=2), lambda: {"n1": host("n1", 4)})  # type: ignore[arg-type]

    async def run() -> list[list[dict[str, object]]]:
        first = await console.subscribe()
        second = await console._state()
        third = await console._state()
        return [first["notices"], console._news(second), console._news(third)]

    told = asyncio.run(run())
    assert (
        len(told[0]) == 1
        and "n9" in str(told[0][0]["text"])
        and "n1" not in str(told[0][0]["text"])
    )
    assert told[1] == [] and told[2] == []
