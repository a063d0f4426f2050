"""The usage screen: who used the GPUs over the past day, week or 4 weeks, and when.

Top to bottom: a status line (period, when it was last asked, or the one line saying
why the head did not answer), a totals line (GPU-hours allocated, busy %, kWh,
cost), the utilisation-by-hour chart (busy and allocated shares of the GPUs
present: idle nights are its valleys), then bars of allocated GPU-hours per user
and per group with the busy part set apart from the allocated-but-idle rest.
The charts are ``gputui.ui.widgets.usage_charts`` (its docstring says why they are
drawn with block characters rather than textual-plotext).

Like the queue screen it never talks to the head itself: it posts ``Wanted`` with
the range, the app asks the head (``usage`` by user with hours, and by group) in a
worker and hands back ``show_usage`` or ``show_problem``. The next request is
asked for ``refresh_s`` after the last answer came, so requests never pile up; an
answer to an older request (the period changed meanwhile) is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from gputui.common.i18n import N_, _
from gputui.common.text import clean
from gputui.ui.head.usage_view import UsageReport, amount_text, share_text
from gputui.ui.widgets.footer import TranslatedFooter
from gputui.ui.widgets.usage_charts import HourlyChart, UsageBars

PERIODS: dict[str, float] = {"day": 86_400.0, "week": 7 * 86_400.0, "4 weeks": 28 * 86_400.0}
"""What ``p`` steps through, and how far back each looks."""
PAST = {"day": N_("past day"), "week": N_("past week"), "4 weeks": N_("past 4 weeks")}
"""How the status line says each period."""
_MONTHS = (
    N_("{day} Jan {time}"),
    N_("{day} Feb {time}"),
    N_("{day} Mar {time}"),
    N_("{day} Apr {time}"),
    N_("{day} May {time}"),
    N_("{day} Jun {time}"),
    N_("{day} Jul {time}"),
    N_("{day} Aug {time}"),
    N_("{day} Sep {time}"),
    N_("{day} Oct {time}"),
    N_("{day} Nov {time}"),
    N_("{day} Dec {time}"),
)
"""A moment of the range (``03 Dec 14:00``), one a month: the word order is the language's."""
REFRESH_S = 60.0


