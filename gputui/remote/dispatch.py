"""Requests: one table from op name to handler.

Fast ops (``signal``, ``interval``, ``sim``) answer inline on the sampling loop.
Slow ops (the job requests, ``holders`` and ``reset``) run on a small pool of worker
threads that send their own ``result`` (``Output`` is thread-safe), so a launch
waiting for an exec, a listing of thousands of jobs or a scan of /proc never delays
a sample.
"""

from __future__ import annotations

import contextlib
import json
import math
import queue
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict

from . import gpuops
from .signals import RequestError, send_signal
from .wire import OutputClosed

if TYPE_CHECKING:
    from .helper import Helper

MIN_INTERVAL, MAX_INTERVAL = 0.1, 60.0
WORKERS = 6

Handler = Callable[["Helper", Dict[str, Any]], Dict[str, Any]]


def _op_signal(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    return send_signal(req, helper.gpu_pids, helper.use_pidfd)


def _op_interval(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    seconds = req.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or math.isnan(seconds):
        raise RequestError("bad-request", "seconds must be a number")
    helper.interval = max(MIN_INTERVAL, min(MAX_INTERVAL, float(seconds)))
    return {"seconds": helper.interval}


def _op_sim(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    if not (helper.simulated and hasattr(helper.lib, "inject")):
        raise RequestError("unsupported", "unsupported request op 'sim' (not a simulated helper)")
    fault = req.get("fault")
    if not isinstance(fault, str):
        raise RequestError(
            "bad-request", "fault must be a string like lost@0 (-lost@0 or clear@0 clears)"
        )
    try:
        parsed = helper.lib.inject(fault)
    except ValueError as exc:
        raise RequestError("bad-request", str(exc)) from None
    return {"fault": parsed.kind, "gpu": parsed.gpu, "xid": parsed.xid, "cleared": parsed.cleared}


def _job_op(name: str) -> Handler:
    def handler(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
        method: Callable[[dict[str, Any]], dict[str, Any]] = getattr(helper.job_service(), name)
        return method(req)

    return handler


def _pty_op(name: str) -> Handler:
    def handler(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
        method: Callable[[dict[str, Any]], dict[str, Any]] = getattr(helper.terminals(), name)
        return method(req)

    return handler


# A terminal's input, size and acknowledgements go to a local socket at once (in
# order, each a small write with a short timeout); opening one reads the job's state.
FAST: dict[str, Handler] = {
    "signal": _op_signal,
    "interval": _op_interval,
    "sim": _op_sim,
    "pty_send": _pty_op("write"),
    "pty_close": _pty_op("close"),
}
SLOW: dict[str, Handler] = {
    **{name: _job_op(name) for name in ("launch", "jobs", "job_signal", "job_log", "jobs_forget")},
    "pty_open": _pty_op("open"),
    "holders": gpuops.holders,
    "reset": gpuops.reset,
    "clocks": gpuops.clocks,
}


class Workers:
    """A few daemon threads for slow requests, started on first use."""

    def __init__(self, size: int = WORKERS) -> None:
        self.size = size
        self.tasks: queue.Queue[Callable[[], None]] = queue.Queue()
        self.lock = threading.Lock()
        self.started = 0

    def submit(self, task: Callable[[], None]) -> None:
        with self.lock:
            if self.started < self.size:
                self.started += 1
                threading.Thread(target=self._work, name="helper-worker", daemon=True).start()
        self.tasks.put(task)

    def _work(self) -> None:
        while True:
            self.tasks.get()()


def result(
    rid: int,
    ok: bool,
    value: dict[str, Any] | None = None,
    code: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    return {"type": "result", "id": rid, "ok": ok, "value": value, "code": code, "error": error}


def _answer(helper: Helper, rid: int, handler: Handler, req: dict[str, Any]) -> dict[str, Any]:
    try:
        value = handler(helper, req)
    except RequestError as exc:
        return result(rid, False, code=exc.code, error=exc.message)
    except Exception as exc:
        return result(rid, False, code="internal", error=(f"{type(exc).__name__}: {exc}")[:512])
    return result(rid, True, value=value)


def handle_line(helper: Helper, line: bytes) -> dict[str, Any] | None:
    """One request line -> the message to send back now, or None when a worker will."""
    try:
        req = json.loads(line.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:  # nested thousands deep: RecursionError
        snippet = line[:60].decode("utf-8", errors="replace")
        return {
            "type": "error",
            "fatal": False,
            "message": f"malformed request line ({exc}): {snippet!r}",
        }
    if (
        not isinstance(req, dict)
        or not isinstance(req.get("id"), int)
        or isinstance(req["id"], bool)
    ):
        return {
            "type": "error",
            "fatal": False,
            "message": f"request without an integer id: {str(req)[:60]!r}",
        }
    rid, op = req["id"], req.get("op")
    fast = FAST.get(op) if isinstance(op, str) else None
    if fast is not None:
        return _answer(helper, rid, fast, req)
    slow = SLOW.get(op) if isinstance(op, str) else None
    if slow is None:
        return result(
            rid, False, code="unsupported", error=f"unsupported request op {str(op)[:40]!r}"
        )

    def task() -> None:
        reply = _answer(helper, rid, slow, req)
        with contextlib.suppress(OutputClosed):  # gone: the main loop ends on its own
            helper.out.send(reply)

    helper.workers.submit(task)
    return None
