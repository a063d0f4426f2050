"""A team's first day, end to end, as a new user meets it: ``gputui demo`` in tmux at
80x24, driven with keys (``send-keys``) and read off the screen (``capture-pane``).

Claim (``c`` on a host line asks how many, more than one GPU is shown before it is
taken; ``c`` on a GPU line), the CLI in a second window with the demo's export line
(``claims``, ``history``), submit a job, watch its output on the queue screen,
preempt it (it runs again) and kill it, the usage, health and audit views, the
palette, the ``:`` line (typed in one burst, as a k9s user types), and ``:q``.
Each step waits, by polling the screen against a deadline, for what a person would
look for; no step sleeps. Every screen read is checked for a traceback and for a
line wider than the pane.

tmux runs a server of its own (``-L``, no config) that is killed at the end, failed
or not. Without tmux the test skips, except as root (as CI runs): there it fails.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from privileged import need_root

COLS, ROWS = 80, 24
STEP_S = 20.0
"""Longest wait for one step to show on the screen."""
START_S = 60.0
"""Longest wait for the demo's console (a loaded machine starts it slowly)."""
POLL_S = 0.1
T = TypeVar("T")


class Tmux:
    """One tmux server of this test's own; windows by name."""

    def __init__(self, name: str, cwd: Path) -> None:
        self.name = name
        self.cwd = cwd
        self.last: dict[str, list[str]] = {}

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.name, "-f", os.devnull, *args],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=self.cwd,
            check=False,
        )
        assert done.returncode == 0, f"tmux {' '.join(args)}: {done.stderr.strip()}"
        return done.stdout

    def keys(self, window: str, *keys: str) -> None:
        """Keys by tmux's names (``Enter``, ``C-s``, ``Down``), in one write."""
        self("send-keys", "-t", window, *keys)

    def text(self, window: str, text: str) -> None:
        """``text`` typed as it is, in one write (a burst)."""
        self("send-keys", "-t", window, "-l", text)

    def screen(self, window: str) -> list[str]:
        lines = self("capture-pane", "-p", "-t", window).split("\n")[:ROWS]
        self.last[window] = lines
        text = "\n".join(lines)
        assert "Traceback" not in text, text
        assert all(len(line) <= COLS for line in lines), text
        return lines

    def until(
        self, window: str, found: Callable[[str], T | None], what: str, limit: float = STEP_S
    ) -> T:
        """Read the screen until ``found`` (given the screen as text) returns something
        true; that is returned. On the deadline, fail with the last screen."""
        deadline = time.monotonic() + limit
        while True:
            got = found("\n".join(self.screen(window)))
            if got:
                return got
            if time.monotonic() > deadline:
                shown = "\n".join(self.last[window])
                pytest.fail(f"no {what} on the screen after {limit:.0f} s:\n{shown}")
            time.sleep(POLL_S)

    def see(self, window: str, pattern: str, what: str, limit: float = STEP_S) -> re.Match[str]:
        """Wait for ``pattern`` (a regex, multiline) on the screen; its match."""
        return self.until(window, lambda s: re.search(pattern, s, re.MULTILINE), what, limit)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        need_root("tmux is not installed")
        pytest.fail("tmux is not installed: as root (CI) it must be (.ci/run installs it)")
    server = Tmux(f"gputui-day-{os.getpid()}", tmp_path)
    try:
        yield server
    finally:
        subprocess.run(
            ["tmux", "-L", server.name, "kill-server"], capture_output=True, timeout=10, check=False
        )


TITLE = re.compile(r"^─(no )?processes on ([^─]+)─", re.MULTILINE)
"""The processes pane's title: which line of the grid the cursor is on."""


def walk_to(tmux: Tmux, wanted: Callable[[re.Match[str], str], bool], what: str) -> str:
    """Move the grid's cursor down, a line at a time (each move seen on the screen),
    until ``wanted`` (the pane's title, the screen) holds; the title's place."""
    for _ in range(40):
        screen = "\n".join(tmux.screen("day"))
        title = TITLE.search(screen)
        assert title is not None, screen
        if wanted(title, screen):
            return title[2]
        tmux.keys("day", "Down")

        def moved(s: str, was: str = title[2]) -> bool:
            now = TITLE.search(s)
            return now is not None and now[2] != was

        tmux.until("day", moved, "the cursor moving")
    pytest.fail(f"the cursor never reached {what}")


