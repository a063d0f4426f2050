"""Under root (as CI runs), a root or sshd test that skips is a failure that says why;
elsewhere it is a skip whose reason says it is not root here (tests/privileged.py)."""

from __future__ import annotations

import os

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
