"""Run a piece of this test process as another Unix user: fork, drop to the user's
uid and groups in the child, run the function, send its (JSON) value back.

No second interpreter has to read the checkout, so tests with real users run from
a clone in a directory others cannot enter (what ``mktemp -d`` and many CI runners
give). The child is a fork of a process that may have threads (a head served from
a thread): it only uses what is already imported, never logs, and always leaves
through ``os._exit``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any


class ChildFailed(AssertionError):
    """The function raised in the child, or the child did not answer in time."""


def run_as(
    uid: int,
    gid: int,
    groups: list[int],
    fn: Callable[[], Any],
    *,
    timeout: float = 60.0,
) -> Any:
    """``fn()`` run as ``uid``/``gid``/``groups`` (which the child checks it got); its
    value, which must be JSON. What ``fn`` raised is raised here as ``ChildFailed``."""
    started = Child(uid, gid, groups, fn)
    try:
        return started.result(timeout)
    finally:
        started.kill()


class Child:
    """A forked child running ``fn`` as the user (``result()`` waits for its value)."""

    def __init__(self, uid: int, gid: int, groups: list[int], fn: Callable[[], Any]) -> None:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
            os.close(read_end)
            _child(uid, gid, groups, fn, write_end)
        os.close(write_end)
        self.pid = pid
        self._read = read_end
        self._reaped = False

    def result(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        chunks: list[bytes] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChildFailed(f"the child as another user did not answer in {timeout} s")
            ready, _, _ = select.select([self._read], [], [], left)
            if not ready:
                continue
            data = os.read(self._read, 65536)
            if not data:
                break
            chunks.append(data)
        self._reap()
        message = json.loads(b"".join(chunks) or b'{"error": "the child died silently"}')
        if "error" in message:
            raise ChildFailed(f"in the child as another user: {message['error']}")
        return message["value"]

    def kill(self) -> None:
        if not self._reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._reap()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    def _reap(self) -> None:
        if not self._reaped:
            os.waitpid(self.pid, 0)
            self._reaped = True


def _child(uid: int, gid: int, groups: list[int], fn: Callable[[], Any], out: int) -> None:
    code = 1
    try:
        try:
            os.chdir("/")
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
            ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid())
            if ids != (uid, uid, gid, gid) or sorted(os.getgroups()) != sorted(set(groups)):
                raise RuntimeError(f"could not become uid {uid}: ids now {ids}")
            message = {"value": fn()}
        except BaseException as exc:  # everything goes back to the parent as one line
            message = {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(message).encode()
        while data:
            data = data[os.write(out, data) :]
        code = 0
    finally:
        os._exit(code)
