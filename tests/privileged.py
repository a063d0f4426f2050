"""The tests that need root or a real sshd: kept in one xdist worker, and never
quietly skipped where they can run.

They create and delete Unix users (``useradd`` locks /etc/passwd; two at once may
fail), so under ``--dist loadgroup`` every test marked ``root`` or ``sshd`` goes to
one worker. Running as root (as CI does), such a test that skips is a failure: a
skip there would leave a security boundary untested while the run looks green.
Skip reasons say which case it is: ``not root here: ...`` when not running as
root (the test cannot run; not a failure), anything else names what is missing.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

PRIVILEGED = ("root", "sshd")
PRIVILEGED_FIXTURES = frozenset({"people", "test_user", "rogue_user", "other_user"})
"""Fixtures that create Unix users (a test that uses one needs root, marked or not)."""
GROUP = "root-and-sshd"
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


def group_privileged(items: list[pytest.Item]) -> None:
    for item in items:
        if privileged(item):
            item.add_marker(pytest.mark.xdist_group(GROUP))


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
