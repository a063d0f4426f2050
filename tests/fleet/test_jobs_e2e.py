"""The head's view of jobs through the real helper over real SSH: ``--jobs NS`` from the
fleet, a launch, the pushed job list following the job to its end, its log, forget."""

from __future__ import annotations

import os
import sys

import pytest

from gputui.config.models import Config
from gputui.fleet.fleet import Fleet
from gputui.fleet.link import helper_argv
from gputui.telemetry import HostStatus
from gputui.wire.messages import JobLogRequest, JobsForgetRequest, LaunchRequest

NS = "head0001"


def test_the_namespace_becomes_a_helper_argument_and_a_bad_one_is_refused() -> None:
    fleet = Fleet(Config(), jobs_namespace=NS, helper_args=["--extra"])
    assert fleet.helper_args == ("--extra", "--jobs", NS)
    host = Config.model_validate({"hosts": [{"name": "h", "sim": "1xa10"}]}).resolved()[0]
    assert helper_argv(host, 0.5, fleet.helper_args) == [
        "--sim",
        "1xa10",
        "--interval",
        "0.5",
        "--extra",
        "--jobs",
        NS,
    ]
    for bad in ("Head0001", "short", "x" * 33, "head0001\n", "../etc00"):
        with pytest.raises(ValueError, match="jobs namespace"):
            Fleet(Config(), jobs_namespace=bad)


async def test_a_job_launched_through_the_fleet_is_followed_to_its_end(kit) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(kit.tmp_path),
        "GPUTUI_JOBS_ROOT": str(kit.tmp_path / "jobs"),
    }
    server = await kit.servers.start(env=env)
    kit.known_hosts(server)
    config = kit.config([{"name": "h1", "port": server.port, "sim": "2xa10,name=h1"}])
    fleet = await kit.start_fleet(config, jobs_namespace=NS)
    first = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).jobs_seen_at is not None and s, what="a jobs list"
    )
    assert first.jobs == () and first.status is HostStatus.LIVE
    uuid = first.hello.gpus[1].uuid
    script = "import os, time; time.sleep(0.3); print('on', os.environ['CUDA_VISIBLE_DEVICES'])"
    request = LaunchRequest(ns=NS, job_id=41, argv=[sys.executable, "-c", script], gpu_uuids=[uuid])
    outcome = await fleet.launch("h1", request)
    assert outcome.ok, outcome.message
    assert outcome.value is not None and outcome.value.state == "running"
    again = await fleet.launch("h1", request)  # keyed by job id: nothing new starts
    assert again.ok and again.value is not None and getattr(again.value, "already", False)
    done = await kit.wait_for(
        lambda: [j for j in kit.snap(fleet, "h1").jobs if j.job_id == 41 and j.ended],
        what="the job's end in the pushed list",
    )
    assert (done[0].state, done[0].exit_code) == ("exited", 0)
    log = await fleet.request("h1", JobLogRequest(ns=NS, job_id=41))
    assert log.ok and log.value is not None
    assert log.value.data == f"on {uuid}\n" and log.value.ended
    forgot = await fleet.request("h1", JobsForgetRequest(ns=NS, job_ids=[41]))
    assert forgot.ok and forgot.value is not None and forgot.value.forgotten == (41,)
    await kit.wait_for(lambda: kit.snap(fleet, "h1").jobs == (), what="the job forgotten")
