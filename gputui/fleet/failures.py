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

from gputui.common.text import clean
from gputui.fleet.hostkeys import HostKeyVerdict, KeyProblem
from gputui.telemetry import HostStatus
from gputui.wire.messages import Result

# Connection-level exceptions caught at the edge of a host's task.
EDGE_ERRORS = (OSError, asyncssh.Error, asyncio.TimeoutError, EOFError)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a host is not live: the status to show, the line to show, whether to retry fast."""

    status: HostStatus
    message: str
    slow_retry: bool = False
    refused: bool = False
    """The host answered and refused: it is up and its sshd may be back any second
    (a reboot), so retries stay frequent (``LinkTiming.refused_cap``)."""


class HelperFailure(Exception):
    """The helper could not be started or spoke something other than the protocol."""

    def __init__(self, status: HostStatus, message: str, *, slow: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.slow = slow


class SetupFailure(Exception):
    """The SSH set-up on this side cannot work (a missing key file, an encrypted key no
    agent holds): nothing is sent anywhere until a person fixes it."""

    def __init__(self, status: HostStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def unreadable_file(setting: str, field: str, exc: OSError) -> str:
    """One line for a file hosts.yaml names that cannot be read: its path and field."""
    reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
    return f"cannot read {clean(setting, 200)} (hosts.yaml {field}): {clean(reason, 100)}"


class TunnelFailure(Exception):
    """The bastion ``via`` would not open the forward (direct-tcpip) to the host.

    The bastion itself is fine: the host behind it refused, or cannot be routed to.
    That is a connection failure of the host, retried like one.
    """

    def __init__(self, via: str, error: asyncssh.ChannelOpenError) -> None:
        super().__init__(f"via bastion {via}: {error.reason}")
        self.via = via
        self.error = error


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
    return _known_text(str(exc), address) or clean(
        exc.strerror or str(exc) or type(exc).__name__, 200
    )


def _known_text(said: str, address: str) -> str | None:
    """Our words for a socket error described in text (by asyncio, or by a bastion)."""
    lowered = said.lower()
    for needle, text in (
        ("connection refused", "connection refused"),
        ("no route", "no route to host"),
        ("network is unreachable", "network unreachable"),
        ("timed out", "timed out"),
        ("name or service not known", f"DNS lookup of {address} failed"),
        ("temporary failure in name resolution", f"DNS lookup of {address} failed"),
    ):
        if needle in lowered:
            return text
    return None


def tunnel_failure(exc: TunnelFailure, address: str) -> Failure:
    """A bastion's refusal to forward to ``address``: the host is unreachable through it.

    A prohibited forward (``AllowTcpForwarding no``, a ``PermitOpen`` list) is the
    bastion's policy: a person must change it, so it is retried slowly.
    """
    error = exc.error
    said = clean(error.reason, 200) or "channel open failed"
    via = f"via bastion {clean(exc.via, 100)}"
    if error.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED:
        return Failure(
            HostStatus.UNREACHABLE,
            f"{via}: forwarding to {address} refused by the bastion ({said})",
            slow_retry=True,
        )
    text = _known_text(error.reason, address) or said
    return Failure(HostStatus.UNREACHABLE, f"{via}: {text}", refused=text == "connection refused")


def helper_channel_failure(exc: asyncssh.ChannelOpenError) -> HelperFailure:
    """The host would not open a session channel for the helper (sshd's MaxSessions, a
    forced command, a restricted account): the connection works, the helper cannot start."""
    return HelperFailure(
        HostStatus.HELPER_ERROR, f"could not start the helper: {clean(exc.reason, 200)}"
    )


def _too_many_auth_failures(exc: asyncssh.DisconnectError) -> bool:
    return (
        exc.code == asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE
        or "too many authentication failures" in exc.reason.lower()
    )


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
    if isinstance(exc, SetupFailure):
        return Failure(exc.status, exc.message, slow_retry=True)
    if isinstance(exc, TunnelFailure):
        return tunnel_failure(exc, address)
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
        # The link wraps the helper's channel and the connector the bastion's forward;
        # one that reaches here unwrapped is still about the connection.
        return Failure(HostStatus.UNREACHABLE, f"channel refused: {clean(exc.reason, 200)}")
    if isinstance(exc, asyncssh.DisconnectError) and _too_many_auth_failures(exc):
        # sshd's MaxAuthTries: more keys were offered (usually by an agent) than it
        # allows before the right one came up.
        return Failure(
            HostStatus.AUTH_FAILED,
            f"too many authentication failures for {user}@{address}: more keys were "
            "offered than the server allows; set IdentitiesOnly yes with the right "
            "IdentityFile in ~/.ssh/config (or identity_file in hosts.yaml)",
            slow_retry=True,
        )
    if isinstance(exc, asyncssh.DisconnectError):
        return Failure(HostStatus.UNREACHABLE, f"disconnected: {clean(exc.reason, 200)}")
    if isinstance(exc, asyncssh.Error):
        return Failure(HostStatus.UNREACHABLE, clean(exc.reason, 200))
    if isinstance(exc, OSError):
        text = describe_os_error(exc, address)
        return Failure(HostStatus.UNREACHABLE, text, refused=text == "connection refused")
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
