"""``gputui run``: claim GPUs for as long as one command runs, then release them.

The claim is held by this process's connection to the scheduler (a
``SessionBackend``): it ends when the process does, however it ends. Loaded only
when it runs (``verbs.handler``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from gputui.cli.args import command_of
from gputui.cli.here import one_line, this_host
from gputui.common.gpu_env import gpu_uuids, visible_env
from gputui.common.i18n import _
from gputui.common.job_words import reason_text
from gputui.scheduler.client.backend import Answer, SessionBackend
from gputui.scheduler.client.errors import HeadError


def dies_with_us() -> Callable[[], None] | None:
    """For the child's side of the fork: SIGTERM when this process dies, however it
    dies (``kill -9`` too), so CMD does not run on with GPUs the head gives away. The
    head keeps the GPUs claimed while a process of CMD's user is still on them.
    Linux only (``PR_SET_PDEATHSIG``); elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None

    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # gputui died between the fork and here
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def _srun(backend: SessionBackend, a: argparse.Namespace, command: list[str]) -> int:
    """On Slurm: ``srun`` runs CMD in an allocation that ends with it; its exit is ours."""
    srun_argv = getattr(backend, "srun_argv", None)
    if srun_argv is None:  # pragma: no cover (only the Slurm backend says srun)
        raise HeadError("unsupported", "run: " + _("this scheduler has no srun"))
    argv = srun_argv(
        command, gpus=a.gpus, pool=a.pool, host=a.host, pty=bool(getattr(a, "pty", False))
    )
    sys.stdout.flush()
    try:
        proc = subprocess.Popen(argv)
    except FileNotFoundError:
        raise HeadError(
            "unreachable", "run: " + _("{command} is not installed here").format(command=argv[0])
        ) from None
    # ^C reaches srun from the terminal (it cancels its own step and allocation): this
    # process only waits for it, never kills it.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)


def run(backend: SessionBackend, a: argparse.Namespace) -> int:
    """Claim GPUs for this connection, run CMD, release: the head releases them too
    when this process dies in any way (its connection to the head drops)."""
    command = command_of(a)
    if backend.supports("srun"):
        return _srun(backend, a, command)
    if a.pty:  # a job on a GPU host, on a terminal kept there, attached to this one
        from gputui.cli.attach import run_pty

        return run_pty(backend, a)
    host = a.host or this_host(backend)
    # The command as a note, on one printable line (the head refuses control
    # characters, and a `python -c` script is often several lines).
    note = one_line(" ".join(command))[:200]
    claim = backend.hold_claim(gpus=a.gpus, host=host, note=note, pool=a.pool)["claim"]
    if claim["state"] != "active":
        try:  # a Ctrl+C the moment the line is out is an interrupted wait too
            told = _("waiting for {count} GPU(s) on {host} ({reason})…").format(
                count=a.gpus, host=host, reason=reason_text(str(claim["reason"]))
            )
            print(f"gputui run: {told}", file=sys.stderr, flush=True)
            claim = _wait_for_grant(backend, claim)
        except KeyboardInterrupt:
            return _cancelled(backend, claim["id"])
    try:
        uuids = gpu_uuids(claim.get("gpu_uuids"))
    except ValueError:
        backend.release(claim_ids=[claim["id"]])
        raise HeadError("protocol", _("the head's claim names no valid GPU UUIDs")) from None
    env = dict(os.environ)
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        env.pop(name, None)
    env.update(visible_env(uuids))
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    print(f"gputui run: c{claim['id']}: {','.join(uuids)}", file=sys.stderr)
    try:
        # The one other thread (the SSH pump, for a remote head) takes no lock the
        # child needs: the hook calls one C function resolved before the fork.
        child = subprocess.Popen(command, env=env, preexec_fn=dies_with_us())  # noqa: PLW1509
    except OSError as exc:
        backend.release(claim_ids=[claim["id"]])
        raise HeadError(
            "exec",
            _("cannot run {command}: {error}").format(
                command=repr(command[0]), error=exc.strerror or exc
            ),
        ) from None

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    code = keep_claim(backend, child, claim["id"])
    # The head releases a session's claim when the connection closes anyway.
    with contextlib.suppress(HeadError):
        backend.release(claim_ids=[claim["id"]])
    return code if code >= 0 else 128 - code


