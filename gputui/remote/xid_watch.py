"""Xid events for the console: the kernel log's history, then NVML's as they happen.

Both run in the helper's daemon threads and put ``("event", message)`` on its inbox;
when NVML's event wait gives up, a non-fatal ``("send", error)`` says so, and why.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Sequence

from .gpus import Gpu
from .kernlog import XID_TEXT, kernel_xid_history, parse_xid_lines, xid_events
from .nvml import NA, NVML_EVENT_TYPE_XID, error_text, is_nvml_error, query, text
from .procs import boot_time

# The event thread only wakes for an event or this timeout: each wake-up is CPU a
# host pays every interval for nothing (the thread is a daemon; exit never waits).
EVENT_WAIT_MS = 5000
# Consecutive failures of the event wait before the event thread gives up (and says
# so), and the pause between tries.
EVENT_MAX_FAILURES = 20
EVENT_RETRY_S = 1.0


def register_xid_events(lib: Any, gpus: Sequence[Gpu], inventory: list[dict[str, Any]]) -> Any:
    """An NVML event set with the GPUs' Xid events, or None when no GPU has them;
    a GPU that cannot has the reason in its inventory ``errors``."""
    event_set = query(lib, "nvmlEventSetCreate")
    if isinstance(event_set, NA):
        for info in inventory:
            info["errors"]["xid_events"] = event_set.error
        return None
    registered = False
    for gpu, info in zip(gpus, inventory):
        if gpu.handle is None:
            continue
        done = query(lib, "nvmlDeviceRegisterEvents", gpu.handle, NVML_EVENT_TYPE_XID, event_set)
        if isinstance(done, NA):
            info["errors"]["xid_events"] = done.error
        else:
            registered = True
    return event_set if registered else None


def send_kernel_history(
    lib: Any, simulated: bool, gpus: Sequence[Gpu], inbox: queue.Queue[tuple[str, Any]]
) -> None:
    """The Xids the kernel logged before this run (the simulator's own log in sim mode)."""
    log_lines = getattr(lib, "kernel_log_lines", None) if simulated else None
    if log_lines is not None:
        records = parse_xid_lines(log_lines(), boot_time())
    else:
        records = kernel_xid_history(boot_time())
    for event in xid_events(records, [g.info for g in gpus], time.time()):
        inbox.put(("event", event))


def watch_xid_events(
    lib: Any,
    event_set: Any,
    gpus: Sequence[Gpu],
    stop: threading.Event,
    inbox: queue.Queue[tuple[str, Any]],
) -> None:
    """NVML event thread: Xid events as they happen, each a wire ``event``.

    Never dies silently: when it gives up (or breaks), the console gets a
    non-fatal ``error`` saying Xid events stopped, and why.
    """
    try:
        reason = _watch(lib, event_set, gpus, stop, inbox)
    except Exception as exc:  # a bug here must not pass unnoticed
        reason = f"{type(exc).__name__}: {exc}"
    if reason is not None and not stop.is_set():
        message = ("Xid events stopped: " + reason)[:512]
        inbox.put(("send", {"type": "error", "fatal": False, "message": message}))


def _watch(
    lib: Any,
    event_set: Any,
    gpus: Sequence[Gpu],
    stop: threading.Event,
    inbox: queue.Queue[tuple[str, Any]],
) -> str | None:
    """The event loop; returns why it gave up, or None when asked to stop."""
    by_uuid = {g.uuid: g for g in gpus}
    failures = 0
    while not stop.is_set():
        try:
            data = lib.nvmlEventSetWait(event_set, EVENT_WAIT_MS)
        except Exception as exc:
            if is_nvml_error(exc) and type(exc).__name__.endswith("Timeout"):
                failures = 0
                continue
            failures += 1
            reason = error_text(exc) if is_nvml_error(exc) else f"{type(exc).__name__}: {exc}"
            if failures >= EVENT_MAX_FAILURES:
                return f"{reason} ({failures} times in a row)"
            stop.wait(EVENT_RETRY_S)
            continue
        try:
            event = _xid_event(lib, data, by_uuid)
        except Exception as exc:  # one malformed event is skipped, not fatal
            failures += 1
            if failures >= EVENT_MAX_FAILURES:
                return f"unreadable event data ({type(exc).__name__}: {exc})"
            continue
        failures = 0
        if event is not None:
            inbox.put(("event", event))
    return None


def _xid_event(lib: Any, data: Any, by_uuid: dict[str, Gpu]) -> dict[str, Any] | None:
    if int(getattr(data, "eventType", 0)) != NVML_EVENT_TYPE_XID:
        return None
    xid = int(data.eventData)
    uuid = query(lib, "nvmlDeviceGetUUID", data.device)
    gpu = by_uuid.get(text(uuid)) if not isinstance(uuid, NA) else None
    return {
        "type": "event",
        "kind": "xid",
        "source": "nvml",
        "time": round(time.time(), 3),
        "gpu_uuid": gpu.uuid if gpu else None,
        "gpu_index": gpu.index if gpu else None,
        "xid": xid,
        "text": f"Xid {xid}: {XID_TEXT.get(xid, 'see the Xid catalog')}",
    }