OUTPUT = r"─output of job (\d+)\b"


def following(screen: str) -> str | None:
    """The job whose output the queue screen shows."""
    found = re.search(OUTPUT, screen)
    return found[1] if found else None


def claims(screen: str) -> int | None:
    """The header's count of active claims (None: no header with the head's part)."""
    header = re.search(r"^ gputui .* head \d+ run.*$", screen, re.MULTILINE)
    if header is None:
        return None
    found = re.search(r"(\d+) claims?\b", header[0])
    return int(found[1]) if found else 0


def main_screen(tmux: Tmux) -> None:
    """Wait for the main screen: its header and the grid's processes pane. The header
    alone is not enough: the notices screen shows it too, so it is there before an
    Escape from the notices has been handled."""
    tmux.until(
        "day",
        lambda s: re.search(r"^ gputui .* head \d+ run", s, re.MULTILINE) and TITLE.search(s),
        "the main screen",
    )


def granted(tmux: Tmux, count: int) -> str:
    """The id of the claim granted last, once the header counts ``count`` claims, read
    where a person reads it once its one-line notice is gone (another notice may
    replace it at once): the notices screen, N."""
    tmux.until("day", lambda s: claims(s) == count, f"{count} claims in the header")
    tmux.keys("day", "N")
    newest = tmux.see("day", r"^\S+ +\w+ +claim (\d+) granted: ", "the claim in the notices")[1]
    tmux.keys("day", "Escape")
    main_screen(tmux)
    return newest


def colon(tmux: Tmux, line: str) -> None:
    """A ``:`` command typed in one burst, with its Enter."""
    tmux.text("day", f":{line}")
    tmux.keys("day", "Enter")


