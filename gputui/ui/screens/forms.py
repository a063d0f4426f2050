"""Small forms that ask the head for something: enqueue a job, claim N GPUs.

A form checks what it can itself (a number is a number, a duration reads as one,
the command splits like a shell line, a MIG profile reads as ``--mig`` reads it) and
shows the problem under its fields; a
good form is sent up as a ``Requested`` message with the request's arguments, and
stays open, saying "sending…", until the app tells it the head's answer: ``done``
closes it, ``failed`` shows the head's words and lets the person fix the field.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from gputui.common import jobenv
from gputui.common.arrays import ArrayError, parse_array
from gputui.common.durations import parse_duration
from gputui.common.i18n import N_, _
from gputui.common.mig_profile import mig_arg
from gputui.ui.widgets.form_input import FormInput
from gputui.ui.widgets.tickbox import TickBox

T = TypeVar("T")


class FormProblem(ValueError):
    """A field's value cannot be used: ``field`` is the input's id, the text says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _problem(field: str, what: str, problem: object) -> FormProblem:
    """``what: problem`` (``what`` a field's name, in English; shown translated)."""
    return FormProblem(field, _("{what}: {problem}").format(what=_(what), problem=problem))


def _count(text: str, field: str, what: str) -> int:
    """A whole number from 1 to 64; an empty field is a problem, never a silent 1."""
    if not text.strip():
        raise FormProblem(
            field,
            _("{what}: required, a whole number from 1 to 64 (e.g. 1)").format(what=_(what)),
        )
    try:
        value = int(text.strip())
    except ValueError:
        raise FormProblem(
            field,
            _("{what}: {value} is not a whole number").format(
                what=_(what), value=repr(text.strip()[:40])
            ),
        ) from None
    if not 1 <= value <= 64:
        raise FormProblem(field, _("{what}: between 1 and 64").format(what=_(what)))
    return value


def _duration(text: str, field: str, what: str) -> float | None:
    if not text.strip():
        return None
    try:
        return parse_duration(text)
    except argparse.ArgumentTypeError as exc:
        raise _problem(field, what, exc) from None


def _mig(text: str, field: str) -> str | None:
    """The MIG field: empty (whole GPUs), or a profile checked as ``--mig`` checks it
    (``mig_arg``: the same pattern, lower-cased)."""
    if not text.strip():
        return None
    try:
        return mig_arg(text)
    except argparse.ArgumentTypeError:
        raise FormProblem(
            field,
            _("MIG: {value} is not a MIG profile (e.g. 1g.10gb, 2g.20gb, 3g.40gb)").format(
                value=repr(text.strip()[:40])
            ),
        ) from None


class FormScreen(ModalScreen[None]):
    """Fields, an error line, Send and Cancel; Esc cancels, Ctrl+S sends."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", N_("Cancel"), tooltip=N_("Close the form, nothing is sent")),
        Binding("ctrl+s", "send", N_("Send"), tooltip=N_("Send the form to the head")),
        Binding("tab", "app.focus_next", N_("Next field"), show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", N_("Previous field"), show=False, priority=True),
    ]
    TITLE_TEXT = ""
    """The form's title, in English (shown translated)."""
    SEND_LABEL = N_("Send")

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

    def title_text(self) -> str:
        """The title in the chosen language."""
        return _(self.TITLE_TEXT)

    def compose(self) -> ComposeResult:
        with Vertical(classes="form-dialog"):
            yield Static(self.title_text(), classes="form-title")
            yield from self.fields()
            yield Static("", id="form-error", classes="form-error")
            with Horizontal(classes="form-buttons"):
                send = _("{label} (Ctrl+S)").format(label=_(self.SEND_LABEL))
                yield Button(send, variant="primary", id="form-send")
                yield Button(_("Cancel (Esc)"), id="form-cancel")

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
        self._say(_("sending…"), error=False)
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
    """A field with its name (``label`` in English, shown translated)."""
    with Horizontal(classes="form-row"):
        yield Label(_(label), classes="form-label")
        yield field


def _gpus_row() -> ComposeResult:
    """The GPU count (with ``MIG``: how many slices)."""
    yield from _row(
        N_("GPUs"),
        FormInput("1", placeholder=_("required (e.g. 1)"), id="f-gpus", restrict=r"[0-9]*"),
    )


MIG_LABEL_W = 10
"""The MIG field's name, beside the host field on its line (the forms fit 80x24)."""


