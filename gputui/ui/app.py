"""The Textual app: owns the telemetry source, the model, the themes and the workers.

Data flows one way. The source (any ``TelemetrySource``) calls back with a
``HostSnapshot``; the app's ``intake`` (``SnapshotIntake``) posts a ``HostsSampled``
message (a burst from many hosts is one message) and applies it to the
``ClusterModel``, and the app tells the main screen what changed. The app holds its
other parts as objects, not base classes: ``intake``, ``hosts`` (``HostActions``:
signals and retries through a ``HostControl``, an interface apart from the
telemetry), ``rounds`` (``HealthRounds``: the console's own health checks) and
``head`` (``HeadConsole``: the scheduler side); it keeps the ``on_*`` and
``action_*`` handlers Textual looks for and hands them on (what ``?`` lists comes
from ``help_contents``). Anything that waits
(starting the fleet, signalling a process, asking the head) runs in an app-owned
worker, and every worker failure ends up in one place: a notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.notifications import Notify, SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.theme import BUILTIN_THEMES
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from gputui.common.i18n import N_, _
from gputui.common.tasks import within
from gputui.config.models import Config
from gputui.health.board import HealthBoard
from gputui.health.staleness import stale_limit
from gputui.telemetry import HostControl, ReadOnly, TelemetrySource, Viewing
from gputui.ui import intake
from gputui.ui.command_run import CommandRunner
from gputui.ui.direct import DirectFallback
from gputui.ui.head.console import HeadConsole
from gputui.ui.head.link import HeadForceFreeStep, HeadNotice, HeadState, HeadUnreachable
from gputui.ui.health_rounds import HealthRounds
from gputui.ui.help_contents import help_sections
from gputui.ui.host_actions import HostActions
from gputui.ui.model import ClusterModel
from gputui.ui.notices import NoticeLog, show_for
from gputui.ui.palette import GpuTuiCommands
from gputui.ui.screens.audit import AuditScreen
from gputui.ui.screens.forms import FormScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.notices import NoticesScreen
from gputui.ui.screens.queue import QueueScreen
from gputui.ui.screens.usage import UsageScreen
from gputui.ui.screens.week import WeekScreen
from gputui.ui.themes import (
    DEFAULT_THEME,
    GAUGE_DEFAULTS,
    all_themes,
    packaged_themes,
    resolve_theme,
)

CLOSE_TIMEOUT_S = 5.0
HEALTH_EVERY_S = 2.0
"""How often the health checks run on the snapshots that came meanwhile (no head)."""
FREEZE_AFTER_S = 3.0
"""When start-up is over: the first screenful is drawn and the first data is in."""


class GpuTuiApp(App[None]):
    """The gputui console over any ``TelemetrySource`` (the SSH fleet, later the head),
    acting on hosts through a ``HostControl``; its scheduler side is ``head``."""

    CSS_PATH = "gputui.tcss"
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {GpuTuiCommands}

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("t", "next_theme", "Theme", tooltip="Next theme (all themes: Ctrl+P)"),
        Binding("N", "notices", "Notices", show=False, tooltip="Every notice so far, in full"),
        Binding(
            "ctrl+p", "command_palette", "Palette", show=False, tooltip="Command palette: theme..."
        ),
        Binding(
            "colon",
            "command_line",
            "Command",
            show=False,
            tooltip="Command line: queue, claim 2 --pool a100, sort util, q (Tab, ↑↓)",
            # Priority: the line opens as the key is read, so the keys typed right after
            # it (":audit" Enter in one burst) reach the line, not the screen below
            # (check_action: never over a question or a form, nor in a text field).
            priority=True,
        ),
    ]

    def __init__(
        self,
        source: TelemetrySource,
        config: Config,
        theme: str | None = None,
        *,
        control: HostControl | None = None,
        clock: Callable[[], float] = time.time,
        theme_dir: Path | None = None,
        tick_interval: float = 1.0,
        direct: Callable[[], TelemetrySource] | None = None,
    ) -> None:
        """``theme`` overrides ``config.theme``; an unknown name raises ``ValueError``.

        ``control`` acts on the hosts; left out, the source is used when it is a
        ``HostControl`` too (the fleet is), else every action says it cannot be done.

        ``clock`` gives "now" for ages and the header clock (tests pass a fixed one);
        ``theme_dir`` replaces ``~/.config/gputui/themes``; ``direct`` makes the
        console's own SSH source, for ``S`` when the head's stream is the source.
        """
        super().__init__()
        self.source = source
        self.hosts = HostActions(
            self,
            control
            if control is not None
            else source
            if isinstance(source, HostControl)
            else ReadOnly(),
        )
        """Acting on hosts (signals, reconnects): the control's side."""
        self.config = config
        self.clock = clock
        self.tick_interval = tick_interval
        # The same staleness rule as the fleet: a slow refresh is not "stale".
        stale = stale_limit(config.health.stale_after_s, config.refresh_interval)
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
            self.theme_errors.append(
                _("theme {wanted} cannot be used; using {fallback}").format(
                    wanted=repr(wanted), fallback=fallback
                )
            )
            wanted = fallback
        self.theme = resolve_theme(wanted, themes)
        self._unsubscribe: Callable[[], None] | None = None
        self.health = HealthBoard(config.health, {h.name: h.gpus for h in config.hosts})
        """Every problem in the cluster (the ``h`` view without a head), fed the latest
        snapshots."""
        self.rounds = HealthRounds(
            self.health, clock, slice_s=intake.SLICE_S, gap_s=intake.SLICE_GAP_S
        )
        """Feed ``health`` the snapshots that came meanwhile (``judge_health``)."""
        self.intake = intake.SnapshotIntake(
            self.post_message,
            self.model,
            self.rounds,
            judge_health=config.head is None,
            tick_interval=tick_interval,
        )
        """The snapshots' way in: batched, applied to the model in slices."""
        self.head = HeadConsole(
            self,
            config,
            self.model,
            clock,
            self.health,
            snapshots=lambda: self.source.snapshots(),  # noqa: PLW0108 (source is swapped on fallback)
        )
        """The scheduler side: the link to the head, and every request to it."""
        self.commands = CommandRunner(self, self)
        """The ``:`` line and the palette's gputui commands."""
        self.notices = NoticeLog()
        """Every notice of this session, in full (``N`` shows them)."""
        self.fallback = DirectFallback(self, direct)
        """From the head's stream to SSH of the console's own (``S``)."""
        if direct is not None:  # only a console on the head's stream has it
            self.bind("S", "direct", description=N_("Direct SSH"), show=False)

    # -- lifecycle -----------------------------------------------------------------

    def get_default_screen(self) -> Screen[None]:
        return MainScreen(self.model, clock=self.clock)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(GAUGE_DEFAULTS)

    @property
    def control(self) -> HostControl:
        return self.hosts.control

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    def on_mount(self) -> None:
        for error in self.theme_errors:
            self.notify(error, title=_("theme skipped"), severity="warning", markup=False)
        self._unsubscribe = self.source.subscribe(self.intake.on_snapshot)
        for snapshot in self.source.snapshots().values():
            self.intake.on_snapshot(snapshot)
        self.run_source(self._start_source())
        self.intake.last_tick = time.monotonic()
        self.set_interval(self.tick_interval, self._on_tick_timer, name="ages")
        self.set_interval(HEALTH_EVERY_S, self.judge_health, name="health")
        self.head.start()
        if not self.is_headless:  # a terminal of our own, not a test
            self.set_timer(FREEZE_AFTER_S, self._freeze_startup_objects)
        # Signals and a hung-up terminal end the app through ``SignalExit``
        # (gputui.ui.terminal_exit), which runs it.

    def _freeze_startup_objects(self) -> None:
        """Keep what start-up made (modules, styles, widgets) out of later collections.

        Full garbage collections otherwise walk every one of those objects again,
        ~100 ms each for a large cluster, and land in the middle of a key press.
        """
        gc.collect()
        gc.freeze()

    def replace_source(self, source: TelemetrySource, control: HostControl) -> None:
        """Show ``source`` from now on (``DirectFallback``); the caller closes the old
        one and starts the new."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.source = source
        self.hosts.control = control
        self._unsubscribe = source.subscribe(self.intake.on_snapshot)
        for snapshot in source.snapshots().values():
            self.intake.on_snapshot(snapshot)

    def run_source(self, work: Coroutine[Any, Any, None]) -> None:
        """Start (or swap) the telemetry source in the app's worker for it."""
        self.run_worker(
            work,
            name="telemetry",
            group="telemetry",
            description=_("connecting to the GPU hosts"),
            exit_on_error=False,
        )

    def action_direct(self) -> None:
        self.fallback.switch()

    async def _start_source(self) -> None:
        await self.source.start()

    async def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        with contextlib.suppress(asyncio.TimeoutError, OSError):
            await within(self.source.close(), CLOSE_TIMEOUT_S)

    # -- data ------------------------------------------------------------------------

    @on(intake.HostsSampled)
    def _on_hosts_sampled(self, message: intake.HostsSampled) -> None:
        batch = self.intake.apply(message, shown=bool(self.screen_stack))
        if batch is not None:
            changes, tick = batch
            self.main.hosts_changed(changes, tick=tick)

    def judge_health(self, *, at_once: bool = False) -> None:
        """Run the health checks on the snapshots that came since the last round
        (every few seconds: a board of a few thousand GPUs is too much work at every
        sample), in slices of ``SLICE_S`` with input handled in between, so a key is
        never stuck behind a round; ``at_once``: finish the round now.

        With a head there is nothing to do: the health view shows the head's board."""
        if self.head.link is not None:
            self.rounds.pending.clear()
            return
        self.rounds.run(at_once=at_once)

    def _on_tick_timer(self) -> None:
        if self.intake.tick_alone() and self.screen_stack:
            self.main.tick()

    # -- workers ---------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures become something a person sees."""
        if event.state is not WorkerState.ERROR:
            return
        worker = event.worker
        error = worker.error
        reason = f"{type(error).__name__}: {error}" if error is not None else _("unknown error")
        self.notify(
            _("{work} failed: {reason}").format(
                work=worker.description or worker.name, reason=reason
            ),
            severity="error",
            timeout=10,
            markup=False,
        )

    @on(MainScreen.SignalConfirmed)
    def _on_signal_confirmed(self, message: MainScreen.SignalConfirmed) -> None:
        self.hosts.signal(message.host, message.gpu_uuid, message.process, message.signal)

    @on(MainScreen.RetryRequested)
    def _on_retry_requested(self, message: MainScreen.RetryRequested) -> None:
        self.hosts.retry(message.host)

    @on(MainScreen.ViewChanged)
    def _on_view_changed(self, message: MainScreen.ViewChanged) -> None:
        # The head's stream sends in full only what is on screen; the SSH fleet has all.
        if isinstance(self.source, Viewing):
            self.source.view(message.hosts, message.gpu)

    # -- notices ---------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Keep the notice in full for ``N``; show one line of it for a few seconds
        (``gputui.ui.notices``)."""
        text = Content.from_markup(message).plain if markup else message
        notice = self.notices.add(self.clock(), severity, title, text)
        super().notify(
            notice.line, severity=severity, timeout=show_for(severity, timeout), markup=False
        )

    @on(Notify)
    def _one_toast(self) -> None:
        """One toast at a time, the newest (the history keeps every one): two on the
        one row were seen drawn over each other, and left there. Runs before
        Textual's own handler adds the new one."""
        self.clear_notifications()

    def action_notices(self) -> None:
        if not isinstance(self.screen, NoticesScreen):
            self.push_screen(NoticesScreen(self.notices.newest_first()))

    # -- actions ---------------------------------------------------------------------

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(help_sections(type(self).BINDINGS, self.head.help_sections())))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "command_line":
            return not isinstance(self.screen, ModalScreen) and not isinstance(self.focused, Input)
        return True

    def action_command_line(self) -> None:
        self.commands.open_line()

    def action_health(self) -> None:
        """``h``: the health view, of the head's board with a head, else this console's
        (its checks brought up to date first)."""
        if self.head.health.showing():
            return
        self.judge_health(at_once=True)
        self.head.health.open_view()

    def action_next_theme(self) -> None:
        names = self.cycle_themes
        index = names.index(self.theme) + 1 if self.theme in names else 0
        self.theme = names[index % len(names)]
        self.notify(_("theme: {name}").format(name=self.theme), timeout=1.5, markup=False)

    def watch_theme(self, theme: str) -> None:
        if self.screen_stack:
            # The grid drops its line cache itself (notify_style_update); the summary
            # bakes its styles into its text, so it is redrawn here.
            self.main.refresh_summary()

    # -- the scheduler side: Textual hands these to the app; ``head`` does the work ----

    def on_head_state(self, message: HeadState) -> None:
        self.head.show_state(message.view)

    def on_head_unreachable(self, message: HeadUnreachable) -> None:
        self.head.show_unreachable(message.reason)

    def on_head_notice(self, message: HeadNotice) -> None:
        self.head.notice(message)

    def on_head_force_free_step(self, message: HeadForceFreeStep) -> None:
        self.head.force_free.step(message.step)

    def on_main_screen_scheduler_key(self, message: MainScreen.SchedulerKey) -> None:
        self.head.key(message.action, message.row)

    def on_form_screen_requested(self, message: FormScreen.Requested) -> None:
        self.head.forms.send(message)

    def on_queue_screen_submit_wanted(self, message: QueueScreen.SubmitWanted) -> None:
        self.head.forms.open_submit()

    def on_queue_screen_attach_wanted(self, message: QueueScreen.AttachWanted) -> None:
        self.head.jobs.attach(message.job_id)

    def on_queue_screen_job_action(self, message: QueueScreen.JobAction) -> None:
        self.head.jobs.act(message)

    def on_queue_screen_job_selected(self, message: QueueScreen.JobSelected) -> None:
        self.head.jobs.select(message.job_id)

    def on_usage_screen_wanted(self, message: UsageScreen.Wanted) -> None:
        self.head.usage.fetch(message)

    def on_week_screen_wanted(self, message: WeekScreen.Wanted) -> None:
        self.head.week.fetch(message)

    def on_audit_screen_wanted(self, message: AuditScreen.Wanted) -> None:
        self.head.audit.fetch(message)

    def on_notices_screen_wanted(self, message: NoticesScreen.Wanted) -> None:
        self.head.notice_history.fetch(message)
