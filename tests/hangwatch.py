"""A test that hangs past its timeout ends its test process, named, with its stacks.

pytest-timeout fails a test that runs past its timeout by raising in it; what runs
after that (the test's clean-up, its event loop shut down) has no timeout of its own,
and a test process stuck there would hold its xdist worker, and the whole run, until
CI's own limit. So each test is also given ``HANG_GRACE_S`` more, kept by
``faulthandler``'s watchdog thread, which needs nothing of the stuck process: past
it, every thread's stack is written and the process ends. xdist then reports the test
as failed ("worker crashed"), and the run's summary shows which test it was and
where each thread stood (the dumps are gathered in a folder of the run's own,
``GPUTUI_TEST_HANGS``). ``make test`` runs xdist with ``--max-worker-restart 0``: the
run then ends with that failure. With workers replaced, ``--dist loadgroup`` gives
the crashed test to another worker (which hangs in turn) and, in one fresh-clone run,
waited for ever at the end. Without xdist the run itself ends there, and the dump is
left in that folder (``/tmp/gputui-test-hangs-*``).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

HANGS = "GPUTUI_TEST_HANGS"
"""The folder each test process writes its dump in (made by the run's first process)."""
HANG_GRACE_S = float(os.environ.get("GPUTUI_TEST_HANG_GRACE_S", "120"))
"""How long past its timeout a test may take before its process is ended."""
_DUMPED = "Thread 0x"
"""How a dump's every thread begins (a file without one: no test hung there)."""

_file: IO[str] | None = None
_deadline: float | None = None
"""When the running test's process is ended (``time.monotonic``)."""
_made: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _made
    if not os.environ.get(HANGS):  # the controller (or a run without xdist)
        _made = os.environ[HANGS] = tempfile.mkdtemp(prefix="gputui-test-hangs-")


def _timeout(item: pytest.Item) -> float:
    """The test's timeout as pytest-timeout reads it (its marker, the command line,
    the ini); 0: none."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0] or 0)
    given: Any = item.config.getoption("timeout", None)
    if given is None:
        given = item.config.getini("timeout")
    return float(given or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _file, _deadline
    limit = _timeout(item)
    folder = os.environ.get(HANGS)
    if limit <= 0 or not folder:
        yield
        return
    if _file is None:
        _file = open(Path(folder) / f"{os.getpid()}.txt", "w")  # noqa: SIM115 (kept open)
    _file.seek(0)
    _file.truncate()
    _file.write(
        f"{item.nodeid} ran {HANG_GRACE_S:.0f} s past its timeout ({limit:.0f} s); "
        "its test process was ended where each thread stood:\n"
    )
    _file.flush()
    _deadline = time.monotonic() + limit + HANG_GRACE_S
    _arm()
    try:
        yield
    finally:
        _deadline = None
        faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(trylast=True)
def pytest_exception_interact() -> None:
    """pytest's own faulthandler plugin cancels the watchdog on every failure (for a
    debugger): a test failed by its timeout is just when it is wanted, so it is armed
    again for what is left."""
    _arm()


def _arm() -> None:
    if _deadline is not None and _file is not None:
        left = max(_deadline - time.monotonic(), 1.0)
        faulthandler.dump_traceback_later(left, exit=True, file=_file)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _made is None:
        return
    for dump in sorted(Path(_made).glob("*.txt")):
        text = dump.read_text(errors="replace")
        if _DUMPED in text:
            terminalreporter.section("a test hung", sep="=", red=True)
            terminalreporter.write_line(text.rstrip())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _made is not None:
        shutil.rmtree(_made, ignore_errors=True)
