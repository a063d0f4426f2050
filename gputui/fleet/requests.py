"""One request to a helper: send it, wait for its answer, and say what came of it.

The outcome carries the decoded value and the sentence a person reads: done, refused,
answered badly, or not answered (and whether it was sent at all).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from gputui.common.tasks import within
from gputui.common.text import clean
from gputui.fleet.failures import EDGE_ERRORS, result_message
from gputui.fleet.session import HelperSession
from gputui.telemetry import R, RequestOutcome
from gputui.wire.messages import (
    MAX_REQUEST_BYTES,
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
    ResultError,
    SignalRequest,
)


async def send(
    session: HelperSession | None,
    request: HelperRequest[R],
    *,
    host: str,
    status: str,
    timeout: float,
) -> RequestOutcome[R]:
    """``request`` on ``session`` (``HostLink.request`` says what comes back)."""
    result = await exchange(
        session, request.line, request, host=host, status=status, timeout=timeout
    )
    if isinstance(result, RequestOutcome):
        return result
    return typed_outcome(request, result, host)


async def exchange(
    session: HelperSession | None,
    line_for: Callable[[int], str],
    request: HelperRequest[Any] | None,
    *,
    host: str,
    status: str,
    timeout: float,
) -> Result | RequestOutcome[Any]:
    """Send one line on ``session`` and wait for its ``Result``, or say why none came.

    ``offline``: not sent (no session, or the write failed); ``bad-request``: not
    sent (over the helper's line limit); ``timeout``: sent, no answer in ``timeout``
    s; ``lost``: sent, the session ended first.
    """
    if session is None:
        return RequestOutcome(False, f"{host} is not connected ({status})", "offline")
    request_id = session.next_id()
    line = line_for(request_id)
    size = len(line.encode())
    if size > MAX_REQUEST_BYTES:
        op = request.op if request is not None else "a"
        text = f"{op} request of {size} bytes is over the helper's limit; not sent"
        return RequestOutcome(False, text, "bad-request")
    future: asyncio.Future[Result | None] = asyncio.get_running_loop().create_future()
    session.pending[request_id] = future
    try:
        session.send(line)
        result = await within(future, timeout)
    except asyncio.TimeoutError:
        if request is None:
            text = f"no answer from {host} in {timeout:g} s"
        else:
            text = unanswered_message(request, host, timeout)
        return RequestOutcome(False, text, "timeout")
    except EDGE_ERRORS as exc:
        text = clean(exc, 120) or type(exc).__name__
        return RequestOutcome(False, f"could not reach {host}: {text}", "offline")
    finally:
        session.pending.pop(request_id, None)
    if result is None:
        return RequestOutcome(False, f"lost the connection to {host} before it answered", "lost")
    return result


def typed_outcome(request: HelperRequest[R], result: Result, host: str) -> RequestOutcome[R]:
    """The helper's ``result`` for ``request``: its value decoded, or why it failed."""
    if not result.ok:
        return RequestOutcome(
            False, refused_message(request, result, host), result.code or "refused"
        )
    try:
        value = request.decode(result.value)
    except ResultError as exc:
        return RequestOutcome(False, f"{host} answered badly: {exc}", "bad-result")
    return RequestOutcome(True, done_message(request, value, host), None, value)


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
