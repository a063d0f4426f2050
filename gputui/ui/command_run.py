"""Running what the ``:`` line and the command palette ask for, on the console.

``CommandRunner`` belongs to the app (``app.commands``): ``open_line`` shows the
``:`` line (with this user's history), ``run_line`` parses a typed line
(``gputui.ui.commands``) and does it, or says in one line why not. A view
(``:queue``, ``:usage``, ``:audit``, ``:health``) replaces the view on top, as in
k9s, rather than piling up; the keys of the main screen (``:release``, ``:sort``,
``:filter``...) act on the main screen and its selected row, as their keys do.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from textual.app import App
from textual.screen import ModalScreen
from textual.widgets import Input

from gputui.common.i18n import _
from gputui.common.text import clean
from gputui.ui.command_history import CommandHistory, history_path
from gputui.ui.commands import Order, Refused, parse
from gputui.ui.head.claim_plan import plan_claim
from gputui.ui.head.console import HeadConsole
from gputui.ui.model import SORT_KEYS
from gputui.ui.screens.command_line import CommandLine
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.main import MainScreen

VIEWS = ("queue", "usage", "audit", "health")
ROW_KEYS = {"release": "release", "submit": "submit", "env": "env", "drain": "drain"}
ROW_KEYS["force-free"] = "force_free"


class Console(Protocol):
    """What the runner needs of the app (``GpuTuiApp``, without importing it)."""

    head: HeadConsole
    cycle_themes: list[str]

    @property
    def main(self) -> MainScreen: ...

    def action_help(self) -> None: ...

    def action_health(self) -> None: ...

    def action_next_theme(self) -> None: ...


class CommandRunner:
    """The ``:`` line's history and every command's effect."""

    def __init__(self, app: App[None], console: Console) -> None:
        self.app = app
        self.console = console
        self.history: CommandHistory | None = None
        """Read when the line is first opened, from ``history_file``."""
        self.history_file: Path | None = None
        """Where the history is kept; None: this user's file (``history_path``), or in
        memory only for a headless app (a test)."""

    def _history(self) -> CommandHistory:
        if self.history is None:
            path = self.history_file
            if path is None and not self.app.is_headless:
                path = history_path()
            self.history = CommandHistory(path)
            if self.history.problem is not None:
                self.app.notify(self.history.problem, severity="warning", timeout=6, markup=False)
        return self.history

    def choices(self) -> tuple[Sequence[str], Sequence[str]]:
        """(sort keys, theme names): what ``:sort`` and ``:theme`` take."""
        return [key.name for key in SORT_KEYS], sorted(self.app.available_themes)

    def open_line(self) -> None:
        """``:``: the command line at the bottom (once)."""
        if isinstance(self.app.screen, CommandLine):
            return
        history = self._history()

        def typed(line: str | None) -> None:
            if line is not None and line.strip():
                history.add(line)
                self.app.call_later(self.run_line, line)

        self.app.push_screen(CommandLine(history.entries, self.choices), typed)

    async def run_line(self, line: str) -> None:
        """Parse ``line`` and do it, or say why not in one line."""
        order = parse(line, *self.choices())
        if isinstance(order, Refused):
            self.app.notify(order.line, title=_("command"), severity="error", markup=False)
            return
        await self.run(order)

    async def run(self, order: Order) -> None:
        verb, app, console = order.verb, self.app, self.console
        on_main = ("claim", "sort", "filter", "group", "tree")
        if verb in VIEWS or verb in ROW_KEYS or verb in on_main:
            await self._to_main()
        head = console.head
        if verb in ("queue", "usage", "audit"):
            head.key(verb, console.main.grid.cursor_row)
        elif verb == "health":
            console.action_health()
        elif verb in ROW_KEYS:
            if head.link is None:
                head.asks.refuse(verb, _("no head configured (add a head: section)"))
                return
            head.key(ROW_KEYS[verb], console.main.grid.cursor_row)
        elif verb == "claim":
            self._claim(order.claim)
        elif verb == "sort":
            self._sort(order.arg)
        elif verb == "filter":
            self._filter(order.arg)
        elif verb == "group":
            console.main.action_group()
        elif verb == "tree":
            console.main.action_tree()
        elif verb == "retry":
            console.main.action_retry()
        elif verb == "theme":
            if order.arg:
                app.theme = order.arg
            else:
                console.action_next_theme()
        elif verb == "help":
            console.action_help()
        elif verb == "quit":
            app.exit()

    async def _to_main(self) -> None:
        """Close the views on top of the main screen (never a question being asked)."""
        app = self.app
        while len(app.screen_stack) > 1 and not isinstance(app.screen, ModalScreen):
            await app.screen.dismiss(None)

    def _claim(self, request: dict[str, Any]) -> None:
        """``:claim``: as ``gputui claim``; a count of more than one shows which GPUs
        it takes and asks first, as the claim form does (named GPUs are taken as named)."""
        head = self.console.head
        asks = head.asks
        count = request.get("gpus") or len(request.get("gpu_refs") or ())
        what = (_("claim {count} GPU") if count == 1 else _("claim {count} GPUs")).format(
            count=count
        )
        link = asks.usable(what, "claim")
        if link is None:
            return

        async def claim(sent: dict[str, Any]) -> None:
            result = await asks.call(link, what, "claim", lambda b: b.claim(**sent))
            if result is not None:
                answer = result.get("claim") or {}
                await head.claims.answered(link, _("{count} GPU(s)").format(count=count), answer)

        view = link.view
        if request.get("gpus", 1) <= 1 or view is None or request.get("mig"):
            asks.request(what, claim(request))
            return
        plan = plan_claim(view, head.model, request)
        if plan.never:  # no question: the head says why, as for a yes
            asks.request(what, claim(request))
            return
        if plan.cannot_wait(request):
            said = _("no host has {count} free GPUs{where} now (--no-wait)")
            asks.refuse(what, said.format(count=plan.count, where=plan.where_after()))
            return

        def answered(yes: bool | None) -> None:
            if yes:
                asks.request(what, claim(plan.request(request)))
            else:
                self.app.notify(_("not sent: nothing was claimed"), title=what, markup=False)

        self.app.push_screen(ConfirmScreen(plan.question(request), plan.label), answered)

    def _sort(self, key: str) -> None:
        self.console.main.sort_by([k.name for k in SORT_KEYS].index(key))

    def _filter(self, text: str) -> None:
        main = self.console.main
        if not text:
            main.action_clear_filter()
            return
        main.action_filter()
        main.query_one("#filter", Input).value = clean(text, 200)
        main.grid.focus()
