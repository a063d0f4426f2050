"""``HeadConsole``: the console's scheduler side, one object the app holds.

It owns the link to the head (``HeadRequests.link``, started in an app worker when
hosts.yaml has a ``head:`` section), shows what the head pushes (holders, flags,
drained and unhealthy cards, the queue, notices), and hands each key and screen
request to the part that does it: claims, the forms, the queue screen's jobs,
drains, force-free, usage, audit and the health view. The parts are plain objects
that share the app and the link; the app keeps only thin ``on_*`` / ``action_*``
handlers (Textual looks for those on the app) that call in here.

A request that cannot be made says why at once (no head configured, the head
unreachable and why, a scheduler that lacks the capability, said before anything
is sent); one the head refuses shows the head's own words; one whose
answer was lost with the connection says that it may or may not have been done.
Nothing is dropped without a word.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from textual.app import App
from textual.css.query import NoMatches

from gputui.common.i18n import N_, _
from gputui.common.text import clean
from gputui.config.models import Config
from gputui.config.slurm import SlurmConfig
from gputui.health.board import HealthBoard
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.channel import HeadChannel
from gputui.telemetry import HostSnapshot
from gputui.ui.gpu_view import GpuRow, HostRow, Row
from gputui.ui.head.audit import AuditActions
from gputui.ui.head.claims import ClaimActions
from gputui.ui.head.drains import DrainActions
from gputui.ui.head.flags import by_gpu
from gputui.ui.head.forcefree import ForceFreeActions
from gputui.ui.head.forms import FormActions
from gputui.ui.head.health_acks import HealthActions
from gputui.ui.head.jobs import JobActions
from gputui.ui.head.link import HeadLink, HeadNotice, LinkSession, Opener
from gputui.ui.head.notice_history import NoticeHistory
from gputui.ui.head.requests import HeadRequests
from gputui.ui.head.usage import UsageActions
from gputui.ui.head.view import HeadView
from gputui.ui.head.week import WeekActions
from gputui.ui.model import ClusterModel
from gputui.ui.screens.audit import AuditScreen
from gputui.ui.screens.help import HelpSection, section
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.queue import QueueScreen
from gputui.ui.screens.usage import UsageScreen
from gputui.ui.screens.week import WeekScreen
from gputui.ui.widgets.summary import SCHEDULERS, head_forms

NOTICE_TITLES = {
    "started": N_("job started"),
    "ended": N_("job ended"),
    "preempted": N_("job preempted"),
    "ownership": N_("process flagged"),
    "idle": N_("job idle"),
    "claim": N_("claim"),
    "booking": N_("booking"),
    "admin": N_("an admin acted"),
    "fence": N_("GPU fenced"),
}
"""A notice's toast title by its kind (a kind this console does not know: "scheduler")."""


