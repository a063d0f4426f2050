"""Verified signals: a pid is signalled only if it is still the process the user saw.

With a pidfd (Linux >= 5.3, Python >= 3.9) the process is pinned first, then its
owner and start time are checked in /proc and NVML must still list it on the GPU;
the signal then goes through the pidfd, so a pid reused in between cannot be hit.
Elsewhere the start time is re-read immediately before ``os.kill``.
"""

from __future__ import annotations

import errno
import os
import re
import signal as _signal
from typing import Any, Callable, Optional, Set

from .procs import PID_MAX, read_start_ticks, read_uid, user_name

SIGNALS = {
    "TERM": _signal.SIGTERM,
    "KILL": _signal.SIGKILL,
    "INT": _signal.SIGINT,
    "HUP": _signal.SIGHUP,
    "STOP": _signal.SIGSTOP,
    "CONT": _signal.SIGCONT,
}
UUID_RE = re.compile(
    r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)

# gpu uuid -> pids NVML lists on it now, or None when that GPU is unknown or lost.
GpuPids = Callable[[str], Optional[Set[int]]]


class RequestError(Exception):
    """A request refused with a wire error ``code`` (``bad-request``, ...) and one line."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def bad_request(message: str) -> RequestError:
    """A request the helper cannot take as it came (``bad-request``)."""
    return RequestError("bad-request", message)


def pidfd_supported() -> bool:
    """True where ``os.pidfd_open`` exists and the kernel implements it."""
    opener = getattr(os, "pidfd_open", None)
    sender = getattr(_signal, "pidfd_send_signal", None)
    if opener is None or sender is None:
        return False
    try:
        fd = opener(os.getpid())
    except OSError:
        return False
    os.close(fd)
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(req: dict[str, Any]) -> None:
    pid, uid, ticks = req.get("pid"), req.get("uid"), req.get("start_ticks")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 1 < pid < PID_MAX:
        raise RequestError("bad-request", f"pid must be an integer above 1, got {pid!r}")
    if req.get("signal") not in SIGNALS:
        names = ", ".join(SIGNALS)
        got = str(req.get("signal"))[:20]
        raise RequestError("bad-request", f"signal must be one of {names}, got {got!r}")
    uuid = req.get("gpu_uuid")
    if not isinstance(uuid, str) or not UUID_RE.fullmatch(uuid):
        raise RequestError(
            "bad-request",
            "gpu_uuid must look like GPU-xxxxxxxx-xxxx-xxxx-"
            f"xxxx-xxxxxxxxxxxx, got {str(uuid)[:60]!r}",
        )
    if uid is not None and (not _is_int(uid) or uid < 0):
        raise RequestError("bad-request", "uid must be a non-negative integer or null")
    if ticks is not None and (not _is_int(ticks) or ticks < 0):
        raise RequestError("bad-request", "start_ticks must be a non-negative integer or null")
    if uid is None or ticks is None:
        # Without both, a reused pid could not be told apart: never signal blind.
        raise RequestError(
            "cannot-verify",
            f"pid {pid}: its owner and start time are unknown, so it cannot be verified;"
            " not signalled",
        )


def _verify(req: dict[str, Any], gpu_pids: GpuPids) -> int:
    """Check owner, start time and GPU; returns the start ticks seen."""
    pid: int = req["pid"]
    ticks = read_start_ticks(pid)
    if ticks is None:
        raise RequestError("no-such-process", f"no such process: pid {pid}")
    want_ticks = req["start_ticks"]
    if ticks != want_ticks:
        raise RequestError(
            "pid-reused",
            f"pid {pid} is now a different process (started at tick "
            f"{ticks}, expected {want_ticks})",
        )
    want_uid = req["uid"]
    uid = read_uid(pid)
    if uid != want_uid:
        raise RequestError(
            "pid-reused",
            f"pid {pid} now belongs to {user_name(uid)}, expected {user_name(want_uid)}",
        )
    pids = gpu_pids(req["gpu_uuid"])
    if pids is None:
        raise RequestError("not-on-gpu", f"GPU {req['gpu_uuid']} is not known or not readable here")
    if pid not in pids:
        raise RequestError("not-on-gpu", f"pid {pid} is not running on GPU {req['gpu_uuid']}")
    return ticks


def _denied(pid: int) -> RequestError:
    owner = user_name(read_uid(pid))
    who = (f" belongs to {owner}") if owner is not None else " is not yours"
    return RequestError("permission-denied", f"permission denied: pid {pid}{who}")


def send_signal(req: dict[str, Any], gpu_pids: GpuPids, use_pidfd: bool) -> dict[str, Any]:
    """Do a validated ``signal`` request; returns the result's value or raises RequestError."""
    validate(req)
    pid: int = req["pid"]
    signum = SIGNALS[req["signal"]]
    if use_pidfd:
        try:
            fd = os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
        except ProcessLookupError:
            raise RequestError("no-such-process", f"no such process: pid {pid}") from None
        except OSError as exc:
            if exc.errno != errno.ENOSYS:
                raise RequestError(
                    "no-such-process", f"cannot open pid {pid}: {exc.strerror}"
                ) from None
        else:
            try:
                _verify(req, gpu_pids)
                _signal.pidfd_send_signal(fd, signum)  # type: ignore[attr-defined,unused-ignore]
            except ProcessLookupError:
                raise RequestError(
                    "no-such-process", f"pid {pid} exited before the signal"
                ) from None
            except PermissionError:
                raise _denied(pid) from None
            finally:
                os.close(fd)
            return {"method": "pidfd", "pid": pid, "signal": req["signal"]}
    ticks = _verify(req, gpu_pids)
    if read_start_ticks(pid) != ticks:
        raise RequestError("pid-reused", f"pid {pid} changed while being checked")
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        raise RequestError("no-such-process", f"pid {pid} exited before the signal") from None
    except PermissionError:
        raise _denied(pid) from None
    return {"method": "proc-stat", "pid": pid, "signal": req["signal"]}
