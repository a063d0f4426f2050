"""Ending the console on a signal or a hang-up: the terminal is always given back.

SIGTERM, SIGHUP and SIGINT end the app the way ``q`` does; should it not end in
time, or a second signal come, the terminal is restored here -- alternate screen,
mouse modes and cursor put back, its tty settings from before the app restored --
and the process exits at once. A terminal that hangs up counts as SIGHUP. That
watch is a thread, not an app timer: a dead terminal blocks Textual's output
thread, and with it the event loop.

Kept apart from the app: this wraps any ``App`` from outside (``gputui.cli``) and
knows nothing of the fleet.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import sys
import termios
import threading
from collections.abc import Callable
from typing import Any, NoReturn

from textual.app import App

from gputui.common.i18n import N_, _
from gputui.ui.app import CLOSE_TIMEOUT_S

Why = tuple[str, dict[str, str]]
"""Why the process ends: an English message (marked) and its fields, said at the end
in the reader's language."""

TERMINAL_GONE = 129
"""Exit status when the terminal hung up (128 + SIGHUP, as a shell reports it)."""


def _terminal_fd() -> int | None:
    """The file descriptor of our terminal, or None when not run in one."""
    for stream in (sys.__stdin__, sys.__stdout__):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if stream is not None and stream.isatty():
                return stream.fileno()
    return None


def _terminal_alive(fd: int) -> bool:
    """False once the terminal has hung up: every tty call then fails with EIO."""
    try:
        termios.tcgetattr(fd)
    except termios.error as exc:
        return bool(exc.args and exc.args[0] != errno.EIO)
    except OSError as exc:
        return exc.errno != errno.EIO
    return True


EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
"""The signals that end the console the way ``q`` does."""
EXIT_GRACE_S = CLOSE_TIMEOUT_S + 1.0
"""How long the console has to end by itself after such a signal; then it is ended.
Its own close is bounded by ``CLOSE_TIMEOUT_S`` (a fleet closed while its helpers
start can take seconds): that always gets to finish."""
START_POLL_S = 0.05
"""How often a signal during start-up looks whether the app is up, to exit it."""
HANGUP_POLL_S = 1.0
"""How often the terminal is looked at, to notice that it hung up."""
LAST_WORDS_S = 1.0
"""How long a forced exit waits for its terminal reset to be written."""
TERMINAL_RESET = (
    "\x1b[?2004l"  # bracketed paste off
    "\x1b[?7h"  # line wrap back on
    "\x1b[?2048l"  # in-band resize reports off
    "\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?1016l"  # mouse reports off
    "\x1b[<u"  # the kitty keyboard mode popped, before leaving the alternate screen
    "\x1b[?1049l"  # alternate screen off
    "\x1b[?25h"  # cursor shown
    "\x1b[?1004l"  # focus reports off
)
"""Undoes every mode Textual's Linux driver turns on (its ``stop_application_mode``)."""


