"""Turn what went wrong with a host into a status and one plain line.

Every exception that can come out of connecting, authenticating or talking to a
helper ends up here, at the edge, so nothing above the fleet sees a traceback.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from dataclasses import dataclass

import asyncssh

from gputui.protocol import Result
from gputui.telemetry import HostStatus
from gputui.text import clean

from .hostkeys import HostKeyVerdict, KeyProblem

# Connection-level exceptions caught at the edge of a host's task.
EDGE_ERRORS = (OSError, asyncssh.Error, asyncio.TimeoutError, EOFError)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a host is not live: the status to show, the line to show, whether to retry fast."""

    status: HostStatus
    message: str
    slow_retry: bool = False


class HelperFailure(Exception):
    """The helper could not be started or spoke something other than the protocol."""

    def __init__(self, status: HostStatus, message: str, *, slow: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.slow = slow


_ERRNO_TEXT = {
    errno.ECONNREFUSED: "connection refused",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ECONNRESET: "connection reset",
    errno.ETIMEDOUT: "timed out",
    errno.EPIPE: "connection closed",
}


def describe_os_error(exc: OSError, address: str) -> str:
    if isinstance(exc, socket.gaierror):
        return f"DNS lookup of {address} failed: {exc.strerror or exc}"
    text = _ERRNO_TEXT.get(exc.errno or 0)
    if text:
        return text
    # asyncio raises a bare OSError listing every address it tried.
    lowered = str(exc).lower()
    for needle, text in (
        ("connection refused", "connection refused"),
        ("no route", "no route to host"),
        ("network is unreachable", "network unreachable"),
        ("name or service not known", f"DNS lookup of {address} failed"),
    ):
        if needle in lowered:
            return text
    return clean(exc.strerror or str(exc) or type(exc).__name__, 200)


def classify(
    exc: BaseException,
    *,
    user: str,
    address: str,
    timeout: float,
    verdict: HostKeyVerdict | None = None,
) -> Failure:
    """Map an exception from connecting or streaming to a ``Failure``."""
    if isinstance(exc, HelperFailure):
        return Failure(exc.status, exc.message, slow_retry=exc.slow)
    if isinstance(exc, ValueError) and not isinstance(exc, asyncssh.Error):
        # asyncssh reports unusable keys and ssh_config files as ValueError.
        return Failure(
            HostStatus.AUTH_FAILED, f"cannot set up SSH: {clean(exc, 200)}", slow_retry=True
        )
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        if verdict is not None:
            status = (
                HostStatus.HOST_KEY_CHANGED
                if verdict.problem is KeyProblem.CHANGED
                else HostStatus.HOST_KEY_UNKNOWN
            )
            return Failure(status, verdict.message, slow_retry=True)
        # No verdict: asyncssh refused the key before asking us (a revoked key, a bad
        # certificate). Say what it said; "changed" would be a guess.
        return Failure(
            HostStatus.HOST_KEY_UNKNOWN,
            f"host key of {address} not accepted: {clean(exc.reason, 200)}",
            slow_retry=True,
        )
    if isinstance(exc, asyncssh.PermissionDenied):
        return Failure(
            HostStatus.AUTH_FAILED,
            f"permission denied (publickey) for {user}@{address}",
            slow_retry=True,
        )
    if isinstance(exc, asyncio.TimeoutError):
        return Failure(HostStatus.UNREACHABLE, f"timed out after {timeout:g} s")
    if isinstance(exc, asyncssh.ConnectionLost):
        return Failure(HostStatus.UNREACHABLE, "connection lost")
    if isinstance(exc, asyncssh.ChannelOpenError):
        return Failure(
            HostStatus.HELPER_ERROR,
            f"could not start the helper: {clean(exc.reason, 200)}",
            slow_retry=True,
        )
    if isinstance(exc, asyncssh.DisconnectError):
        return Failure(HostStatus.UNREACHABLE, f"disconnected: {clean(exc.reason, 200)}")
    if isinstance(exc, asyncssh.Error):
        return Failure(HostStatus.UNREACHABLE, clean(exc.reason, 200))
    if isinstance(exc, OSError):
        return Failure(HostStatus.UNREACHABLE, describe_os_error(exc, address))
    if isinstance(exc, EOFError):
        return Failure(HostStatus.UNREACHABLE, "connection closed")
    return Failure(HostStatus.UNREACHABLE, clean(f"{type(exc).__name__}: {exc}", 200))


_RESULT_TEXT = {
    "no_such_process": "process {pid} already exited",
    "pid_reused": "pid {pid} was reused by another process; not signalled",
    "not_on_gpu": "process no longer on that GPU",
    "cannot_verify": "pid {pid} could not be verified (owner or start time unknown); not signalled",
}


def result_message(result: Result, pid: int, signal: str) -> str:
    """A plain sentence for the helper's answer to a signal request."""
    if result.ok:
        return f"sent SIG{signal} to process {pid}"
    code = (result.code or "").lower().replace("-", "_")
    error = result.error or code or "refused"
    if code == "permission_denied":
        denied = error.lower().startswith("permission denied")
        text = error if denied else f"permission denied: {error}"
    elif code in _RESULT_TEXT:
        text = _RESULT_TEXT[code].format(pid=pid)
    else:
        text = f"not signalled: {error}"
    return clean(text, 300)
