"""Signals end the console cleanly: in a real terminal (a pty), the last thing the
console writes gives the terminal back, and it exits at once with 128 + the signal.

Also when its exit hangs: a second signal, or the deadline, resets the terminal from
outside the app (``SignalExit``), tried on a real app that hangs on purpose.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputui.ui.terminal_exit import EXIT_GRACE_S, HANGUP_POLL_S

ON_OFF = {
    "alternate screen": (b"\x1b[?1049h", b"\x1b[?1049l"),
    "mouse clicks": (b"\x1b[?1000h", b"\x1b[?1000l"),
    "mouse motion": (b"\x1b[?1003h", b"\x1b[?1003l"),
    "urxvt mouse": (b"\x1b[?1015h", b"\x1b[?1015l"),
    "SGR mouse": (b"\x1b[?1006h", b"\x1b[?1006l"),
    "hidden cursor": (b"\x1b[?25l", b"\x1b[?25h"),
    "bracketed paste": (b"\x1b[?2004h", b"\x1b[?2004l"),
    "focus reports": (b"\x1b[?1004h", b"\x1b[?1004l"),
}
"""Mode: (the sequence that turns it on, the one that turns it off)."""
ALWAYS_ON = ("alternate screen", "mouse clicks", "hidden cursor")
"""Modes the console always turns on: seen on, and seen off after that."""
EXIT_S = 10.0
"""How soon after the signal the console must be gone (it takes well under 1 s)."""
START_S = 30.0
POLL_S = 0.05
"""How often a wait looks at a condition that is not about the output (a file)."""


class Terminal:
    """A command running in a pty of 80x24 of its own, as a person's terminal runs it."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        self.tty_name = os.ttyname(slave)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.sane = termios.tcgetattr(slave)
        env = dict(os.environ, TERM="xterm-256color")
        self.process = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True
        )
        os.close(slave)  # only the console holds the terminal: EOF when it is gone
        self.output = b""
        self.eof = False

    def read_until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Read what the console writes until ``done()`` (or EOF); fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not done():
            if self.eof:
                raise AssertionError(f"the console ended before {what}: {self.tail()!r}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            ready, _, _ = select.select([self.master], [], [], min(left, POLL_S))
            if ready:
                self._read()

    def read_to_eof(self, timeout: float) -> None:
        self.read_until(lambda: self.eof, timeout, "the console to close its terminal")

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError as exc:  # EIO: every slave end is closed
            if exc.errno != errno.EIO:
                raise
            data = b""
        self.output += data
        self.eof = not data

    def signal(self, signum: int) -> float:
        self.process.send_signal(signum)
        return time.monotonic()

    def tail(self) -> bytes:
        return self.output[-300:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(EXIT_S)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


@pytest.fixture
def terminals(tmp_path: Path) -> Callable[[list[str]], Terminal]:
    started: list[Terminal] = []

    def start(argv: list[str]) -> Terminal:
        terminal = Terminal(argv, tmp_path)
        started.append(terminal)
        return terminal

    yield start  # type: ignore[misc]
    for terminal in started:
        terminal.close()


def console_argv(kind: str, tmp_path: Path, port: int) -> list[str]:
    if kind == "demo":
        return [sys.executable, "-m", "gputui.cli.console", "demo", "--hosts", "1", "--gpus", "1"]
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(
        "defaults: {ssh_config: null, connect_timeout: 2}\n"
        f"hosts:\n  - {{name: nowhere, address: 127.0.0.1, port: {port}}}\n"
    )
    return [sys.executable, "-m", "gputui.cli.console", "--hosts", str(hosts)]


def assert_terminal_given_back(terminal: Terminal) -> None:
    out = terminal.output
    for mode in ALWAYS_ON:
        assert ON_OFF[mode][0] in out, f"{mode} never turned on"
    for mode, (on, off) in ON_OFF.items():
        if on in out:
            assert out.rfind(off) > out.rfind(on), f"{mode} left on: {terminal.tail()!r}"
    assert b"Traceback" not in out, out.decode(errors="replace")
    # The terminal's settings are back too: echo and line editing, as before.
    fd = os.open(terminal.tty_name, os.O_RDWR | os.O_NOCTTY)
    try:
        now = termios.tcgetattr(fd)
    finally:
        os.close(fd)
    wanted = termios.ECHO | termios.ICANON | termios.ISIG
    assert now[3] & wanted == terminal.sane[3] & wanted


def wait_entered(terminal: Terminal) -> None:
    terminal.read_until(lambda: b"\x1b[?1049h" in terminal.output, START_S, "the alternate screen")


@pytest.mark.parametrize("kind", ["console", "demo"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=str)
def test_a_signal_ends_the_console_and_gives_the_terminal_back(
    kind: str,
    signum: int,
    tmp_path: Path,
    free_port: Callable[[], int],
    terminals: Callable[[list[str]], Terminal],
) -> None:
    terminal = terminals(console_argv(kind, tmp_path, free_port()))
    wait_entered(terminal)
    sent = terminal.signal(signum)
    terminal.read_to_eof(EXIT_S)
    assert terminal.process.wait(EXIT_S) == 128 + signum
    assert time.monotonic() - sent < EXIT_S
    assert_terminal_given_back(terminal)


def test_a_hung_up_terminal_ends_the_console(
    tmp_path: Path, free_port: Callable[[], int], terminals: Callable[[list[str]], Terminal]
) -> None:
    """No SIGHUP reaches it (the pty is not its controlling terminal), as under tmux."""
    terminal = terminals(console_argv("console", tmp_path, free_port()))
    wait_entered(terminal)
    os.close(terminal.master)
    terminal.master = -1
    # Noticed within a second; Textual's output thread dies on the first write to the
    # dead terminal and its full queue then blocks the event loop, so this may take
    # the whole grace period.
    assert terminal.process.wait(HANGUP_POLL_S + EXIT_GRACE_S + EXIT_S) == 129


STUCK_APP = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path

    from textual.app import App

    from gputui.ui.terminal_exit import SignalExit

    how, mark, grace = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])


    class Stuck(App[None]):
        def on_mount(self) -> None:
            if how == "blocked loop":
                self.set_timer(0.05, self.block)

        def block(self) -> None:
            mark.write_text(how)
            time.sleep(600)  # the event loop never runs again

        async def on_unmount(self) -> None:
            mark.write_text(how)
            await asyncio.Event().wait()  # a close that never ends


    async def main() -> None:
        with SignalExit(grace_s=grace) as signals:
            await signals.run(Stuck())


    asyncio.run(main())
    """
)


def stuck_app(tmp_path: Path, how: str, grace_s: float) -> tuple[list[str], Path]:
    script = tmp_path / "stuck.py"
    script.write_text(STUCK_APP)
    mark = tmp_path / "stuck"
    return [sys.executable, str(script), how, str(mark), str(grace_s)], mark


def test_a_blocked_event_loop_still_gives_the_terminal_back(
    tmp_path: Path, terminals: Callable[[list[str]], Terminal]
) -> None:
    argv, mark = stuck_app(tmp_path, "blocked loop", grace_s=1.0)
    terminal = terminals(argv)
    wait_entered(terminal)
    terminal.read_until(mark.exists, START_S, "the app to block its event loop")
    sent = terminal.signal(signal.SIGTERM)
    terminal.read_to_eof(EXIT_S)
    assert terminal.process.wait(EXIT_S) == 128 + signal.SIGTERM
    assert time.monotonic() - sent < EXIT_S
    assert_terminal_given_back(terminal)
    assert b"gputui: did not stop within 1 s of SIGTERM" in terminal.output


def test_the_last_words_are_in_the_readers_language(
    tmp_path: Path, terminals: Callable[[list[str]], Terminal], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``LANG=zh_CN.UTF-8`` the line left on the terminal is Chinese."""
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    argv, mark = stuck_app(tmp_path, "blocked loop", grace_s=1.0)
    terminal = terminals(argv)
    wait_entered(terminal)
    terminal.read_until(mark.exists, START_S, "the app to block its event loop")
    terminal.signal(signal.SIGTERM)
    terminal.read_to_eof(EXIT_S)
    assert terminal.process.wait(EXIT_S) == 128 + signal.SIGTERM
    assert_terminal_given_back(terminal)
    said = "gputui: \u6536\u5230 SIGTERM \u540e 1 \u79d2\u5185\u672a\u80fd\u505c\u6b62"
    assert said.encode() in terminal.output, terminal.output[-300:]


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=str)
def test_a_second_signal_ends_a_hung_exit_at_once(
    second: int, tmp_path: Path, terminals: Callable[[list[str]], Terminal]
) -> None:
    argv, mark = stuck_app(tmp_path, "hung close", grace_s=120.0)
    terminal = terminals(argv)
    wait_entered(terminal)
    terminal.signal(signal.SIGTERM)
    terminal.read_until(mark.exists, EXIT_S, "the app to hang while closing")
    sent = terminal.signal(second)
    terminal.read_to_eof(EXIT_S)
    assert terminal.process.wait(EXIT_S) == 128 + second
    assert time.monotonic() - sent < EXIT_S  # not the 120 s deadline
    assert_terminal_given_back(terminal)
    assert f"gputui: {signal.Signals(second).name} again".encode() in terminal.output
