"""A demo this machine cannot run is refused at once, in one line: too many hosts, too
few open files allowed, or an OSError (EMFILE) while the simulated hosts start."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from gputui.cli.console import main
from gputui.demo.limits import FDS_BASE, FDS_PER_HOST, MAX_DEMO_HOSTS, fds_needed

REFUSE_S = 20.0
"""Refusing needs no cluster: well under this even on a loaded machine."""


def open_files(soft: int, hard: int) -> Callable[[], None]:
    """A ``preexec_fn`` that sets the child's RLIMIT_NOFILE, as ``ulimit -n`` would."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def gputui(
    args: list[str], soft: int, hard: int, code: str = ""
) -> subprocess.CompletedProcess[str]:
    """``gputui ARGS`` through ``gputui.cli.console.main`` in a child with that open-files limit;
    ``code`` runs first (to stand in for part of the demo)."""
    program = f"{code}\nfrom gputui.cli.console import main\nraise SystemExit(main({args!r}))\n"
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=REFUSE_S,
        preexec_fn=open_files(soft, hard),
    )


def test_too_many_hosts_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["demo", "--hosts", "100000"]) == 2
    assert time.monotonic() - started < REFUSE_S
    out, err = capsys.readouterr()
    assert out == ""  # nothing was started
    assert err.splitlines() == [
        f"gputui: --hosts 100000 is more than the demo's maximum of {MAX_DEMO_HOSTS}"
        " simulated hosts (each is an SSH server and a helper process)"
    ]
    assert main(["demo", "--hosts", str(MAX_DEMO_HOSTS + 1)]) == 2


def test_too_few_open_files_is_one_line_saying_how_many() -> None:
    hosts = 8
    result = gputui(["demo", "--hosts", str(hosts)], soft=64, hard=64)
    assert result.returncode == 2
    assert result.stdout == ""
    needed = FDS_BASE + FDS_PER_HOST * hosts
    assert result.stderr.splitlines() == [
        f"gputui: the demo needs {needed} open files for {hosts} hosts but the limit is 64"
        f" (hard limit 64): raise it with `ulimit -n {needed}`"
    ]


def test_the_limit_is_raised_when_the_hard_limit_allows() -> None:
    code = (
        "import resource\n"
        "from gputui.demo.limits import check_demo_size\n"
        "check_demo_size(8)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=REFUSE_S,
        preexec_fn=open_files(64, 4096),
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == fds_needed(8)


def test_too_many_open_files_while_starting_is_one_line() -> None:
    """The estimate is bypassed, so the simulated hosts run out of files for real."""
    hosts = 30
    result = gputui(
        ["demo", "--hosts", str(hosts), "--gpus", str(hosts)],
        soft=40,
        hard=40,
        code="import gputui.demo.limits as limits\nlimits.check_demo_size = lambda hosts: None",
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"gputui: the demo could not start {hosts} hosts: too many open files;"
        f" raise the open-files limit (`ulimit -n {fds_needed(hosts)}`) or run fewer hosts"
    ]