def test_a_team_day_at_80x24(tmux: Tmux, tmp_path: Path) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    started = time.monotonic()
    demo = [sys.executable, "-m", "gputui.entry", "demo", "--hosts", "2", "--gpus", "16"]
    # The shell says how the demo ended, on the screen, once it has.
    shell = ["sh", "-c", '"$@"; echo "demo exited: $?"; exec cat', "sh", *demo]
    tmux("new-session", "-d", "-s", "day", "-x", str(COLS), "-y", str(ROWS), "--", *shell)
    tmux("new-window", "-d", "-t", "day", "-n", "cli")

    # The intro: whole on the notices screen, with the line that points the CLI here.
    export = tmux.see("day", r"^export GPUTUI_HEAD_SOCKET=\S+$", "intro", START_S)[0]
    tmux.see("day", r"^the queue with each job's output\. : opens a command line", "intro")
    tmux.keys("day", "Escape")
    main_screen(tmux)
    tmux.see("day", r"^─processes on gpu01─", "the cursor on the first host")
    counted = tmux.until("day", lambda s: None if claims(s) is None else [claims(s)], "claims")
    seeded = counted[0] or 0

    # c on a host line asks how many; 2 is shown before it is taken, then held.
    walk_to(tmux, lambda t, _: t[2] == "gpu02", "the line of host gpu02")
    tmux.keys("day", "c")
    tmux.see("day", r"Claim free GPUs on gpu02", "the claim form")
    tmux.keys("day", "BSpace", "2", "C-s")
    tmux.see("day", r"Claim 2 GPUs on gpu02: GPU \d+, \d+", "which GPUs a claim takes")
    tmux.keys("day", "y")
    claim = granted(tmux, seeded + 1)

    # c on the line of a GPU that nobody holds claims that one.
    def free(title: re.Match[str], screen: str) -> bool:
        return bool(title[1]) and title[2].startswith("gpu02 GPU") and "held by  nobody" in screen

    gpu = walk_to(tmux, free, "a free GPU of gpu02")
    held = rf"^ +\d+ .* c{claim} \S"  # the 2 claimed: the cleanest, seen on the way
    tmux.until("day", lambda s: len(re.findall(held, s, re.MULTILINE)) == 2, "2 GPUs held")
    tmux.keys("day", "c")
    single = granted(tmux, seeded + 2)
    assert single != claim
    index = gpu.split()[-1]
    tmux.see("day", rf"^ +{index} .* c{single} \S", "the GPU held")

    # The CLI, in a second window, with the demo's export line.
    tmux.text("cli", f"{export}; {shlex.quote(sys.executable)} -m gputui.entry claims")
    tmux.keys("cli", "Enter")
    tmux.see("cli", rf"^c{claim} +{re.escape(me)} +active +2 +gpu02", "gputui claims")

    # Submit the demo's job; watch it run on the queue screen.
    tmux.keys("day", "n")
    tmux.see("day", r"Enqueue a job", "the enqueue form")
    # The demo's own job, given more steps than the walk needs (the last --steps counts).
    # (The field's text is selected when the form opens: End, or typing replaces it.)
    tmux.keys("day", "End")
    tmux.text("day", " --steps 900")
    tmux.keys("day", "C-s")
    job = tmux.see("day", r"job (\d+) \(train\.py\)", "the job's notice")[1]
    tmux.keys("day", "Q")
    tmux.see("day", rf"^ {job} +\S+ +train\.py +running", "the job running")
    # Down to it, a row at a time (the output pane's title says which job is selected).
    for _ in range(20):
        output = tmux.see("day", OUTPUT, "the output pane")[1]
        if output == job:
            break
        tmux.keys("day", "Down")
        tmux.until("day", lambda s, was=output: following(s) not in (None, was), "a move")
    tmux.see("day", rf"output of job {job} · following", "the job's output followed")
    tmux.see("day", r"step \d+/900", "the job's output")

    # Preempt: asked first, then the job is requeued and runs again.
    tmux.keys("day", "P")
    tmux.see("day", rf"Preempt job {job} ", "the preempt question")
    tmux.keys("day", "y")
    tmux.see("day", r"^ requeues +1", "the job requeued")
    tmux.see("day", rf"^ {job} +\S+ +train\.py +running", "the job running again")
    # Kill: asked first; the row says killed.
    tmux.keys("day", "K")
    tmux.see("day", rf"Kill job {job} ", "the kill question")
    tmux.keys("day", "y")
    tmux.see("day", rf"^ {job} +\S+ +train\.py +killed", "the job killed")
    tmux.text("cli", f"clear; {shlex.quote(sys.executable)} -m gputui.entry history")
    tmux.keys("cli", "Enter")
    tmux.see("cli", rf"^ *{job} +\S+ +train\.py +killed", "the job in gputui history")

    # The views, from the : line typed in one burst each.
    colon(tmux, "usage")
    tmux.see("day", r"^ gputui usage ", "the usage view")
    tmux.see("day", r"by user: allocated GPU-h", "usage by user")
    colon(tmux, "health")
    tmux.see("day", r"^ gputui health  ", "the health view")
    tmux.see("day", r"^ SEV +HOST +GPU +PROBLEM", "the health view's table")
    colon(tmux, "audit")
    tmux.see("day", r"^ gputui audit  ", "the audit view")
    tmux.see("day", r"^ TIME +ACTOR +ACTION +TARGET +OWNER", "the audit view's table")
    tmux.see("day", rf"kill +job {job}\b", "the kill in the audit")
    tmux.see("day", rf"preempt +job {job}\b", "the preempt in the audit")

    # The palette has gputui's commands.
    tmux.keys("day", "Escape")
    main_screen(tmux)
    tmux.keys("day", "C-p")
    tmux.text("day", "queue")
    tmux.see("day", r"The job queue, logs and actions", "queue in the palette")
    # Esc closes the list of hits first, then the palette (Textual's palette).
    tmux.keys("day", "Escape")
    tmux.until("day", lambda s: "The job queue, logs" not in s, "the hits closed")
    if "🔎" in "\n".join(tmux.screen("day")):
        tmux.keys("day", "Escape")
    tmux.until("day", lambda s: "🔎" not in s, "the palette closed")

    # :claim 2 shows what it would take (or that it must wait) before anything.
    colon(tmux, "claim 2")
    tmux.see("day", r"(Claim 2 GPUs on|No host has 2 free GPUs)", "the :claim question")
    tmux.keys("day", "n")
    tmux.see("day", r"nothing was claimed", "the :claim declined")
    colon(tmux, "sort util")
    tmux.see("day", r"^ +# .*UTIL▼", "the sort marker on UTIL")

    # :q ends the demo, and it stops cleanly.
    colon(tmux, "q")
    tmux.see("day", r"^demo exited: 0$", "the demo's end", START_S)
    assert time.monotonic() - started < 120
