"""A yes/no question before anything irreversible; a reason too where an admin acts
on another user's work."""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from gputui.common.i18n import N_, _

_R = TypeVar("_R")


class _Asking(ModalScreen[_R], Generic[_R]):
    """A dialog that puts ``question`` and names its go-ahead button ``confirm_label``."""

    def __init__(self, question: Text, confirm_label: str) -> None:
        super().__init__()
        self.question = question
        self.confirm_label = confirm_label


class ConfirmScreen(_Asking[bool]):
    """Ask ``question``; ``y`` answers yes, ``n``, Esc or Enter on Cancel answer no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", N_("Yes"), tooltip=N_("Yes: go ahead")),
        Binding("n,escape", "answer(False)", N_("No"), tooltip=N_("No: cancel, nothing is sent")),
    ]

    def __init__(self, question: Text, confirm_label: str = N_("Yes")) -> None:
        super().__init__(question, confirm_label)

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(self.question, id="confirm-question")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{_(self.confirm_label)} (y)", variant="error", id="confirm-yes")
                yield Button(_("Cancel (n)"), variant="default", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ReasonScreen(_Asking[str | None]):
    """Ask ``question`` and a reason (an admin acting on another user's work: the
    reason goes to the audit log). Enter sends it, Esc or Cancel sends nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", N_("Cancel"), tooltip=N_("Cancel: nothing is sent")),
    ]

    def __init__(self, question: Text, confirm_label: str = N_("Go ahead")) -> None:
        super().__init__(question, confirm_label)

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Static(self.question, id="confirm-question")
            yield Input(placeholder=_("why (for the audit log)"), max_length=200, id="reason-input")
            yield Static("", id="reason-problem")
            with Horizontal(id="confirm-buttons"):
                label = f"{_(self.confirm_label)} (Enter)"
                yield Button(label, variant="error", id="confirm-yes")
                yield Button(_("Cancel (Esc)"), variant="default", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#reason-input", Input).focus()

    def _send(self) -> None:
        reason = " ".join(self.query_one("#reason-input", Input).value.split())
        if not reason:
            self.query_one("#reason-problem", Static).update(
                Text(_("A reason is required: it is written to the audit log."), "bold red")
            )
            return
        self.dismiss(reason)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._send()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm-yes":
            self._send()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
