"""Placement on a real head (real SQLite file, real socket; hosts scripted with their
faults in the samples): what the head knows of a card puts it last or keeps it out,
and ``explain`` says which cards were passed over, and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from headkit import ScriptedHosts
from headthread import LineClient, ThreadedHead, poll

from gputui.cli import verbs
from gputui.config.models import HealthThresholds
from gputui.config.scheduler import Placement, SchedulerConfig
from gputui.scheduler.head.actions import Rules
from gputui.wire.messages import ProcessSample

HOST = "node1"
ROGUE = ProcessSample(pid=4242, uid=4242, user="bob", command="python train.py")
# One sample with HW slowdown is "sustained" (critical) under these thresholds.
QUICK = HealthThresholds(hw_slowdown_minutes=1, hw_slowdown_window_minutes=1)


def _hosts() -> ScriptedHosts:
    """gpu0: 20 GiB held by no process; gpu1: bob's process at 77 % with no job or
    claim; gpu2: a critical HW slowdown; gpu3: clean."""
    hosts = ScriptedHosts({HOST: 4})
    hosts.faults[HOST] = {0: {"mem_used_mib": 20480}, 2: {"throttle": ("hw_slowdown",)}}
    hosts.processes[HOST] = {1: (ROGUE,)}
    hosts.util[HOST] = {1: 77}
    return hosts


def job(c: LineClient, job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = c.ok("show", {"job_id": job_id})["job"]
    return found


def _on(c: LineClient, job_id: int) -> list[int]:
    return sorted(int(u.rsplit("-", 1)[1]) for u in job(c, job_id)["gpu_uuids"])


def _submit(c: LineClient) -> int:
    ident: int = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
    return ident


def test_clean_cards_first_dirty_ones_last_a_critical_one_never(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        ThreadedHead(tmp_path, {HOST: 4}, scripted=_hosts(), health=QUICK) as th,
        LineClient(th.sock) as c,
    ):
        first = _submit(c)
        poll(lambda: job(c, first)["state"] == "running", what="the first job running")
        assert _on(c, first) == [3]  # the one clean card
        told = c.ok("explain", {"job_id": first})["passed_over"]
        assert [(p["index"], p["never"], p["why"]) for p in told] == [
            (0, False, "20.0 GiB held by no process"),
            (1, False, "pid 4242 of bob runs on it with no job or claim, the GPU at 77%"),
            (2, True, "HW slowdown in 1 of the last 1 minutes"),
        ]
        assert verbs.main(["--socket", str(th.sock), "explain", str(first)]) == 0
        said = capsys.readouterr().out
        assert "  gpu0 on node1 passed over: 20.0 GiB held by no process (used last)\n" in said
        assert (
            "  gpu2 on node1 passed over: HW slowdown in 1 of the last 1 minutes (never used)"
            in said
        )
        second, third, fourth = _submit(c), _submit(c), _submit(c)
        poll(lambda: job(c, third)["state"] == "running", what="the third job running")
        assert (_on(c, second), _on(c, third)) == ([0], [1])  # the avoided ones, last
        poll(lambda: job(c, fourth)["reason"] == "Resources", what="the fourth job waiting")
        waiting = c.ok("explain", {"job_id": fourth})["passed_over"]
        assert [(p["index"], p["never"]) for p in waiting] == [(2, True)]
        assert th.problems == []


def test_placement_is_configurable(tmp_path: Path) -> None:
    # Nothing avoided and nothing kept out: best fit by index, the critical card too.
    rules = Rules(sched=SchedulerConfig(placement=Placement(avoid=[], never=[])))
    with (
        ThreadedHead(tmp_path, {HOST: 4}, scripted=_hosts(), health=QUICK, rules=rules) as th,
        LineClient(th.sock) as c,
    ):
        ids = [_submit(c) for _ in range(4)]
        poll(lambda: all(job(c, i)["state"] == "running" for i in ids), what="all four running")
        assert [_on(c, i) for i in ids] == [[0], [1], [2], [3]]
        assert c.ok("explain", {"job_id": ids[0]})["passed_over"] == []
        assert th.problems == []