def _host_mig_row(host: str = "") -> ComposeResult:
    """The host, and the MIG profile beside it (``-g N --mig PROFILE``: N slices of
    it; empty: whole GPUs), on one line: in this order for Tab."""
    with Horizontal(classes="form-row"):
        yield Label(_("host"), classes="form-label")
        yield FormInput(host, placeholder=_("any"), id="f-host")
        mig = Label(_("MIG"), classes="form-label")
        mig.styles.width = MIG_LABEL_W
        yield mig
        yield FormInput(placeholder=_("none (e.g. 1g.10gb)"), id="f-mig")


class SubmitScreen(FormScreen):
    """The enqueue form: the fields of ``gputui submit``."""

    TITLE_TEXT = N_("Enqueue a job (runs when GPUs are free)")
    SEND_LABEL = N_("Submit")

    def __init__(self, cwd: str | None = None, command: str = "") -> None:
        """``cwd`` and ``command`` fill the form in (the demo offers its own job)."""
        super().__init__()
        self.cwd = cwd if cwd is not None else os.getcwd()
        self.command = command

    def fields(self) -> ComposeResult:
        yield from _row(
            N_("command"),
            FormInput(
                self.command,
                placeholder="python train.py --epochs 3",
                id="f-command",
                select_on_focus=False,  # typing adds to the offered command, not over it
            ),
        )
        yield from _gpus_row()
        yield from _row(N_("pool"), FormInput(placeholder=_("any"), id="f-pool"))
        yield from _host_mig_row()
        yield from _row(N_("name"), FormInput(placeholder=_("the command's name"), id="f-name"))
        yield from _row(N_("cwd"), FormInput(self.cwd, id="f-cwd", select_on_focus=False))
        yield from _row(
            N_("time limit"), FormInput(placeholder=_("none (e.g. 30m, 2h)"), id="f-time")
        )
        yield from _row(
            N_("priority"), FormInput(placeholder=_("the default class"), id="f-priority")
        )
        yield from _row(
            N_("project"), FormInput(placeholder=_("none (for accounting)"), id="f-project")
        )
        yield from _row(N_("after"), FormInput(placeholder=_("job ids, e.g. 12,13"), id="f-after"))
        yield from _row(
            N_("env"),
            FormInput(placeholder=_("none (e.g. SEED=1 WANDB_MODE=offline)"), id="f-env"),
        )
        yield from _row(
            N_("export"), FormInput(placeholder=_("NONE (or ALL, or KEY1,KEY2)"), id="f-export")
        )
        yield from _row(
            N_("runs in"),
            FormInput(
                placeholder=_("this host (or conda ENV, venv PATH, image IMAGE)"), id="f-runs-in"
            ),
        )
        yield from _row(
            N_("script"),
            FormInput(
                placeholder=_("none (a file here: its #GPUTUI/#SBATCH lines)"), id="f-script"
            ),
        )
        yield from _row(
            N_("array"), FormInput(placeholder=_("none (e.g. 0-31%4, 1,3,5)"), id="f-array")
        )
        with Horizontal(classes="form-row"):
            yield Label("", classes="form-label")
            yield TickBox(_("preemptible (may be stopped and requeued)"), id="f-preemptible")

    def build(self) -> tuple[str, dict[str, Any]]:
        line = self.value("f-command")
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            raise _problem("f-command", "command", exc) from None
        script = self.value("f-script")
        if not argv and not script:
            raise FormProblem("f-command", _("command: what should the job run?"))
        args: dict[str, Any] = {"argv": argv}
        gpus = self.value("f-gpus")
        if script:
            # A script's own -g stands unless the field says otherwise (1 is its default).
            if not script.startswith("/"):
                raise FormProblem(
                    "f-script", _("script: a path on this machine, e.g. /home/you/x.sh")
                )
            args["script_path"] = script
            if gpus.strip() not in ("", "1"):
                args["gpus"] = _count(gpus, "f-gpus", "GPUs")
        else:
            args["gpus"] = _count(gpus, "f-gpus", "GPUs")
        mig = _mig(self.value("f-mig"), "f-mig")
        if mig is not None:
            args["mig"] = mig
        if self.query_one("#f-preemptible", TickBox).value:
            args["preemptible"] = True
        elif not script:
            args["preemptible"] = False
        array = self.value("f-array")
        if array:
            try:
                parse_array(array)
            except ArrayError as exc:
                raise _problem("f-array", "array", str(exc).removeprefix("--array: ")) from None
            args["array"] = array
        cwd = self.value("f-cwd")
        if cwd:
            if not cwd.startswith("/"):
                raise FormProblem("f-cwd", _("cwd: an absolute path on the host, e.g. /home/you"))
            args["cwd"] = cwd
        after = self.value("f-after")
        if after:
            parts = [p.strip() for p in after.replace(" ", ",").split(",") if p.strip()]
            good = all(p.isdigit() and len(p) <= 15 and int(p) > 0 for p in parts)
            if not parts or not good or len(parts) > 256:
                raise FormProblem("f-after", _("after: job ids separated by commas, e.g. 12,13"))
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
        setup = self._setup(cwd or self.cwd)
        if setup:
            args["setup"] = setup
        return "submit", args

    def _setup(self, cwd: str) -> jobenv.JobSetup:
        """The env, export and runs-in fields, checked as ``gputui submit`` checks them."""
        env = _checked("f-env", "env", lambda: shlex.split(self.value("f-env")))
        _checked("f-env", "env", lambda: [jobenv.env_pair(pair) for pair in env])
        export = self.value("f-export") or None
        if export is not None:
            _checked("f-export", "export", lambda: jobenv.parse_export(export))
        wrap = _checked("f-runs-in", "runs in", lambda: runs_in(self.value("f-runs-in")))

        def whole() -> jobenv.JobSetup:
            reserved = jobenv.RESERVED_ENV
            return jobenv.setup(
                env=env, export=export, environ=os.environ, cwd=cwd, reserved=reserved, **wrap
            )

        try:
            return whole()
        except jobenv.JobEnvError as exc:  # the variables' limits, or what it runs in
            on_env = str(exc).startswith(("--env", "--export"))
            field, what = ("f-env", "env") if on_env else ("f-runs-in", "runs in")
            raise _problem(field, what, exc) from None


