"""Requests to a helper and their typed results: checked before they leave, and what
comes back is decoded with ranges and cleaned text, or refused in one clean line."""

from __future__ import annotations

import json
from typing import Any

import hostile
import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import (
    JOB_ID_MAX,
    MAX_JOBS,
    HelperRequest,
    IntervalRequest,
    JobLogRequest,
    Jobs,
    JobsForgetRequest,
    JobSignalRequest,
    JobsRequest,
    LaunchRequest,
    ResultError,
    SignalRequest,
)
from gputui.wire.ops import PtyCloseRequest, PtyOpenRequest, PtySendRequest

NS = "head0001"
UUID = "GPU-11111111-2222-3333-4444-555555555555"


def launch(**fields: Any) -> LaunchRequest:
    base: dict[str, Any] = {"ns": NS, "job_id": 12, "argv": ["python", "train.py"]}
    base.update(fields)
    return LaunchRequest(**base)


def state(job_id: int = 12, state: str = "running", **fields: Any) -> dict[str, Any]:
    return {"job_id": job_id, "state": state, "log_path": "/j/12/output.log", **fields}


def test_every_request_is_one_json_line_with_type_id_and_op() -> None:
    requests: list[HelperRequest[Any]] = [
        SignalRequest(pid=42, signal="KILL", gpu_uuid=UUID, uid=1000, start_ticks=123),
        IntervalRequest(seconds=0.5),
        launch(env={"SEED": "1"}, gpu_uuids=[UUID], time_limit_s=3600, user="alice", uid=1003),
        JobsRequest(ns=NS),
        JobsRequest(ns=NS, job_ids=[1, 2]),
        JobSignalRequest(ns=NS, job_id=12, signal="TERM", grace_s=10),
        JobLogRequest(ns=NS, job_id=12, offset=100, max_bytes=4096),
        JobsForgetRequest(ns=NS, job_ids=[12]),
        PtyOpenRequest(ns=NS, job_id=12, aid=1, rows=30, cols=100),
        PtySendRequest(aid=1, data="aGkK", ack=12),
        PtyCloseRequest(aid=1),
    ]
    for number, request in enumerate(requests, 1):
        text = request.line(number)
        assert text.endswith("\n") and text.count("\n") == 1
        obj = json.loads(text)
        assert (obj["type"], obj["id"], obj["op"]) == ("request", number, request.op)
    assert json.loads(requests[2].line(3)) == {
        "type": "request",
        "id": 3,
        "op": "launch",
        "ns": NS,
        "job_id": 12,
        "user": "alice",
        "uid": 1003,
        "argv": ["python", "train.py"],
        "cwd": None,
        "env": {"SEED": "1"},
        "gpu_uuids": [UUID],
        "time_limit_s": 3600.0,
        "grace_s": 30.0,
        "conda": None,
        "venv": None,
        "image": None,
        "runtime": None,
        "script": None,
        "output": None,
        "pty": False,
        "idle_s": None,
    }
    assert json.loads(requests[3].line(4))["job_ids"] is None


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"ns": "Head0001"}, "ns"),
        ({"ns": "short"}, "ns"),
        ({"ns": "x" * 33}, "ns"),
        ({"job_id": 0}, "job_id"),
        ({"job_id": JOB_ID_MAX + 1}, "job_id"),
        ({"job_id": True}, "job_id"),
        ({"job_id": "12"}, "job_id"),
        ({"argv": []}, "argv"),
        ({"argv": ["python", "a\x00b"]}, "argv"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"OK": "a\x00"}}, "env"),
        ({"gpu_uuids": ["GPU-1,GPU-2"]}, "gpu_uuids"),
        ({"user": "-rf"}, "user"),
        ({"user": "a b"}, "user"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"time_limit_s": float("inf")}, "time_limit_s"),
        ({"grace_s": -1}, "grace_s"),
        ({"cwd": ""}, "cwd"),
        ({"shell": "rm -rf /"}, "shell"),
        ({"image": "ubuntu; reboot"}, "image"),
        ({"image": "--privileged"}, "image"),
        ({"runtime": "lxc"}, "runtime"),
        ({"conda": "a\x00b"}, "conda"),
        ({"venv": ""}, "venv"),
    ],
)
def test_a_bad_launch_never_leaves_the_client(fields: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as info:
        launch(**fields)
    assert info.value.errors()[0]["loc"][0] == where


def test_other_requests_check_their_fields_too() -> None:
    with pytest.raises(ValidationError):
        JobLogRequest(ns=NS, job_id=1, max_bytes=65537)
    with pytest.raises(ValidationError):
        JobSignalRequest(ns=NS, job_id=1, signal="STOP")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        JobsForgetRequest(ns=NS, job_ids=[])
    with pytest.raises(ValidationError):
        JobsRequest(ns=NS, job_ids=list(range(1, MAX_JOBS + 2)))
    with pytest.raises(ValidationError):
        IntervalRequest(seconds=float("nan"))


def test_results_decode_with_ranges_and_cleaned_text() -> None:
    result = launch().decode(
        {**state(pid=55, log_path="/j/\x1b]0;pwned\x07x"), "already": True, "method": "detached"}
    )
    assert (result.job_id, result.state, result.pid, result.already) == (12, "running", 55, True)
    assert result.log_path == "/j/x" and result.active and not result.ended
    jobs = JobsRequest(ns=NS).decode({"jobs": [state(1), state(2, "lost", error="gone")]})
    assert [(j.job_id, j.state, j.ended) for j in jobs.jobs] == [
        (1, "running", False),
        (2, "lost", True),
    ]
    signalled = JobSignalRequest(ns=NS, job_id=12, signal="KILL").decode(
        {**state(state="exited", signal="KILL"), "delivered": True}
    )
    assert signalled.delivered and signalled.signal == "KILL"
    assert JobsForgetRequest(ns=NS, job_ids=[3]).decode({"forgotten": [3]}).forgotten == (3,)
    assert IntervalRequest(seconds=2).decode({"seconds": 2}).seconds == 2.0


def test_log_text_keeps_its_lines_and_loses_its_escapes() -> None:
    log = JobLogRequest(ns=NS, job_id=12).decode(
        {
            "job_id": 12,
            "data": "epoch 1\x1b[2K\r\n\x1b]52;c;ZXZpbA==\x07loss 0.3\tok\n",
            "offset": 40,
            "size": 40,
            "ended": True,
        }
    )
    assert log.data == "epoch 1 \nloss 0.3 ok\n"
    assert log.ended and log.offset == log.size


@pytest.mark.parametrize(
    ("request_", "value", "where"),
    [
        (launch(), state(job_id=0), "job_id"),
        (launch(), state(exit_code=256), "exit_code"),
        (launch(), state(pid=True), "pid"),
        (launch(), state(started_at=float("nan")), "started_at"),
        (launch(), state(state=7), "state"),
        (launch(), {"state": "running"}, "job_id"),
        (launch(), None, "job_id"),
        (JobsRequest(ns=NS), {"jobs": [state()] * (MAX_JOBS + 1)}, "jobs"),
        (JobsRequest(ns=NS), {"jobs": "all"}, "jobs"),
        (
            JobLogRequest(ns=NS, job_id=12),
            {"job_id": 12, "data": "x", "offset": 11, "size": 10, "ended": False},
            "past the log",
        ),
        (
            JobLogRequest(ns=NS, job_id=12),
            {"job_id": 12, "data": "x" * 65537, "offset": 1, "size": 1, "ended": False},
            "data",
        ),
        (IntervalRequest(seconds=1), {"seconds": 1e308}, "seconds"),
        (JobsForgetRequest(ns=NS, job_ids=[1]), {"forgotten": [-1]}, "forgotten"),
    ],
)
def test_a_bad_result_is_one_clean_line(
    request_: HelperRequest[Any], value: dict[str, Any] | None, where: str
) -> None:
    with pytest.raises(ResultError) as info:
        request_.decode(value)
    text = str(info.value)
    assert text.startswith(f"{request_.op} result: ") and where in text
    assert "\n" not in text and len(text) <= 300


@settings(max_examples=200, deadline=None)
@given(hostile.any_json)
def test_any_value_at_all_is_a_result_or_a_result_error(value: Any) -> None:
    for request in (launch(), JobsRequest(ns=NS), JobLogRequest(ns=NS, job_id=1)):
        try:
            request.decode(value if isinstance(value, dict) else {"jobs": value})
        except ResultError as exc:
            assert hostile.is_safe_text(str(exc))


def test_the_jobs_message_is_the_full_list_and_bad_entries_are_dropped_alone() -> None:
    message = decode_helper_line(
        json.dumps(
            {
                "type": "jobs",
                "jobs": [state(1), state(0), state(3, "paused"), state(4, exit_code=-1)],
            }
        )
    )
    assert isinstance(message, Jobs)
    assert [(j.job_id, j.state) for j in message.jobs] == [
        (1, "running"),
        (3, "unknown"),
        (4, "running"),
    ]
    assert message.jobs[2].errors == {"exit_code": "OutOfRange"}
    assert message.notes == ("dropped job entry 1: job_id: OutOfRange",)
    many = decode_helper_line(json.dumps({"type": "jobs", "jobs": [state(1)] * (MAX_JOBS + 5)}))
    assert isinstance(many, Jobs) and len(many.jobs) == MAX_JOBS
    assert many.notes == (f"{MAX_JOBS + 5} job entries sent; kept the first {MAX_JOBS}",)
