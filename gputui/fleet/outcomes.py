"""The sentence a person reads for each helper answer: done, refused, or not answered."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gputui.protocol import (
    HelperRequest,
    IntervalResult,
    JobLogResult,
    JobsForgetResult,
    JobSignalRequest,
    JobSignalResult,
    JobsResult,
    LaunchRequest,
    LaunchResult,
    Result,
    SignalRequest,
)
from gputui.text import clean

from .failures import result_message


def done_message(request: HelperRequest[Any], value: BaseModel, host: str) -> str:
    """What the helper did, in a sentence (``value`` is the decoded result)."""
    if isinstance(request, SignalRequest):
        return f"sent SIG{request.signal} to process {request.pid}"
    if isinstance(value, IntervalResult):
        return f"{host} samples every {value.seconds:g} s"
    if isinstance(value, LaunchResult):
        if value.already:
            return f"job {value.job_id} was already launched on {host}: {value.state}"
        return f"job {value.job_id} is {value.state} on {host}"
    if isinstance(value, JobSignalResult) and isinstance(request, JobSignalRequest):
        if value.delivered:
            return f"sent SIG{request.signal} to job {value.job_id} on {host}"
        return f"job {value.job_id} on {host} had nothing left to signal ({value.state})"
    if isinstance(value, JobsResult):
        return f"{host} lists {len(value.jobs)} job{'s' if len(value.jobs) != 1 else ''}"
    if isinstance(value, JobLogResult):
        return f"read job {value.job_id}'s log on {host} up to byte {value.offset} of {value.size}"
    if isinstance(value, JobsForgetResult):
        return f"{host} forgot {len(value.forgotten)} job{'s' if len(value.forgotten) != 1 else ''}"
    return f"{request.op} done on {host}"


def refused_message(request: HelperRequest[Any], result: Result, host: str) -> str:
    """Why the helper said no, in a sentence."""
    if isinstance(request, SignalRequest):
        return result_message(result, request.pid, request.signal)
    error = clean(result.error or result.code or "refused", 240)
    if isinstance(request, LaunchRequest):
        return f"job {request.job_id} not launched on {host}: {error}"
    return f"{request.op} on {host}: {error}"


def unanswered_message(request: HelperRequest[Any], host: str, timeout: float) -> str:
    """No answer in time: the request went out, so the helper may still act on it."""
    note = request.timeout_note
    return f"no answer from {host} in {timeout:g} s" + (f"; {note}" if note else "")
