"""The tests that need root or a real sshd: spread over the xdist workers a module
at a time, and never quietly skipped where they can run.

They create and delete Unix users and groups, and ``useradd`` and its kin lock
/etc/passwd and /etc/group and fail at once when another holds them: every such
command in the tests runs through ``account``, under one lock for every test process
on the machine (``accounts_lock``). Under ``--dist loadgroup`` each module of them is
one group (its module-scoped users and heads made once, its tests in order), and the
tests on the test Slurm (``slurmcluster``: one cluster per test process, some seconds
to start) are one group of their own. Running as root (as CI does), such a test that
skips is a failure: a skip there would leave a security boundary untested while the
run looks green. Skip reasons say which case it is: ``not root here: ...`` when not
running as root (the test cannot run; not a failure), anything else names what is
missing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PRIVILEGED = ("root", "sshd")
PRIVILEGED_FIXTURES = frozenset({"people", "test_user", "rogue_user", "other_user"})
"""Fixtures that create Unix users (a test that uses one needs root, marked or not)."""
GROUP = "root-and-sshd"
"""What each module's group is named after (``root-and-sshd:tests/dir/test_x.py``)."""
SLURM_FIXTURES = frozenset({"slurm", "slurm_cluster"})
SLURM_GROUP = "root-slurm"
"""The tests on the test Slurm: one group, so one worker starts the one cluster."""
ACCOUNTS_LOCK = Path(tempfile.gettempdir()) / "gputui-test-accounts.lock"
NOT_ROOT = "not root here"
"""How every skip for want of root begins (``need_root``)."""


def need_root(why: str) -> None:
    """Skip, saying so, unless running as root; ``why`` says what root is needed for."""
    if os.geteuid() != 0:
        pytest.skip(f"{NOT_ROOT}: {why}")


def privileged(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(name) is not None for name in PRIVILEGED):
        return True
    return not PRIVILEGED_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def group_of(item: pytest.Item) -> str | None:
    """The xdist group ``item`` runs in (None: any worker, alone)."""
    if not SLURM_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
        return SLURM_GROUP
    if privileged(item):
        return f"{GROUP}:{item.nodeid.split('::')[0]}"
    return None


def group_privileged(items: list[pytest.Item]) -> None:
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


_thread_lock = threading.RLock()
_depth = 0
_held: list[int] = []


@contextlib.contextmanager
def accounts_lock() -> Iterator[None]:
    """Held while Unix users or groups are looked up and then made, changed or
    deleted: one holder at a time among every test process (an exclusive ``flock``,
    which the kernel lets go if its process dies) and thread. Re-entrant."""
    global _depth
    with _thread_lock:
        if _depth == 0:
            fd = os.open(ACCOUNTS_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            _held.append(fd)
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
            if _depth == 0:
                os.close(_held.pop())  # closing lets the lock go


def account(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``useradd``, ``usermod``, ``userdel``, ``groupadd`` ... ``argv``, under
    ``accounts_lock``; its output captured."""
    with accounts_lock():
        return subprocess.run(argv, capture_output=True, text=True, check=check)


def fail_skips_under_root(item: pytest.Item, report: Any) -> None:
    """Under root, turn the skip of a root or sshd test (or any skip for want of
    root) into a failure that says what skipped it."""
    if os.geteuid() != 0 or not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
    reason = reason.removeprefix("Skipped: ")
    if not (privileged(item) or reason.startswith(NOT_ROOT)):
        return
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} skipped while running as root ({reason}): a test that needs "
        "root or sshd must run where the suite runs as root, so its skip is a failure"
    )
