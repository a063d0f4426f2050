"""Real Unix users for tests, and running a function as one of them.

``made_users`` creates accounts with ``useradd`` (fresh names, removed afterwards);
``as_user`` forks this test process and drops to the user's uid, gid and groups in
the child, so no second interpreter has to read the checkout (a clone in a 0700
directory works too). Needs root: under root nothing here skips.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import pwd
import secrets
import select
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import privileged


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path

    @property
    def groups(self) -> list[int]:
        return os.getgrouplist(self.name, self.gid)


@dataclass(frozen=True)
class Ran:
    """What a function run as another user gave: its value, its stdout and stderr."""

    value: Any
    out: str
    err: str


def need_root() -> None:
    privileged.need_root("creates Unix users and acts as each of them")


def _user_pids(uid: int) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
    return pids


def add_user(prefix: str = "gtl") -> User:
    name = f"{prefix}{secrets.token_hex(4)}"
    privileged.account("useradd", "-m", "-s", "/bin/sh", name)
    entry = pwd.getpwnam(name)
    return User(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def remove_user(name: str) -> None:
    with contextlib.suppress(KeyError):
        uid = pwd.getpwnam(name).pw_uid
        for pid in _user_pids(uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    privileged.account("userdel", "-r", "-f", name, check=False)


@contextlib.contextmanager
def made_users(count: int, prefix: str = "gtl") -> Iterator[list[User]]:
    """``count`` fresh accounts, deleted (with their homes and processes) afterwards."""
    need_root()
    users: list[User] = []
    try:
        for _ in range(count):
            users.append(add_user(prefix))
        yield users
    finally:
        for user in users:
            remove_user(user.name)


def as_user(
    user: User,
    fn: Callable[..., Any],
    *args: Any,
    cwd: str | os.PathLike[str] = "/",
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> Ran:
    """``fn(*args)`` in a child process running as ``user`` (uid, gid and groups),
    in ``cwd`` with ``env`` (default: PATH and the user's HOME only)."""
    environ = env if env is not None else {"PATH": "/usr/bin:/bin", "HOME": str(user.home)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 0
            try:
                os.close(read_end)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
                sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
                os.setgroups(user.groups)
                os.setgid(user.gid)
                os.setuid(user.uid)
                os.environ.clear()
                os.environ.update(environ)
                os.chdir(cwd)
                try:
                    payload = ("ok", fn(*args))
                except BaseException as exc:
                    payload = ("raised", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                sys.stdout.flush()
                sys.stderr.flush()
                with os.fdopen(write_end, "wb") as pipe:
                    pipe.write(pickle.dumps(payload))
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        os.close(write_end)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout
        with os.fdopen(read_end, "rb") as pipe:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise AssertionError(f"as {user.name}: {fn.__name__} ran past {timeout} s")
                ready, _, _ = select.select([pipe], [], [], left)
                if ready:
                    chunk = os.read(pipe.fileno(), 65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    assert chunks and os.waitstatus_to_exitcode(status) == 0, (
        f"as {user.name}: the child failed (status {status}): {stderr[-2000:]}"
    )
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "raised":
        raise AssertionError(f"as {user.name}: {fn.__name__} raised {value}")
    return Ran(value, stdout, stderr)