def _checked(field: str, what: str, read: Callable[[], T]) -> T:
    """``read()``, its one-line ValueError as the field's problem."""
    try:
        return read()
    except ValueError as exc:
        raise _problem(field, what, exc) from None


RUNS_IN_WORDS = ("conda", "venv", "image", *jobenv.RUNTIMES)


def runs_in(text: str) -> dict[str, str]:
    """The form's "runs in": empty (this host), ``conda ENV``, ``venv PATH``, ``image
    IMAGE`` (the head's runtime) or ``RUNTIME IMAGE``; ValueError in one line."""
    words = shlex.split(text)
    if not words:
        return {}
    if len(words) != 2 or words[0] not in RUNS_IN_WORDS:
        raise ValueError(
            _("give conda ENV, venv PATH, image IMAGE, or docker, podman or apptainer IMAGE")
        )
    kind, value = words
    if kind in ("conda", "venv", "image"):
        return {kind: value}
    return {"image": value, "runtime": kind}


class ClaimScreen(FormScreen):
    """Claim N free GPUs, optionally of a pool, model or host, for a while."""

    TITLE_TEXT = N_("Claim free GPUs (more than one: you see which first)")
    SEND_LABEL = N_("Claim")

    def __init__(self, host: str | None = None) -> None:
        super().__init__()
        self.host = host or ""

    def title_text(self) -> str:
        if self.host:
            return _("Claim free GPUs on {host} (more than one: you see which first)").format(
                host=self.host
            )
        return super().title_text()

    def fields(self) -> ComposeResult:
        yield from _gpus_row()
        yield from _row(N_("pool"), FormInput(placeholder=_("any"), id="f-pool"))
        yield from _row(N_("model"), FormInput(placeholder=_("any (e.g. a100)"), id="f-model"))
        yield from _host_mig_row(self.host)
        yield from _row(N_("for"), FormInput(placeholder=_("until released (e.g. 2h)"), id="f-for"))
        yield from _row(
            N_("note"), FormInput(placeholder=_("what for (shown to others)"), id="f-note")
        )
        with Horizontal(classes="form-row"):
            yield Label("", classes="form-label")
            yield TickBox(_("wait in line if not free now"), value=True, id="f-wait")

    def build(self) -> tuple[str, dict[str, Any]]:
        args: dict[str, Any] = {
            "gpus": _count(self.value("f-gpus"), "f-gpus", "GPUs"),
            "wait": self.query_one("#f-wait", TickBox).value,
            "note": self.value("f-note"),
        }
        for field, key in (("f-pool", "pool"), ("f-model", "model"), ("f-host", "host")):
            if self.value(field):
                args[key] = self.value(field)
        mig = _mig(self.value("f-mig"), "f-mig")
        if mig is not None:
            args["mig"] = mig
        duration = _duration(self.value("f-for"), "f-for", "for")
        if duration is not None:
            args["duration_s"] = duration
        return "claim", args