class SignalExit:
    """SIGTERM, SIGHUP and SIGINT end the console cleanly, and the terminal is given
    back whatever happens. ``with SignalExit() as signals: await signals.run(app)``.

    A signal asks the app to exit, with status 128 + the signal (as a shell reports
    a killed process); before an app is running it cancels the task that entered
    the block (the demo's start-up), which then ends as it does on an error. When the
    process is still there ``grace_s`` later (a close that hangs, a blocked event
    loop), or a second signal comes, the terminal is reset here -- its modes off, its
    settings from before the app put back -- ``on_force`` runs, one line says why, and
    the process exits at once.

    A terminal that hangs up counts as SIGHUP even when none is delivered (a closed
    tmux pane or ssh session does not always send one, and ``make demo`` holds it):
    a thread looks at it every ``HANGUP_POLL_S``. It must be a thread, not a timer of
    the app: once the terminal is gone Textual's writer thread dies on EIO, its queue
    fills, and the event loop blocks for good on the next write.

    The handlers are plain ``signal.signal`` ones, not ``loop.add_signal_handler``:
    those only run when the event loop gets round to them, which a hung loop never
    does, and that is when they matter most. They hand the exit to the loop with
    ``call_soon_threadsafe``. The deadline stays armed after the block, because the
    process is meant to end soon after it: a hang there is ended too.
    """

    def __init__(
        self,
        *,
        grace_s: float = EXIT_GRACE_S,
        on_force: Callable[[], None] | None = None,
    ) -> None:
        self.grace_s = grace_s
        self.on_force = on_force
        self.received: int | None = None
        """The first exit signal that came (SIGHUP for a hang-up), if any."""
        self._app: App[Any] | None = None
        self._app_done = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._previous: dict[int, Any] = {}
        self._tty_attrs: list[Any] | None = None
        self._lock = threading.RLock()  # a signal handler may interrupt itself
        self._closed = threading.Event()
        self._armed = threading.Event()  # the first exit signal came
        self._now = threading.Event()  # a second one came: no more grace
        self._why: Why = ("", {})
        self._last = 0  # the signal that ends it: the first, or the second when one came

    @property
    def exit_code(self) -> int:
        """128 + the signal received (0 when none came)."""
        return 128 + self.received if self.received is not None else 0

    def __enter__(self) -> SignalExit:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        fd = _terminal_fd()
        if fd is not None:
            with contextlib.suppress(OSError, termios.error):
                self._tty_attrs = termios.tcgetattr(fd)
            watch = threading.Thread(
                target=self._watch_terminal, args=(fd,), name="gputui-hangup", daemon=True
            )
            watch.start()
        # Started now, not from a handler: a signal may land while this thread holds
        # the lock that starting a thread takes, and then the handler would hang.
        deadline = threading.Thread(target=self._deadline, name="gputui-deadline", daemon=True)
        deadline.start()
        for signum in EXIT_SIGNALS:
            with contextlib.suppress(ValueError, OSError):  # not the main thread
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        self._app_done = True
        self._closed.set()
        for signum, previous in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, previous)
        self._previous.clear()

    async def run(self, app: App[Any]) -> None:
        """Run ``app`` in the terminal; the signals end it from now on."""
        self._app = app
        try:
            if self.received is not None:  # the start-up it cancelled carried on
                app.exit(return_code=self.exit_code)
            await app.run_async()
        finally:
            self._app_done = True  # the driver has given the terminal back

    def _on_signal(self, signum: int, _frame: object) -> None:
        # Flags and a hand-off only: the deadline thread does the rest.
        with self._lock:
            if self.received is not None:
                self._why = (
                    N_("{signal} again: stopped at once"),
                    {"signal": _signal_name(signum)},
                )
                self._last = signum
                self._now.set()
            else:
                why = N_("did not stop within {seconds} s of {signal}")
                fields = {"seconds": f"{self.grace_s:g}", "signal": _signal_name(signum)}
                self._begin(signum, (why, fields))

    def _watch_terminal(self, fd: int) -> None:
        while not self._closed.wait(HANGUP_POLL_S):
            if not _terminal_alive(fd):
                with self._lock:
                    if self.received is None:
                        self._begin(signal.SIGHUP, (N_("the terminal hung up"), {}))
                return

    def _begin(self, signum: int, why: Why) -> None:
        """The first exit signal: arm the deadline, ask the loop to end the app."""
        self.received = self._last = signum
        self._why = why
        self._armed.set()
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                self._loop.call_soon_threadsafe(self._end)

    def _end(self) -> None:
        """On the loop: exit the app, or before there is one, cancel the start-up."""
        app = self._app
        if app is None:
            if self._task is not None:
                self._task.cancel()
        elif app.is_running and not (app.screen_stack and app.screen_stack[0].is_mounted):
            # Exiting while Textual mounts the first screen makes that screen's
            # on_mount find its widgets gone (a traceback): exit once it is up.
            assert self._loop is not None
            self._loop.call_later(START_POLL_S, self._end)
        else:
            app.exit(return_code=self.exit_code)

    def _deadline(self) -> None:
        """Once armed: end the process when the grace is over or a second signal came."""
        self._armed.wait()
        self._now.wait(self.grace_s)
        self._force(self._last, self._why)

    def _force(self, signum: int, why: Why) -> NoReturn:
        """Give the terminal back and end the process now; from any thread."""
        with self._lock:  # once: the deadline and a second signal may both come
            try:
                # A terminal that reads nothing (a stalled ssh session) blocks every
                # write to it: that must not keep the process alive.
                words = threading.Thread(
                    target=self._last_words, args=(why,), name="gputui-reset", daemon=True
                )
                words.start()
                if self.on_force is not None:
                    with contextlib.suppress(Exception):
                        self.on_force()
                words.join(LAST_WORDS_S)
            finally:
                os._exit(128 + signum)

    def _last_words(self, why: Why) -> None:
        if self._app is not None and not self._app_done:
            _reset_terminal(self._tty_attrs)
        said = why[0].format(**why[1])
        with contextlib.suppress(Exception):  # a catalogue that cannot be read: English
            said = _(why[0]).format(**why[1])
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.write(sys.__stderr__.fileno(), f"gputui: {said}\n".encode())  # type: ignore[union-attr]


def _reset_terminal(attrs: list[Any] | None) -> None:
    """Where Textual writes (stderr), modes off; the terminal's settings put back."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.write(sys.__stderr__.fileno(), TERMINAL_RESET.encode())  # type: ignore[union-attr]
    fd = _terminal_fd()
    if attrs is not None and fd is not None:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, attrs)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
