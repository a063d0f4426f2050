"""Under root (as CI runs), a root or sshd test that skips is a failure that says why;
elsewhere it is a skip whose reason says it is not root here (tests/privileged.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

INNER = """
import pytest
from privileged import fail_skips_under_root, group_privileged, need_root

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_privileged(items)

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    fail_skips_under_root(item, outcome.get_result())

@pytest.fixture
def people():
    pytest.skip("useradd is not installed")
"""

TESTS = """
import pytest
from privileged import need_root

@pytest.mark.sshd
def test_marked_sshd():
    pytest.skip("OpenSSH server not installed")

@pytest.mark.root
def test_marked_root_needing_root():
    need_root("makes users")

def test_unmarked_needing_root():
    pytest.skip("not root here: chowns a file")

def test_a_users_fixture(people):
    pass

def test_anything_else():
    pytest.skip("PyYAML built without libyaml")

@pytest.mark.root
@pytest.mark.xfail(reason="known", strict=True)
def test_an_expected_failure():
    raise AssertionError
"""


def test_a_privileged_skip_fails_under_root_and_says_why(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "markers =\n    root: r\n    sshd: s\n"
    )
    pytester.makeconftest(INNER)
    pytester.makepyfile(test_inner=TESTS)
    result = pytester.runpytest("-p", "no:textual-snapshot", "-p", "no:cacheprovider", "-rA")
    if os.geteuid() == 0:
        # A skip in a fixture (setup) fails as an error, one in the test as a failure.
        result.assert_outcomes(passed=1, failed=2, errors=1, skipped=1, xfailed=1)
        result.stdout.fnmatch_lines_random(
            [
                "*test_marked_sshd skipped while running as root (OpenSSH server not installed)*",
                "*test_unmarked_needing_root skipped while running as root"
                " (not root here: chowns a file)*",
                "*test_a_users_fixture skipped while running as root (useradd is not installed)*",
            ]
        )
    else:
        result.assert_outcomes(skipped=5, xfailed=1)
        result.stdout.fnmatch_lines(["*not root here: makes users*"])


GROUPED = """
import pytest

@pytest.fixture
def slurm():
    return None

@pytest.fixture
def people():
    return None

@pytest.mark.root
def test_root():
    pass

@pytest.mark.sshd
def test_sshd():
    pass

def test_makes_users(people):
    pass

@pytest.mark.root
def test_on_slurm(slurm):
    pass

def test_plain():
    pass
"""


def test_root_and_sshd_tests_are_grouped_by_module_and_the_slurm_ones_together(
    pytester: pytest.Pytester,
) -> None:
    """Each module's privileged tests share a worker (its users made once, its tests in
    order); the ones on the test Slurm share the one worker that starts it."""
    from privileged import GROUP, SLURM_GROUP

    pytester.makeconftest(
        "from privileged import group_of\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        print(f'GROUP {item.name} {group_of(item)}')\n"
    )
    pytester.makepyfile(test_grouped=GROUPED)
    result = pytester.runpytest("-p", "no:textual-snapshot", "-p", "no:cacheprovider", "-s",
                                "-o", "asyncio_default_fixture_loop_scope=function",
                                "--collect-only", "-q")  # fmt: skip
    module = "test_grouped.py"
    result.stdout.fnmatch_lines_random(
        [
            f"GROUP test_root {GROUP}:{module}",
            f"GROUP test_sshd {GROUP}:{module}",
            f"GROUP test_makes_users {GROUP}:{module}",
            f"GROUP test_on_slurm {SLURM_GROUP}",
            "GROUP test_plain None",
        ]
    )


def test_the_accounts_lock_is_one_holder_at_a_time_across_processes(tmp_path: Path) -> None:
    """A second process waits for the lock while this one holds it (re-entered here)."""
    import privileged

    probe = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(privileged.ACCOUNTS_LOCK)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "try:\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except BlockingIOError:\n"
        "    sys.exit(3)\n"
    )

    def try_lock() -> int:
        return subprocess.run([sys.executable, "-c", probe], check=False).returncode

    with privileged.accounts_lock():
        with privileged.accounts_lock():
            assert try_lock() == 3
        assert try_lock() == 3
    # Let go: the probe may take it (retried: another test process may hold it a moment).
    deadline = time.monotonic() + 30
    while (code := try_lock()) == 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a lock other test processes may hold, until a deadline
    assert code == 0