class UsageScreen(Screen[None]):
    """Usage per user and per group, and the cluster's utilisation by hour."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,U", "close", N_("Back"), tooltip=N_("Back to the GPUs")),
        Binding("r", "refresh", N_("Refresh"), tooltip=N_("Ask the head again now")),
        Binding(
            "p",
            "period",
            N_("Period"),
            tooltip=N_("Next period (d w m: the past day, week, 4 weeks)"),
        ),
        # Said in p's line of the help (no description: not listed on their own).
        Binding("d", "period('day')", "", show=False),
        Binding("w", "period('week')", "", show=False),
        Binding("m", "period('4 weeks')", "", show=False),
    ]

    @dataclass
    class Wanted(Message):
        """``screen`` wants usage over ``since``..``until``; its answer carries ``token``."""

        screen: UsageScreen
        since: float
        until: float
        token: int

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        period: str = "week",
        refresh_s: float = REFRESH_S,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.period = period if period in PERIODS else "week"
        self.refresh_s = refresh_s
        self.users: UsageReport | None = None
        self.groups: UsageReport | None = None
        self.problem: str | None = None
        """Why the last request got no answer (one line); None after an answer."""
        self.asking = False
        self.updated_at: float | None = None
        self.requests = 0
        """Requests posted (tests and the status line read it)."""
        self._token = 0
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="usage-status")
        yield Static("", id="usage-totals")
        yield HourlyChart(id="usage-hours")
        with Horizontal(id="usage-bars"):
            yield UsageBars(_("by user: allocated GPU-h, busy %"), id="usage-users")
            yield UsageBars(_("by group: allocated GPU-h, busy %"), id="usage-groups")
        yield TranslatedFooter()

    def on_mount(self) -> None:
        self.ask()

    # -- asking ----------------------------------------------------------------------

    @property
    def token(self) -> int:
        """The newest request's token: only its answer is shown."""
        return self._token

    def ask(self) -> None:
        """Post a request for the current period now (and forget any older one)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._token += 1
        self.requests += 1
        self.asking = True
        now = self.clock()
        self.post_message(self.Wanted(self, now - PERIODS[self.period], now, self._token))
        self._status()

    def _answered(self, token: int) -> bool:
        """Whether an answer for ``token`` is still wanted; if so, the next is scheduled."""
        if token != self._token or not self.is_attached:
            return False
        self.asking = False
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.refresh_s, self.ask, name="usage-refresh")
        return True

    def show_usage(self, token: int, users: UsageReport, groups: UsageReport) -> None:
        """The head's answers (by user, with the hours; by group) for request ``token``."""
        if not self._answered(token):
            return
        self.users, self.groups, self.problem = users, groups, None
        self.updated_at = self.clock()
        self._status()
        self._totals()
        self.query_one(HourlyChart).show(users.hours, users.since, users.until)
        self.query_one("#usage-users", UsageBars).show(users.totals)
        self.query_one("#usage-groups", UsageBars).show(groups.totals)

    def show_problem(self, token: int, line: str) -> None:
        """Request ``token`` got no answer: ``line`` says why. What was shown stays."""
        if not self._answered(token):
            return
        self.problem = clean(line, 300)
        self._status()
        if self.users is None:
            note = _("no usage to show")
            self.query_one(HourlyChart).show((), 0.0, 0.0, note)
            self.query_one("#usage-users", UsageBars).show((), note)
            self.query_one("#usage-groups", UsageBars).show((), note)

    # -- drawing ---------------------------------------------------------------------

    def _status(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        text.append(" " + _("gputui usage") + " ", "bold reverse")
        updated = (
            time.strftime("%H:%M:%S", time.localtime(self.updated_at))
            if self.updated_at is not None
            else None
        )
        if self.problem is not None:
            # First, so that an 80-column pane shows it whole; then how old what is
            # shown is.
            text.append(f"  !! {self.problem}", "bold red")
            if updated is not None:
                text.append("  " + _("last answer {time}").format(time=updated))
        text.append("  " + _(PAST[self.period]))
        report = self.users
        if report is not None:
            span = _("({since} to {until})").format(
                since=_when(report.since), until=_when(report.until)
            )
            text.append(" " + span)
        if self.asking:
            text.append("  " + _("asking the head…"))
        elif updated is not None and self.problem is None:
            text.append("  " + _("updated {time}").format(time=updated))
        self.query_one("#usage-status", Static).update(text)

    def _totals(self) -> None:
        report = self.users
        if report is None:
            return
        total = report.total
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        allocated = _("{hours} GPU-h allocated").format(hours=amount_text(total.alloc_gpu_h))
        text.append(f" {allocated}", "bold")
        busy = _("{share} busy").format(share=share_text(total.busy_share))
        idle = _("{hours} GPU-h idle").format(hours=amount_text(total.idle_gpu_h))
        text.append(_(", {busy}, {idle}").format(busy=busy, idle=idle))
        text.append(f" · {amount_text(total.energy_kwh)} kWh")
        if total.idle_held_kwh > 0:  # power.mode report or lock: held but idle
            held = _("({kwh} held idle)").format(kwh=amount_text(total.idle_held_kwh))
            text.append(f" {held}")
        text.append(f" · {amount_text(total.cost, 2)} {report.currency}".rstrip())
        self.query_one("#usage-totals", Static).update(text)

    # -- keys --------------------------------------------------------------------------

    def action_close(self) -> None:
        self.dismiss(None)

    def action_refresh(self) -> None:
        self.ask()

    def action_period(self, name: str = "") -> None:
        names = list(PERIODS)
        if name not in PERIODS:
            name = names[(names.index(self.period) + 1) % len(names)]
        self.period = name
        self.ask()


def _when(epoch: float) -> str:
    local = time.localtime(epoch)
    return _(_MONTHS[local.tm_mon - 1]).format(
        day=f"{local.tm_mday:02d}", time=time.strftime("%H:%M", local)
    )
