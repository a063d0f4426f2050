"""Typed requests over real SSH to a scripted helper: answers, refusals, bad values,
timeouts, and a launch whose answer never came settled by asking ``jobs``."""

from __future__ import annotations

import dataclasses

from scripted_helper import UUID, job_state, plan_body, requests_seen

from gputui.fleet.fleet import Fleet
from gputui.telemetry import HostStatus
from gputui.wire.messages import JobLogRequest, JobsRequest, LaunchRequest, LaunchResult

NS = "head0001"


def launch(job_id: int = 5, **fields: object) -> LaunchRequest:
    base: dict[str, object] = {"ns": NS, "job_id": job_id, "argv": ["python", "train.py"]}
    base.update(fields)
    return LaunchRequest(**base)  # type: ignore[arg-type]


async def scripted_fleet(kit, answers: dict[str, list[object]], **timing: float) -> Fleet:
    server = await kit.servers.start()
    kit.known_hosts(server)
    body = plan_body(kit.tmp_path / "requests.log", answers=answers)
    python = kit.fake_python("python-scripted", body)
    fleet: Fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}]),
        timing=dataclasses.replace(kit.fast_timing, **timing),
    )
    await kit.wait_for(lambda: kit.snap(fleet, "h1").status is HostStatus.LIVE, what="live")
    return fleet


def seen(kit) -> list[dict[str, object]]:
    return requests_seen(kit.tmp_path / "requests.log")


async def test_a_launch_is_sent_as_its_model_and_its_answer_is_typed(kit) -> None:
    answer = {"value": {**job_state(5), "already": False, "method": "detached"}}
    fleet = await scripted_fleet(kit, {"launch": [answer]})
    request = launch(gpu_uuids=[UUID], env={"SEED": "1"}, time_limit_s=60)
    outcome = await fleet.launch("h1", request)
    assert outcome.ok and outcome.code is None, outcome.message
    assert isinstance(outcome.value, LaunchResult)
    assert (outcome.value.job_id, outcome.value.state, outcome.value.method) == (
        5,
        "running",
        "detached",
    )
    assert outcome.message == "job 5 is running on h1"
    sent = seen(kit)
    assert len(sent) == 1
    assert {k: v for k, v in sent[0].items() if k != "id"} == {
        "type": "request",
        "op": "launch",
        **request.model_dump(mode="json"),
    }


async def test_a_refusal_carries_the_helpers_code_and_words(kit) -> None:
    refusal = {"ok": False, "code": "exec-failed", "error": "no such command: \x1b[2Jtrain"}
    fleet = await scripted_fleet(kit, {"launch": [refusal]})
    outcome = await fleet.launch("h1", launch())
    assert not outcome.ok and outcome.code == "exec-failed"
    assert outcome.message == "job 5 not launched on h1: no such command: train"
    assert [r["op"] for r in seen(kit)] == ["launch"]  # answered: nothing to settle


async def test_a_bad_value_is_a_clean_failure_and_the_session_stays(kit) -> None:
    bad = {"value": {**job_state(5), "exit_code": 999}}
    log_bad = {"value": {"job_id": 5, "data": "x", "offset": 9, "size": 3, "ended": True}}
    fleet = await scripted_fleet(kit, {"launch": [bad], "job_log": [log_bad]})
    outcome = await fleet.request("h1", launch())
    assert not outcome.ok and outcome.code == "bad-result" and outcome.value is None
    assert outcome.message.startswith("h1 answered badly: launch result: exit_code: ")
    log = await fleet.request("h1", JobLogRequest(ns=NS, job_id=5))
    assert log.code == "bad-result" and "past the log" in log.message
    before = fleet.samples_received()["h1"]
    await kit.wait_for(lambda: fleet.samples_received()["h1"] > before + 2, what="samples")
    assert kit.snap(fleet, "h1").status is HostStatus.LIVE


async def test_an_unanswered_launch_is_settled_by_asking_jobs(kit) -> None:
    jobs = {"value": {"jobs": [job_state(5, "running")]}}
    fleet = await scripted_fleet(kit, {"launch": ["silent"], "jobs": [jobs]}, request_timeout=0.5)
    outcome = await fleet.launch("h1", launch())
    assert outcome.ok and outcome.code == "resolved", outcome.message
    assert outcome.value is not None and outcome.value.state == "running"
    assert outcome.message == "launch of job 5 on h1 went unanswered; h1 says it is running"
    asked = seen(kit)
    assert [r["op"] for r in asked] == ["launch", "jobs"]
    assert (asked[1]["ns"], asked[1]["job_ids"]) == (NS, [5])
    assert asked[0]["id"] != asked[1]["id"]


async def test_a_launch_the_host_does_not_list_is_said_so(kit) -> None:
    answers: dict[str, list[object]] = {
        "launch": ["silent"],
        "jobs": [{"value": {"jobs": [job_state(6)]}}],
    }
    fleet = await scripted_fleet(kit, answers, request_timeout=0.5)
    outcome = await fleet.launch("h1", launch())
    assert not outcome.ok and outcome.code == "unknown-job" and outcome.value is None
    assert "lists no job 5" in outcome.message and "again is safe" in outcome.message


async def test_a_launch_unanswered_twice_is_unknown_never_a_guess(kit) -> None:
    fleet = await scripted_fleet(
        kit, {"launch": ["silent"], "jobs": ["silent"]}, request_timeout=0.5
    )
    outcome = await fleet.launch("h1", launch())
    assert not outcome.ok and outcome.code == "unknown"
    assert "its state is unknown" in outcome.message


async def test_a_launch_whose_helper_died_is_unknown(kit) -> None:
    fleet = await scripted_fleet(kit, {"launch": ["exit"]})
    outcome = await fleet.launch("h1", launch())
    assert not outcome.ok and outcome.code == "unknown", outcome.message
    assert "lost the connection to h1 before it answered" in outcome.message


async def test_what_is_never_sent(kit) -> None:
    fleet = await scripted_fleet(kit, {"jobs": [{"value": {"jobs": []}}]})
    huge = launch(env={"BLOB": "x" * (1 << 20)})
    outcome = await fleet.launch("h1", huge)
    assert not outcome.ok and outcome.code == "bad-request"
    assert "over the helper's limit; not sent" in outcome.message
    nobody = await fleet.request("nope", JobsRequest(ns=NS))
    assert nobody.code == "unknown-host" and "no host named 'nope'" in nobody.message
    assert seen(kit) == []  # neither reached the helper
    listed = await fleet.request("h1", JobsRequest(ns=NS))
    assert listed.ok and listed.value is not None and listed.value.jobs == ()
    assert listed.message == "h1 lists 0 jobs"


async def test_an_offline_host_is_not_asked_anything(kit) -> None:
    kit.known_hosts()
    fleet = await kit.start_fleet(kit.config([{"name": "down", "port": kit.free_port()}]))
    await kit.wait_for(
        lambda: kit.snap(fleet, "down").status is HostStatus.UNREACHABLE, what="unreachable"
    )
    outcome = await fleet.launch("down", launch())
    assert not outcome.ok and outcome.code == "offline"
    assert outcome.message.startswith("down is not connected (unreachable)")