class HeadConsole:
    """The scheduler side of ``GpuTuiApp``: the head link and its parts."""

    def __init__(
        self,
        app: App[None],
        config: Config,
        model: ClusterModel,
        clock: Callable[[], float],
        local_health: HealthBoard,
        *,
        snapshots: Callable[[], Mapping[str, HostSnapshot]] = dict,
    ) -> None:
        """``local_health`` is the console's own board (the health view without a head);
        ``snapshots``: the console's telemetry now (what Slurm's holders are joined with)."""
        self.app = app
        self.snapshots = snapshots
        self.config = config
        self.model = model
        self.asks = HeadRequests(app)
        self.claims = ClaimActions(app, self.asks, model)
        self.forms = FormActions(app, self.asks, self.claims, model)
        self.jobs = JobActions(app, self.asks, clock, config)
        self.drains = DrainActions(app, self.asks, model)
        self.force_free = ForceFreeActions(app, self.asks)
        self.usage = UsageActions(app, self.asks, clock)
        self.last_view: HeadView | None = None
        """The head's last pushed state (the week screen lays its GPUs out)."""
        self.week = WeekActions(app, self.asks, clock, lambda: self.last_view, snapshots)
        self.audit = AuditActions(app, self.asks, clock)
        self.notice_history = NoticeHistory(self.asks)
        self.health = HealthActions(app, self.asks, local_health, clock)
        self.opener: Opener | None = None
        """How the link opens each connection (None: the head's socket, or through
        SSH); set before ``start``."""
        self.channel: HeadChannel[AsyncHeadClient] | None = None
        """The console's connection to the head when its telemetry source has one
        (shared: one connection per console); set before ``start``."""

    @property
    def link(self) -> HeadLink | None:
        """The one link to the head; None without a ``head:`` section (or before start)."""
        return self.asks.link

    # -- start ---------------------------------------------------------------------

    def start(self) -> None:
        """With a ``head:`` (or ``slurm:``) section: connect in a worker, turn the
        scheduler keys on."""
        if self.config.head is None and self.config.slurm is None:
            return
        where = None
        if self.config.slurm is not None and self.opener is None:
            self.opener, where = self._slurm_opener(self.config.slurm)
        link = self.asks.link = HeadLink(
            self.config,
            self.app.post_message,
            opener=self.opener,
            channel=self.channel,
            where=where,
        )
        main = self._main()
        if where is not None:
            main.scheduler_name = "slurm"
        main.enable_scheduler()
        connecting = _("connecting to {where}…").format(where=link.where())
        main.head_line = ((connecting, _("connecting…")), False)
        self.app.run_worker(
            link.run(),
            name="head",
            group="head",
            description=_("the link to the scheduler's head"),
            exclusive=True,
            exit_on_error=False,
        )

    def _slurm_opener(self, conf: SlurmConfig) -> tuple[Opener, str]:
        """Slurm as the scheduler: its state polled and joined with this console's own
        telemetry (``gputui.ui.head.slurm``)."""
        from gputui.ui.head.slurm import HeadRelay, SlurmConsole

        relay = HeadRelay(self.config, self.channel) if self.config.head is not None else None

        async def opener() -> LinkSession:
            console = SlurmConsole.of(
                conf,
                self.snapshots,
                exempt_users=self.config.scheduler.ownership.exempt_users,
                relay=relay.ask if relay is not None else None,
            )
            return LinkSession(console, local=console.local, backend=console.as_backend())

        if conf.login == "local":
            where = _("Slurm (through the head)") if relay is not None else "Slurm"
        elif relay is not None:
            where = _("Slurm on {login} (through the head)").format(login=conf.login)
        else:
            where = _("Slurm on {login}").format(login=conf.login)
        return opener, where

    def _main(self) -> MainScreen:
        screen = self.app.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    def help_sections(self) -> list[HelpSection]:
        title = (
            "Scheduler" if self.link is not None else "Scheduler (needs a head: or slurm: section)"
        )
        _title, rows = section(title, MainScreen.SCHEDULER_BINDINGS)
        _title, queue = section("Queue screen (Q)", QueueScreen.BINDINGS)
        _title, usage = section("Usage screen (U)", UsageScreen.BINDINGS)
        _title, week = section("Week screen (W)", WeekScreen.BINDINGS)
        _title, audit = section("Audit screen (A)", AuditScreen.BINDINGS)
        return [
            (title, rows),
            ("Queue screen (Q)", queue),
            ("Usage screen (U)", usage),
            ("Week screen (W)", week),
            ("Audit screen (A)", audit),
        ]

    # -- what the head says ----------------------------------------------------------

    def show_state(self, view: HeadView) -> None:
        """A new state from the head: holders, flags and card states on the grid, the
        queue's counts on the main screen, and the queue screen when it is open."""
        if not self.app.screen_stack:
            return  # landed while the console shuts down: nothing left to show it on
        self.last_view = view
        main = self._main()
        model = self.model
        rows = model.set_holders(view.holders())
        rows += model.set_owner_flags(by_gpu(view.flags))
        rows += model.set_clock_locks(view.clock_locks)
        rows += model.set_head_states(
            {g.uuid: g.state for g in view.gpus if g.state in ("unhealthy", "drained")}
        )
        running, pending = view.counts()
        mine = sum(1 for c in view.claims if c.user == view.me.user and c.state == "active")
        main.head_line = (head_forms(running, pending, mine), False)
        main.board_problems = view.board_problems
        self._show_summary(main)
        if rows:
            main.holders_changed(rows)
        self.jobs.show_view(view)
        self.forms.settle.view_changed(view)

    def _show_summary(self, main: MainScreen) -> None:
        with contextlib.suppress(NoMatches):  # the app is closing: its widgets are gone
            main.refresh_summary()

    def show_unreachable(self, reason: str) -> None:
        if not self.app.screen_stack:
            return  # as in ``show_state``
        main = self._main()
        name = _(SCHEDULERS.get(main.scheduler_name, main.scheduler_name))
        said = _("{scheduler} unreachable ({why})").format(scheduler=name, why=clean(reason, 80))
        main.head_line = (said, True)
        main.board_problems = None  # the console's own count until the head is back
        self._show_summary(main)
        self.jobs.show_unreachable(reason)

    def notice(self, message: HeadNotice) -> None:
        severity = "information"
        english = message.english or message.text  # the head's words: the same in any language
        if message.kind in ("preempted", "ownership", "idle") or (
            message.kind == "ended" and " completed " not in f" {english} "
        ):
            severity = "warning"
        self.app.notify(
            message.text,
            title=_(NOTICE_TITLES.get(message.kind, N_("scheduler"))),
            severity=severity,  # type: ignore[arg-type]
            timeout=10,
            markup=False,
        )

    # -- keys ------------------------------------------------------------------------

    def key(self, action: str, row: Row | None) -> None:
        """A scheduler key on the main screen, with ``row`` selected."""
        if action == "queue":
            self.jobs.open_queue()
        elif action == "usage":
            self.usage.open_usage()
        elif action == "week":
            self.week.open_week()
        elif action == "audit":
            self.audit.open_audit()
        elif action == "submit":
            self.forms.open_submit()
        elif action == "claim_n":
            self.forms.open_claim(row.host if isinstance(row, GpuRow) else None)
        elif action == "claim" and isinstance(row, HostRow):
            # A host line asks how many (1 unless changed), never takes them all.
            self.forms.open_claim(row.host)
        else:
            handler = {
                "claim": self.claims.claim_row,
                "release": self.claims.release_row,
                "env": self.claims.env_row,
                "drain": self.drains.drain_row,
                "force_free": self.force_free.force_free_row,
            }
            handler[action](row)