def _cancelled(backend: SessionBackend, claim_id: int) -> int:
    """Ctrl+C while waiting: the claim is given up (the head would on the hang-up too),
    and the line that says so starts on a line of its own, after the terminal's ``^C``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C: no traceback
    try:
        backend.release(claim_ids=[claim_id])
    except (HeadError, OSError):
        backend.hang_up()  # the head ends a session's claim when its connection does
    start = "\n" if sys.stderr.isatty() else ""
    told = _("interrupted; c{claim} cancelled while waiting").format(claim=claim_id)
    print(f"{start}gputui run: {told}", file=sys.stderr)
    return 130


RECONNECT_CAP_S = 2.0
"""At most this long between two tries to reach a head that went away (the head keeps
a run's claim for ``SESSION_GRACE_S`` after it starts again: 30 s)."""
TELL_AFTER_S = 10.0
"""Unreachable this long: the user is told, once, in one line."""
_TRY_AGAIN = frozenset({"unreachable", "timeout", "protocol"})
"""Errors that mean "try again": anything else is the head's answer, a refusal."""


def _wait_for_grant(backend: SessionBackend, claim: Answer) -> Answer:
    """The claim's view once it is granted; across a head restart too (``Reattach``)."""
    back = Reattach(claim["id"])

    def granted(state: dict[str, Any]) -> dict[str, Any] | None:
        mine = [c for c in state.get("claims", ()) if c["id"] == claim["id"]]
        if not mine:
            raise HeadError(
                "released", _("claim c{claim} went away while waiting").format(claim=claim["id"])
            )
        return dict(mine[0]) if mine[0]["state"] == "active" else None

    while True:
        try:
            # The state as of subscribing first: granted in between, no push may follow.
            found = granted(backend.subscribe().get("state") or {})
            if found is not None:
                return found
            for push in backend.pushes():
                if push.get("push") == "state":
                    found = granted(push["state"])
                    if found is not None:
                        return found
        except HeadError as exc:
            if exc.code != "unreachable":
                raise
            backend.hang_up()
        back.lost()
        found = None
        while found is None:
            time.sleep(back.delay)
            found = back.attempt(backend)  # raises the head's refusal: the claim is gone
        if found["state"] == "active":
            return found


class Reattach:
    """Taking a run's claim back onto a new connection after the old one dropped (a
    head that restarted: killed or stopped). Tries back off up to ``RECONNECT_CAP_S``;
    the user hears of it only when it takes long (one line) or fails."""

    def __init__(self, claim_id: int) -> None:
        self.claim_id = claim_id
        self.delay = 0.1
        self.lost_at = time.monotonic()
        self.told = False

    def lost(self) -> None:
        self.lost_at, self.delay = time.monotonic(), 0.1

    def attempt(self, backend: SessionBackend) -> Answer | None:
        """The claim's view once it is this connection's; None: the head is not back
        yet (try again after ``delay``); ``HeadError``: the head refused (it is gone)."""
        self.delay = min(self.delay * 2, RECONNECT_CAP_S)
        try:
            answer = backend.resume_claim(self.claim_id)
        except HeadError as exc:
            backend.hang_up()
            if exc.code not in _TRY_AGAIN:
                raise
            if not self.told and time.monotonic() - self.lost_at > TELL_AFTER_S:
                _say(
                    _("{why}; still trying, to keep c{claim}").format(
                        why=one_line(exc.message), claim=self.claim_id
                    )
                )
                self.told = True
            return None
        if self.told:
            _say(_("the head is back; c{claim} is kept").format(claim=self.claim_id))
            self.told = False
        return dict(answer["claim"])


def keep_claim(backend: SessionBackend, child: subprocess.Popen[bytes], claim_id: int) -> int:
    """Wait for CMD, keeping its claim: when the head's connection drops, reconnect for
    as long as CMD runs (``Reattach``). Reads whatever the head pushes meanwhile, so
    nothing piles up for this connection."""
    pidfd = _pidfd(child.pid)
    back = Reattach(claim_id)
    keeping = True
    try:
        while True:
            code = child.poll()
            if code is not None:
                return code
            sock = backend.connection() if keeping else None
            if keeping and sock is None:  # lost: try again, after a pause
                _wait_child(pidfd, back.delay)
                if child.poll() is not None:
                    continue
                try:
                    back.attempt(backend)
                except HeadError as exc:  # the head answered: the claim is gone
                    _say(
                        _(
                            "c{claim} was not kept ({why}); the command runs on, on GPUs"
                            " the head may now give to others"
                        ).format(claim=claim_id, why=one_line(exc.message))
                    )
                    keeping = False
                continue
            ready = _wait_child(pidfd, None if pidfd is not None else 0.2, sock)
            if sock is not None and sock in ready:
                try:
                    backend.next_message()  # a push (state): read and dropped
                except HeadError:
                    backend.hang_up()
                    back.lost()
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _say(text: str) -> None:
    print(f"gputui run: {text}", file=sys.stderr, flush=True)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` ends (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return None


def _wait_child(
    pidfd: int | None, timeout: float | None, sock: socket.socket | None = None
) -> list[Any]:
    """Until the child ends (``pidfd``), ``sock`` is readable, or ``timeout`` passes."""
    fds: list[Any] = [x for x in (pidfd, sock) if x is not None]
    if not fds:
        time.sleep(timeout or 0.2)
        return []
    ready, _writable, _failed = select.select(fds, [], [], timeout)
    return list(ready)
