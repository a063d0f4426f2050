"""Small forms that ask the head for something: enqueue a job, claim N GPUs.

A form checks what it can itself (a number is a number, a duration reads as one,
the command splits like a shell line) and shows the problem under its fields; a
good form is sent up as a ``Requested`` message with the request's arguments, and
stays open, saying "sending…", until the app tells it the head's answer: ``done``
closes it, ``failed`` shows the head's words and lets the person fix the field.
"""

from __future__ import annotations

import argparse
import os
import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from gputui.common.durations import parse_duration
from gputui.ui.widgets.form_input import FormInput
from gputui.ui.widgets.tickbox import TickBox


class FormProblem(ValueError):
    """A field's value cannot be used: ``field`` is the input's id, the text says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _count(text: str, field: str, what: str) -> int:
    """A whole number from 1 to 64; an empty field is a problem, never a silent 1."""
    if not text.strip():
        raise FormProblem(field, f"{what}: required, a whole number from 1 to 64 (e.g. 1)")
    try:
        value = int(text.strip())
    except ValueError:
        raise FormProblem(field, f"{what}: {text.strip()!r} is not a whole number") from None
    if not 1 <= value <= 64:
        raise FormProblem(field, f"{what}: between 1 and 64")
    return value


def _duration(text: str, field: str, what: str) -> float | None:
    if not text.strip():
        return None
    try:
        return parse_duration(text)
    except argparse.ArgumentTypeError as exc:
        raise FormProblem(field, f"{what}: {exc}") from None


class FormScreen(ModalScreen[None]):
    """Fields, an error line, Send and Cancel; Esc cancels, Ctrl+S sends."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", tooltip="Close the form, nothing is sent"),
        Binding("ctrl+s", "send", "Send", tooltip="Send the form to the head"),
        Binding("tab", "app.focus_next", "Next field", show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False, priority=True),
    ]
    TITLE_TEXT = ""
    SEND_LABEL = "Send"

    @dataclass
    class Requested(Message):
        """The form is filled in: ask the head ``op`` with ``args``."""

        form: FormScreen
        op: str
        args: dict[str, Any]

    def __init__(self) -> None:
        super().__init__()
        self.sending = False

    def fields(self) -> ComposeResult:
        raise NotImplementedError  # pragma: no cover

    def build(self) -> tuple[str, dict[str, Any]]:
        """The op and its arguments, or ``FormProblem``."""
        raise NotImplementedError  # pragma: no cover

    def compose(self) -> ComposeResult:
        with Vertical(classes="form-dialog"):
            yield Static(self.TITLE_TEXT, classes="form-title")
            yield from self.fields()
            yield Static("", id="form-error", classes="form-error")
            with Horizontal(classes="form-buttons"):
                yield Button(f"{self.SEND_LABEL} (Ctrl+S)", variant="primary", id="form-send")
                yield Button("Cancel (Esc)", id="form-cancel")

    def on_mount(self) -> None:
        first = self.query(Input).first()
        first.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "form-send":
            self.action_send()
        else:
            self.action_cancel()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_send()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_send(self) -> None:
        if self.sending:
            return
        try:
            op, args = self.build()
        except FormProblem as problem:
            self._say(str(problem))
            self.query_one(f"#{problem.field}").focus()
            return
        self.sending = True
        self._say("sending…", error=False)
        self.post_message(self.Requested(self, op, args))

    # -- the answer (from the app) -----------------------------------------------

    def done(self) -> None:
        self.dismiss(None)

    def failed(self, message: str) -> None:
        """The head refused (or was away): say so and let the person try again."""
        self.sending = False
        self._say(message)

    def _say(self, text: str, *, error: bool = True) -> None:
        line = self.query_one("#form-error", Static)
        line.set_class(error, "-error")
        line.update(text)

    def value(self, field: str) -> str:
        return self.query_one(f"#{field}", Input).value.strip()


def _row(label: str, field: Input) -> ComposeResult:
    with Horizontal(classes="form-row"):
        yield Label(label, classes="form-label")
        yield field


