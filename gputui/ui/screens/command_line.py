"""The ``:`` command line: one input line at the bottom of the screen, as in k9s and vim.

Tab completes the command's name (and ``sort``'s key, ``theme``'s name) as far as
it is unambiguous, and the rest of the only match is shown greyed as you type
(Right accepts it); Up and Down walk the history; Enter runs the line, Escape
closes it. What a line does is decided by the app (``gputui.ui.commands`` parses
it): this screen only returns the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Static

from gputui.common.i18n import N_, _
from gputui.ui.commands import MAX_LINE, complete, completions


class _Completer(Suggester):
    def __init__(self, choices: Callable[[], tuple[Sequence[str], Sequence[str]]]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.choices = choices

    async def get_suggestion(self, value: str) -> str | None:
        found = completions(value, *self.choices())
        return found[0] if len(found) == 1 and found[0] != value else None


class CommandLine(ModalScreen[str | None]):
    """``:`` and a line; dismissed with the line typed (None: Escape)."""

    DEFAULT_CSS = """
    CommandLine {
        align: left bottom;
        background: $background 0%;
    }
    CommandLine > Horizontal {
        width: 100%;
        height: 1;
        background: $panel;
    }
    CommandLine #command-prompt {
        width: 1;
        text-style: bold;
    }
    CommandLine #command {
        width: 1fr;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", N_("Close"), show=False),
        Binding("tab", "complete", N_("Complete"), show=False, priority=True),
        Binding("up", "history(-1)", N_("Older"), show=False, priority=True),
        Binding("down", "history(1)", N_("Newer"), show=False, priority=True),
    ]

    def __init__(
        self,
        history: Sequence[str],
        choices: Callable[[], tuple[Sequence[str], Sequence[str]]],
    ) -> None:
        """``history``: the lines typed before, oldest first; ``choices``: the sort
        keys and theme names (asked at each completion)."""
        super().__init__()
        self.history = list(history)
        self.choices = choices
        self._at = len(self.history)
        self._typed = ""

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static(":", id="command-prompt")
            yield Input(
                placeholder=_("queue usage health audit · claim 2 --pool a100 · sort util · q"),
                id="command",
                max_length=MAX_LINE,
                suggester=_Completer(self.choices),
                compact=True,
            )

    def on_mount(self) -> None:
        self.field.focus()

    @property
    def field(self) -> Input:
        return self.query_one("#command", Input)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_complete(self) -> None:
        field = self.field
        done = complete(field.value, *self.choices())
        if done is not None:
            field.value = done
            field.cursor_position = len(done)

    def action_history(self, step: int) -> None:
        """Up (-1): an older line; Down (+1): a newer one, then what was being typed."""
        if not self.history:
            return
        field = self.field
        if self._at == len(self.history):
            self._typed = field.value
        self._at = max(0, min(len(self.history), self._at + step))
        value = self._typed if self._at == len(self.history) else self.history[self._at]
        field.value = value
        field.cursor_position = len(value)
