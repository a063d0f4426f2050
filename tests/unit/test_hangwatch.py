"""A test stuck past its timeout, even in the clean-up after pytest-timeout failed it
(a task that shrugs off every cancel keeps its event loop from closing), ends its test
process: the run goes on, fails that test and shows where each thread stood. A real
pytest run with xdist workers (``pytester`` in a subprocess)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

STUCK = """
import asyncio

async def test_stuck_in_its_clean_up():
    async def stubborn():
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    asyncio.get_running_loop().create_task(stubborn())
    await asyncio.sleep(3600)

def test_after_it():
    pass
"""


def test_a_test_stuck_after_its_timeout_is_ended_named_and_the_run_goes_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    tests = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))
    )
    monkeypatch.delenv("GPUTUI_TEST_HANGS", raising=False)
    monkeypatch.setenv("GPUTUI_TEST_HANG_GRACE_S", "2")
    pytester.makepyfile(test_stuck=STUCK)
    result = pytester.runpytest_subprocess(
        "-p", "hangwatch", "-p", "no:cacheprovider", "-p", "no:randomly",
        "-o", "timeout=1", "-o", "asyncio_mode=auto", "-n", "1", "-p", "no:textual-snapshot",
        timeout=90,
    )  # fmt: skip
    out = result.stdout.str()
    assert "test_stuck.py::test_stuck_in_its_clean_up ran 2 s past its timeout (1 s)" in out
    assert "a test hung" in out and "Thread 0x" in out
    assert "_cancel_all_tasks" in out  # where it stood: its event loop closing
    # Failed by its timeout, then again as its worker crashed; the next test still ran.
    result.assert_outcomes(passed=1, failed=2)
