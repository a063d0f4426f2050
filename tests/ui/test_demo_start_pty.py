"""``gputui demo`` in a real terminal (a pty of 80x24), as a newcomer starts it: it
says at once what it starts, then the head and each host as they come (connecting,
ready), then the one ``export`` line that points the CLI at its head, all before
the console opens, each line within 80 columns. The line works: the CLI, given only
that, lists the demo head's claims. The console's welcome says it too."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_signals_pty import EXIT_S, Terminal

from gputui.demo.progress import SOCKET_ENV

START_S = 60.0
ALT_SCREEN = b"\x1b[?1049h"


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[[list[str]], Terminal]]:
    started: list[Terminal] = []

    def start(argv: list[str]) -> Terminal:
        started.append(Terminal(argv, tmp_path))
        return started[-1]

    yield start
    for one in started:
        one.close()


def test_the_demo_shows_each_host_and_the_export_line_before_the_console(
    tmp_path: Path, terminal: Callable[[list[str]], Terminal]
) -> None:
    demo = terminal([sys.executable, "-m", "gputui.cli.console", "demo", "--hosts", "2"])
    demo.read_until(lambda: ALT_SCREEN in demo.output, START_S, "the console")
    before = demo.output[: demo.output.index(ALT_SCREEN)].decode()
    lines = [line.rstrip() for line in before.replace("\r\n", "\n").split("\n") if line.strip()]
    assert lines[0] == (
        "gputui demo: 2 simulated hosts (10 GPUs) on loopback SSH, and a scheduler head"
    ), lines
    states = [tuple(line.split()[:2]) for line in lines[1:] if line.startswith("  ")]
    assert states[:2] == [("head", "starting"), ("head", "ready")], lines
    for host in ("gpu01", "gpu02"):
        assert (host, "connecting") in states and (host, "ready") in states, lines
        assert states.index((host, "connecting")) < states.index((host, "ready")), lines
    assert [line for line in lines if line.startswith("  gpu01  ready")] == [
        "  gpu01  ready       5 GPUs"
    ]
    export = lines[-1].strip()
    assert re.fullmatch(rf"export {SOCKET_ENV}=\S+/head/head\.sock", export), lines
    assert "in another shell" in lines[-2], lines
    assert all(len(line) <= 80 for line in lines), lines

    # The line is all the CLI needs: no hosts.yaml anywhere it looks.
    _, assignment = shlex.split(export)
    name, _, socket = assignment.partition("=")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), name: socket}
    claims = subprocess.run(
        [sys.executable, "-m", "gputui.entry", "claims"],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=60,
        check=False,
    )
    assert claims.returncode == 0, claims.stdout + claims.stderr

    # The console's welcome says it too.
    demo.read_until(
        lambda: f"{SOCKET_ENV}=".encode() in demo.output[demo.output.index(ALT_SCREEN) :],
        START_S,
        "the welcome's export line",
    )
    demo.signal(signal.SIGTERM)
    demo.read_to_eof(EXIT_S)
    assert demo.process.wait(EXIT_S) == 128 + signal.SIGTERM