class SubmitScreen(FormScreen):
    """The enqueue form: the fields of ``gputui submit``."""

    TITLE_TEXT = "Enqueue a job (runs when GPUs are free)"
    SEND_LABEL = "Submit"

    def __init__(self, cwd: str | None = None, command: str = "") -> None:
        """``cwd`` and ``command`` fill the form in (the demo offers its own job)."""
        super().__init__()
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.command = command

    def fields(self) -> ComposeResult:
        yield from _row(
            "command",
            FormInput(
                self.command,
                placeholder="python train.py --epochs 3",
                id="f-command",
                select_on_focus=False,  # typing adds to the offered command, not over it
            ),
        )
        yield from _row(
            "GPUs", FormInput("1", placeholder="required (e.g. 1)", id="f-gpus", restrict=r"[0-9]*")
        )
        yield from _row("pool", FormInput(placeholder="any", id="f-pool"))
        yield from _row("host", FormInput(placeholder="any", id="f-host"))
        yield from _row("name", FormInput(placeholder="the command's name", id="f-name"))
        yield from _row("cwd", FormInput(self.cwd, id="f-cwd", select_on_focus=False))
        yield from _row("time limit", FormInput(placeholder="none (e.g. 30m, 2h)", id="f-time"))
        yield from _row("priority", FormInput(placeholder="the default class", id="f-priority"))
        yield from _row("project", FormInput(placeholder="none (for accounting)", id="f-project"))
        yield from _row("after", FormInput(placeholder="job ids, e.g. 12,13", id="f-after"))
        with Horizontal(classes="form-row"):
            yield Label("", classes="form-label")
            yield TickBox("preemptible (may be stopped and requeued)", id="f-preemptible")

    def build(self) -> tuple[str, dict[str, Any]]:
        line = self.value("f-command")
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise FormProblem("f-command", f"command: {exc}") from None
        if not argv:
            raise FormProblem("f-command", "command: what should the job run?")
        args: dict[str, Any] = {
            "argv": argv,
            "gpus": _count(self.value("f-gpus"), "f-gpus", "GPUs"),
            "preemptible": self.query_one("#f-preemptible", TickBox).value,
        }
        cwd = self.value("f-cwd")
        if cwd:
            if not cwd.startswith("/"):
                raise FormProblem("f-cwd", "cwd: an absolute path on the host, e.g. /home/you")
            args["cwd"] = cwd
        after = self.value("f-after")
        if after:
            parts = [p.strip() for p in after.replace(" ", ",").split(",") if p.strip()]
            good = all(p.isdigit() and len(p) <= 15 and int(p) > 0 for p in parts)
            if not parts or not good or len(parts) > 256:
                raise FormProblem("f-after", "after: job ids separated by commas, e.g. 12,13")
            args["after"] = [int(p) for p in parts]
        for field, key in (
            ("f-pool", "pool"),
            ("f-host", "host"),
            ("f-name", "name"),
            ("f-priority", "priority"),
            ("f-project", "project"),
        ):
            if self.value(field):
                args[key] = self.value(field)
        limit = _duration(self.value("f-time"), "f-time", "time limit")
        if limit is not None:
            args["time_limit_s"] = limit
        return "submit", args


class ClaimScreen(FormScreen):
    """Claim N free GPUs, optionally of a pool, model or host, for a while."""

    TITLE_TEXT = "Claim free GPUs (more than one: you see which first)"
    SEND_LABEL = "Claim"

    def __init__(self, host: str | None = None) -> None:
        super().__init__()
        self.host = host or ""
        if host:
            self.TITLE_TEXT = f"Claim free GPUs on {host} (more than one: you see which first)"

    def fields(self) -> ComposeResult:
        yield from _row(
            "GPUs", FormInput("1", placeholder="required (e.g. 1)", id="f-gpus", restrict=r"[0-9]*")
        )
        yield from _row("pool", FormInput(placeholder="any", id="f-pool"))
        yield from _row("model", FormInput(placeholder="any (e.g. a100)", id="f-model"))
        yield from _row("host", FormInput(self.host, placeholder="any", id="f-host"))
        yield from _row("for", FormInput(placeholder="until released (e.g. 2h)", id="f-for"))
        yield from _row("note", FormInput(placeholder="what for (shown to others)", id="f-note"))
        with Horizontal(classes="form-row"):
            yield Label("", classes="form-label")
            yield TickBox("wait in line if not free now", value=True, id="f-wait")

    def build(self) -> tuple[str, dict[str, Any]]:
        args: dict[str, Any] = {
            "gpus": _count(self.value("f-gpus"), "f-gpus", "GPUs"),
            "wait": self.query_one("#f-wait", TickBox).value,
            "note": self.value("f-note"),
        }
        for field, key in (("f-pool", "pool"), ("f-model", "model"), ("f-host", "host")):
            if self.value(field):
                args[key] = self.value(field)
        duration = _duration(self.value("f-for"), "f-for", "for")
        if duration is not None:
            args["duration_s"] = duration
        return "claim", args
