"""Every branch of the failure classifier and of the signal-result sentence, exactly.

Written against a mutation pass over ``gputui/fleet/failures.py``: each test here
fails for at least one small change that the fleet suites (real SSH servers) let
through, and runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any

import asyncssh
import hostile
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.fleet.failures import (
    Failure,
    HelperFailure,
    SetupFailure,
    TunnelFailure,
    classify,
    describe_os_error,
    helper_channel_failure,
    result_message,
    unreadable_file,
)
from gputui.fleet.hostkeys import HostKeyVerdict, KeyProblem
from gputui.telemetry import HostStatus
from gputui.wire.messages import Result

UNREACHABLE = HostStatus.UNREACHABLE


def classified(exc: BaseException, **extra: Any) -> Failure:
    return classify(exc, user="alice", address="gpu01", timeout=10.0, **extra)


def said(exc: BaseException) -> tuple[HostStatus, str, bool, bool]:
    failure = classified(exc)
    return failure.status, failure.message, failure.slow_retry, failure.refused


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (errno.ECONNREFUSED, "connection refused"),
        (errno.EHOSTUNREACH, "no route to host"),
        (errno.ENETUNREACH, "network unreachable"),
        (errno.ECONNRESET, "connection reset"),
        (errno.ETIMEDOUT, "timed out"),
        (errno.EPIPE, "connection closed"),
    ],
)
def test_a_socket_error_is_said_in_our_words(number: int, text: str) -> None:
    exc = OSError(number, "Whatever The Kernel Said")
    assert describe_os_error(exc, "gpu01") == text
    if not isinstance(exc, TimeoutError):  # OSError(ETIMEDOUT) is one, classified as such
        assert said(exc) == (UNREACHABLE, text, False, text == "connection refused")


@pytest.mark.parametrize(
    ("what_asyncio_said", "text"),
    [
        (
            "Multiple exceptions: [Errno 111] Connect call failed; Connection Refused",
            "connection refused",
        ),
        ("[Errno 113] Connect call failed: No Route to host", "no route to host"),
        ("Network is unreachable", "network unreachable"),
        ("connect Timed Out", "timed out"),
        ("[Errno -2] Name or service not known", "DNS lookup of gpu01 failed"),
        ("Temporary failure in name resolution", "DNS lookup of gpu01 failed"),
    ],
)
def test_a_bare_os_error_is_read_for_what_it_means(what_asyncio_said: str, text: str) -> None:
    assert said(OSError(what_asyncio_said)) == (
        UNREACHABLE,
        text,
        False,
        text == "connection refused",
    )


def test_an_os_error_we_have_no_words_for_says_its_own_cleanly() -> None:
    assert describe_os_error(OSError(errno.EACCES, "Permission\x1b[2J denied"), "h") == (
        "Permission denied"
    )
    assert describe_os_error(OSError("odd \x07failure"), "h") == "odd failure"
    assert describe_os_error(OSError(), "h") == "OSError"


def test_a_failed_dns_lookup_names_the_host_and_the_resolvers_reason() -> None:
    exc = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert said(exc) == (
        UNREACHABLE,
        "DNS lookup of gpu01 failed: Name or service not known",
        False,
        False,
    )


def test_a_timeout_is_said_with_the_configured_seconds() -> None:
    assert said(asyncio.TimeoutError()) == (UNREACHABLE, "timed out after 10 s", False, False)
    failure = classify(TimeoutError(), user="a", address="h", timeout=2.5)
    assert failure.message == "timed out after 2.5 s"


def test_connection_ends_are_unreachable_and_retried_fast() -> None:
    assert said(asyncssh.ConnectionLost("lost")) == (UNREACHABLE, "connection lost", False, False)
    assert said(EOFError()) == (UNREACHABLE, "connection closed", False, False)
    disconnect = asyncssh.DisconnectError(asyncssh.DISC_BY_APPLICATION, "bye\x1b[2J now")
    assert said(disconnect) == (UNREACHABLE, "disconnected: bye now", False, False)
    other = asyncssh.ProtocolError("bad \x07packet")
    assert said(other) == (UNREACHABLE, "disconnected: bad packet", False, False)
    channel = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "no\x07pe")
    assert said(channel) == (UNREACHABLE, "channel refused: nope", False, False)


def test_an_asyncssh_error_of_no_known_kind_says_its_reason() -> None:
    class Odd(asyncssh.Error):
        pass

    assert said(Odd(1, "strange\x1b[31m thing")) == (UNREACHABLE, "strange thing", False, False)


def test_anything_else_names_its_type_in_one_clean_line() -> None:
    assert said(RuntimeError("boom\nagain\x1b]0;t\x07")) == (
        UNREACHABLE,
        "RuntimeError: boom again",
        False,
        False,
    )


def test_permission_denied_names_the_login_and_is_retried_slowly() -> None:
    exc = asyncssh.PermissionDenied("nope")
    assert said(exc) == (
        HostStatus.AUTH_FAILED,
        "permission denied (publickey) for alice@gpu01",
        True,
        False,
    )


def test_an_unusable_key_or_config_is_a_setup_problem_retried_slowly() -> None:
    assert said(asyncssh.KeyImportError("Invalid\x1b[2J key")) == (
        HostStatus.AUTH_FAILED,
        "cannot set up SSH: Invalid key",
        True,
        False,
    )


def test_the_too_many_auth_failures_line_names_the_login() -> None:
    exc = asyncssh.DisconnectError(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, "bye")
    status, message, slow, refused = said(exc)
    assert (status, slow, refused) == (HostStatus.AUTH_FAILED, True, False)
    assert message.startswith("too many authentication failures for alice@gpu01: ")
    assert "IdentitiesOnly yes" in message


def verdict(problem: KeyProblem) -> HostKeyVerdict:
    return HostKeyVerdict(
        problem=problem,
        host="gpu01",
        port=22,
        presented="SHA256:new",
        expected=("SHA256:old",),
        known_hosts="/k",
    )


@pytest.mark.parametrize(
    ("problem", "status"),
    [
        (KeyProblem.CHANGED, HostStatus.HOST_KEY_CHANGED),
        (KeyProblem.UNKNOWN, HostStatus.HOST_KEY_UNKNOWN),
    ],
)
def test_a_host_key_refusal_follows_our_verdict(problem: KeyProblem, status: HostStatus) -> None:
    seen = verdict(problem)
    failure = classified(asyncssh.HostKeyNotVerifiable("x"), verdict=seen)
    assert failure == Failure(status, seen.message, slow_retry=True)


def test_a_host_key_refused_before_we_were_asked_says_what_asyncssh_said() -> None:
    failure = classified(asyncssh.HostKeyNotVerifiable("revoked\x1b[2J key"))
    assert failure == Failure(
        HostStatus.HOST_KEY_UNKNOWN, "host key of gpu01 not accepted: revoked key", slow_retry=True
    )


@pytest.mark.parametrize("slow", [True, False])
def test_a_helper_failure_keeps_its_status_line_and_pace(slow: bool) -> None:
    exc = HelperFailure(HostStatus.NVML_ERROR, "nvml said no", slow=slow)
    assert classified(exc) == Failure(HostStatus.NVML_ERROR, "nvml said no", slow_retry=slow)


def test_a_session_channel_refused_is_a_clean_helper_error() -> None:
    exc = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "no\x1b[2J\x07 sessions")
    failure = classified(helper_channel_failure(exc))
    assert failure == Failure(
        HostStatus.HELPER_ERROR, "could not start the helper: no sessions", slow_retry=True
    )


def test_a_setup_failure_waits_for_a_person() -> None:
    exc = SetupFailure(HostStatus.AUTH_FAILED, "key is encrypted")
    assert classified(exc) == Failure(HostStatus.AUTH_FAILED, "key is encrypted", slow_retry=True)


def test_a_bastion_refusal_says_the_bastion_and_its_words() -> None:
    empty = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "")
    assert said(TunnelFailure("ops@b\x1b[2J", empty)) == (
        UNREACHABLE,
        "via bastion ops@b: channel open failed",
        False,
        False,
    )
    odd = asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "Weird\x07 Thing")
    assert said(TunnelFailure("b", odd))[1] == "via bastion b: Weird Thing"
    prohibited = asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "no")
    assert said(TunnelFailure("b", prohibited)) == (
        UNREACHABLE,
        "via bastion b: forwarding to gpu01 refused by the bastion (no)",
        True,
        False,
    )


def test_an_unreadable_file_is_named_with_its_field_and_reason() -> None:
    exc = FileNotFoundError(errno.ENOENT, "No Such File")
    assert unreadable_file("~/k\x1b[2Jey", "identity_file", exc) == (
        "cannot read ~/key (hosts.yaml identity_file): no such file"
    )
    assert unreadable_file("/k", "known_hosts", OSError("Odd")) == (
        "cannot read /k (hosts.yaml known_hosts): odd"
    )
    assert unreadable_file("/k", "known_hosts", IsADirectoryError()) == (
        "cannot read /k (hosts.yaml known_hosts): isadirectoryerror"
    )


# -- the helper's answer to a signal request -----------------------------------------


def answer(ok: bool = False, code: str | None = None, error: str | None = None) -> Result:
    return Result(id=1, ok=ok, code=code, error=error)


@pytest.mark.parametrize(
    ("result", "sentence"),
    [
        (answer(ok=True, code="ignored", error="ignored"), "sent SIGTERM to process 42"),
        (answer(code="no_such_process"), "process 42 already exited"),
        (answer(code="No-Such-Process", error="gone"), "process 42 already exited"),
        (answer(code="pid-reused"), "pid 42 was reused by another process; not signalled"),
        (answer(code="not_on_gpu"), "process no longer on that GPU"),
        (
            answer(code="cannot_verify"),
            "pid 42 could not be verified (owner or start time unknown); not signalled",
        ),
        (
            answer(code="permission_denied", error="uid 0 owns it"),
            "permission denied: uid 0 owns it",
        ),
        (
            answer(code="permission-denied", error="Permission denied by policy"),
            "Permission denied by policy",
        ),
        (answer(code="permission_denied"), "permission denied: permission_denied"),
        (answer(code="weird", error="helper\x1b[2J says no"), "not signalled: helper says no"),
        (answer(code="Weird-Code"), "not signalled: weird_code"),
        (answer(), "not signalled: refused"),
    ],
)
def test_a_signal_result_is_one_plain_sentence(result: Result, sentence: str) -> None:
    assert result_message(result, 42, "TERM") == sentence


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), hostile.hostile_text), st.one_of(st.none(), hostile.hostile_text))
def test_a_signal_result_is_always_safe_and_bounded(code: str | None, error: str | None) -> None:
    # As a hostile helper could send it, not as the decoder would have cleaned it.
    result = Result.model_construct(id=1, ok=False, code=code, error=error)
    text = result_message(result, 7, "KILL")
    assert hostile.is_safe_text(text) and len(text) <= 300
