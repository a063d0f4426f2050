"""The Slurm runner reads a command's output as it comes, and stops at the cap.

Real processes: a command that prints up to the cap is answered in full; one that
prints past it (or never stops) is killed as soon as the cap is read, and the answer
is one line. The cap bounds what is held in memory, not only what is kept.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm.runner import Runner

CAP = 8192


@settings(max_examples=30)
@given(size=st.integers(0, 3 * CAP), err=st.integers(0, 200_000))
def test_output_up_to_the_cap_is_whole_and_past_it_one_line(size: int, err: int) -> None:
    runner = Runner(timeout_s=30, max_output=CAP)
    script = f"head -c {err} /dev/zero | tr '\\0' e >&2; head -c {size} /dev/zero | tr '\\0' x"
    if size <= CAP:
        done = runner.run("sh", "-c", script)
        assert done.code == 0
        assert done.out == "x" * size and done.raw == b"x" * size
        assert done.err == "e" * min(err, 65536)  # stderr is kept to its own cap
    else:
        with pytest.raises(HeadError) as said:
            runner.run("sh", "-c", script)
        assert said.value.code == "refused"
        assert "printed more than 8192 bytes" in said.value.message
        assert "\n" not in said.value.message


def test_a_command_that_never_stops_printing_is_killed_at_the_cap(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    runner = Runner(timeout_s=60, max_output=1 << 20)
    started = time.monotonic()
    with pytest.raises(HeadError, match="printed more than 1 MiB"):
        runner.run("sh", "-c", f"echo $$ > {pidfile}; exec yes")
    assert time.monotonic() - started < 30  # stopped at the cap, not at the timeout
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no such process now
        os.kill(pid, 0)


def test_input_is_fed_while_the_output_is_read() -> None:
    text = "line\n" * 50_000  # more than a pipe holds: both ways at once
    done = Runner(timeout_s=30).run("cat", input=text)
    assert done.code == 0 and done.out == text


def test_a_command_that_says_nothing_in_time_is_stopped() -> None:
    with pytest.raises(HeadError) as said:
        Runner(timeout_s=0.5).run("sleep", "30")
    assert said.value.code == "timeout"
    assert "sleep gave no answer within 0.5 s" in said.value.message
