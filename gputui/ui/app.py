"""The Textual app: owns the telemetry source, the model, the themes and the workers.

Data flows one way. The source calls back with a ``HostSnapshot``; the app posts a
``HostsSampled`` message (a burst from many hosts is one message), applies it to
the ``ClusterModel`` and tells the main screen what changed. Anything that waits
(starting the fleet, signalling a process) runs in an app-owned worker, and every
worker failure ends up in one place: a notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import math
import os
import signal
import sys
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from textual import on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.theme import BUILTIN_THEMES
from textual.worker import Worker, WorkerState

from gputui.config import Config
from gputui.protocol import ProcessSample, Signal
from gputui.telemetry import HostSnapshot, SignalOutcome, TelemetrySource
from gputui.ui.model import ClusterModel, HostChange
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen, HelpSection, section
from gputui.ui.screens.main import MainScreen
from gputui.ui.themes import (
    DEFAULT_THEME,
    GAUGE_DEFAULTS,
    all_themes,
    packaged_themes,
    resolve_theme,
)
from gputui.ui.widgets.gpu_grid import GpuGrid

CLOSE_TIMEOUT_S = 5.0
SLICE_S = 0.005
"""Longest the app applies snapshots in one go; input waiting is handled before the rest."""
SLICE_CHECK_EVERY = 4
"""Snapshots applied between two looks at the clock: a host of 8 GPUs takes 0.1-0.2 ms,
so a slice ends within a millisecond of ``SLICE_S``, not up to 32 hosts (5 ms) late."""
SLICE_GAP_S = 0.001
"""Pause between two slices of a burst, for input."""
FREEZE_AFTER_S = 3.0
"""When start-up is over: the first screenful is drawn and the first data is in."""
TICK_WITH_DATA = 0.9
"""A batch of data also refreshes ages and totals when the last refresh is this old (ticks)."""
TICK_ALONE_AFTER = 1.25
"""Without data for this long (ticks), the timer refreshes ages and totals itself."""


@dataclass
class HostsSampled(Message):
    """Hosts have new snapshots: the latest of each, by host name.

    The app posts one of these for a burst of snapshots, not one per snapshot, and
    keeps filling its ``snapshots`` until it is handled, so a thousand hosts that
    sample in the same second cost one message (and one repaint), and a host that
    sampled twice meanwhile is applied once, with its newest state. A burst too big
    to apply at once is applied in slices, with key presses handled in between.
    """

    snapshots: dict[str, HostSnapshot]


class GpuTuiApp(App[None]):
    """The gputui console over any ``TelemetrySource`` (the SSH fleet, later the head)."""

    CSS_PATH = "gputui.tcss"
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("t", "next_theme", "Theme", tooltip="Next theme (all themes: Ctrl+P)"),
        Binding(
            "ctrl+p", "command_palette", "Palette", show=False, tooltip="Command palette: theme..."
        ),
    ]

    def __init__(
        self,
        source: TelemetrySource,
        config: Config,
        theme: str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        theme_dir: Path | None = None,
        tick_interval: float = 1.0,
    ) -> None:
        """``theme`` overrides ``config.theme``; an unknown name raises ``ValueError``.

        ``clock`` gives "now" for ages and the header clock (tests pass a fixed one);
        ``theme_dir`` replaces ``~/.config/gputui/themes``.
        """
        super().__init__()
        self.source = source
        self.config = config
        self.clock = clock
        self.tick_interval = tick_interval
        # The same staleness rule as the fleet: a slow refresh is not "stale".
        stale = config.health.stale_after(config.refresh_interval)
        self.model = ClusterModel(config.health.model_copy(update={"stale_after_s": stale}))
        themes, errors = all_themes(theme_dir)
        self.theme_errors = [str(error) for error in errors]
        """One line per user theme file that was skipped; shown as warnings at start."""
        for item in themes.values():
            self.register_theme(item)
        own = set(packaged_themes())
        self.cycle_themes = [n for n in themes if n in own or n not in BUILTIN_THEMES]
        """The themes ``t`` steps through: gputui's and the user's, not all of Textual's."""
        wanted = theme or config.theme
        if wanted not in themes and any(error.theme == wanted for error in errors):
            # The user's own theme file is broken: say so and carry on, never fail.
            fallback = config.theme if config.theme in themes else DEFAULT_THEME
            self.theme_errors.append(f"theme {wanted!r} cannot be used; using {fallback}")
            wanted = fallback
        self.theme = resolve_theme(wanted, themes)
        self._unsubscribe: Callable[[], None] | None = None
        self._pending: dict[str, HostSnapshot] = {}
        self._changes: list[HostChange] = []
        """Applied to the model, not yet shown: the rest of their burst is still coming."""
        self._last_tick = self._last_data = -math.inf

    # -- lifecycle -----------------------------------------------------------------

    def get_default_screen(self) -> Screen[None]:
        return MainScreen(self.model, clock=self.clock)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(GAUGE_DEFAULTS)

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    def on_mount(self) -> None:
        for error in self.theme_errors:
            self.notify(error, title="theme skipped", severity="warning", markup=False)
        self._unsubscribe = self.source.subscribe(self._on_snapshot)
        for snapshot in self.source.snapshots().values():
            self._on_snapshot(snapshot)
        self.run_worker(
            self._start_source(),
            name="telemetry",
            group="telemetry",
            description="connecting to the GPU hosts",
            exclusive=True,
            exit_on_error=False,
        )
        self._last_tick = time.monotonic()
        self.set_interval(self.tick_interval, self._on_tick_timer, name="ages")
        if not self.is_headless:  # a terminal of our own, not a test
            self.set_timer(FREEZE_AFTER_S, self._freeze_startup_objects)
        # Signals and a hung-up terminal end the app through ``SignalExit`` (below).

    def _freeze_startup_objects(self) -> None:
        """Keep what start-up made (modules, styles, widgets) out of later collections.

        Full garbage collections otherwise walk every one of those objects again,
        ~100 ms each for a large cluster, and land in the middle of a key press.
        """
        gc.collect()
        gc.freeze()

    async def _start_source(self) -> None:
        await self.source.start()

    def _on_snapshot(self, snapshot: HostSnapshot) -> None:
        pending = self._pending
        if not pending:  # the first since the last batch was taken: announce the batch
            self.post_message(HostsSampled(pending))
        pending[snapshot.name] = snapshot

    async def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        with contextlib.suppress(asyncio.TimeoutError, OSError):
            await asyncio.wait_for(self.source.close(), CLOSE_TIMEOUT_S)

    # -- data ------------------------------------------------------------------------

    @on(HostsSampled)
    def _on_hosts_sampled(self, message: HostsSampled) -> None:
        snapshots = message.snapshots
        if snapshots is self._pending:
            self._pending = {}
        apply, changes = self.model.apply, self._changes
        deadline = time.perf_counter() + SLICE_S
        left = iter(snapshots.values())
        for snapshot in left:
            changes.append(apply(snapshot))
            if not len(changes) % SLICE_CHECK_EVERY and time.perf_counter() > deadline:
                break
        rest = {snapshot.name: snapshot for snapshot in left}
        if rest:
            # The rest follows after a short pause in which the event loop reads the
            # terminal and a key press goes all the way to the screen (several hops
            # between message queues); a newer snapshot that came meanwhile
            # replaces its host's older one.
            pending = self._pending
            if not pending:
                self._pending = rest
                asyncio.get_running_loop().call_later(
                    SLICE_GAP_S, self.post_message, HostsSampled(rest)
                )
            else:
                for name, snapshot in rest.items():
                    pending.setdefault(name, snapshot)
            return
        self._changes = []
        now = time.monotonic()
        self._last_data = now
        # The once-a-second refresh of ages and totals rides along with the data, so
        # they are one repaint, not two.
        tick = now - self._last_tick >= self.tick_interval * TICK_WITH_DATA
        if tick:
            self._last_tick = now
        self.main.hosts_changed(changes, tick=tick)

    def _on_tick_timer(self) -> None:
        now = time.monotonic()
        if now - self._last_data < self.tick_interval * TICK_ALONE_AFTER:
            return  # data is flowing: the batches tick
        self._last_tick = now
        self.main.tick()

    # -- workers ---------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures become something a person sees."""
        if event.state is not WorkerState.ERROR:
            return
        worker = event.worker
        error = worker.error
        reason = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
        self.notify(
            f"{worker.description or worker.name} failed: {reason}",
            severity="error",
            timeout=10,
            markup=False,
        )

    @on(MainScreen.SignalConfirmed)
    def _on_signal_confirmed(self, message: MainScreen.SignalConfirmed) -> None:
        self.run_worker(
            self._send_signal(message.host, message.gpu_uuid, message.process, message.signal),
            name=f"signal-{message.host}-{message.process.pid}",
            group="signal",
            description=f"SIG{message.signal} to pid {message.process.pid} on {message.host}",
            exclusive=False,
            exit_on_error=False,
        )

    @on(MainScreen.RetryRequested)
    def _on_retry_requested(self, message: MainScreen.RetryRequested) -> None:
        self.source.retry_now(message.host)
        what = message.host if message.host is not None else "all hosts"
        self.notify(f"retrying {what} now", timeout=3, markup=False)

    async def _send_signal(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> SignalOutcome:
        outcome = await self.source.signal_process(host, gpu_uuid, process, signal)
        self.notify(
            outcome.message,
            title=f"SIG{signal} pid {process.pid} on {host}",
            severity="information" if outcome.ok else "error",
            timeout=8,
            markup=False,
        )
        return outcome

    # -- actions ---------------------------------------------------------------------

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.help_sections()))

    def help_sections(self) -> list[HelpSection]:
        title, confirm = section("Confirmation (SIGTERM / SIGKILL)", ConfirmScreen.BINDINGS)
        return [
            section("Anywhere", type(self).BINDINGS),
            section("Main screen", MainScreen.BINDINGS),
            section("GPU grid", GpuGrid.BINDINGS),
            (title, [*confirm, ("Enter", "Press the focused button (Cancel at first)")]),
            (
                "Mouse and focus",
                [
                    ("Tab", "Move between the grid, processes and filter"),
                    ("Click", "Select a row; click ▾/▸ or double-click to fold a host"),
                ],
            ),
        ]

    def action_next_theme(self) -> None:
        names = self.cycle_themes
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(f"theme: {self.theme}", timeout=1.5, markup=False)

    def watch_theme(self, theme: str) -> None:
        if self.screen_stack:
            # The grid drops its line cache itself (notify_style_update); the summary
            # bakes its styles into its text, so it is redrawn here.
            self.main.refresh_summary()


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


# -- signals: the terminal is always given back -----------------------------------------

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
        with self._lock:
            if self.received is not None:
                self._force(signum, f"{_signal_name(signum)} again: stopped at once")
            else:
                self._begin(
                    signum, f"did not stop within {self.grace_s:g} s of {_signal_name(signum)}"
                )

    def _watch_terminal(self, fd: int) -> None:
        while not self._closed.wait(HANGUP_POLL_S):
            if not _terminal_alive(fd):
                with self._lock:
                    if self.received is None:
                        self._begin(signal.SIGHUP, "the terminal hung up")  # TERMINAL_GONE
                return

    def _begin(self, signum: int, why: str) -> None:
        """The first exit signal: arm the deadline, ask the loop to end the app."""
        self.received = signum
        deadline = threading.Timer(self.grace_s, self._force, (signum, why))
        deadline.daemon = True
        deadline.start()
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

    def _force(self, signum: int, why: str) -> NoReturn:
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

    def _last_words(self, why: str) -> None:
        if self._app is not None and not self._app_done:
            _reset_terminal(self._tty_attrs)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.write(sys.__stderr__.fileno(), f"gputui: {why}\n".encode())  # type: ignore[union-attr]


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
