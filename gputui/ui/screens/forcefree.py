"""The force-free modal (``F`` on a GPU): each step of taking a stuck card back, live.

The head does the work (``force_free``: drain, stop its jobs and claims, SIGTERM,
SIGKILL, check the memory, then the holders and a reset where permitted) and pushes
each step as it ends; this modal lists them with their outcome as they come, and the
final verdict. Closing it does not stop the run: the head finishes it, and every
step is in the audit trail.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.common.i18n import N_, _
from gputui.common.text import clean
from gputui.wire.words import told_text

STEPS = ("drain", "stop", "sigterm", "sigkill", "memory")
"""The steps every run goes through, in order (``holders``, ``reset`` and a second
``memory`` follow only when the memory stays held)."""
_NAMES = {
    "drain": N_("drain the card"),
    "stop": N_("kill its jobs, release its claims"),
    "sigterm": N_("SIGTERM the other processes"),
    "sigkill": N_("SIGKILL what is left"),
    "memory": N_("check the memory came back"),
    "holders": N_("what holds /dev/nvidia*"),
    "reset": N_("reset the GPU"),
}


def _step_word(step: str) -> str:
    """A step as the verdict names it: its code (``memory``) in English, its words
    where the reader's language has them (a code is no word in another language)."""
    name = _NAMES.get(step)
    said = _(name) if name is not None else step
    return step if said == name else said


class ForceFreeScreen(ModalScreen[None]):
    """Steps of one force-free run, as the head reports them."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", N_("Close"), tooltip=N_("Close (the head finishes the run)")),
    ]

    def __init__(self, what: str, reason: str) -> None:
        super().__init__()
        self.what = what
        self.reason = reason
        self.steps: list[dict[str, Any]] = []
        self.verdict: Text | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="forcefree-dialog"):
            title = _("Force-free {what}").format(what=self.what)
            yield Static(Text(title, "bold"), id="forcefree-title")
            why = _("why: {reason}").format(reason=clean(self.reason, 200))
            yield Static(Text(why, "dim"), id="forcefree-reason")
            yield Static("", id="forcefree-steps")
            yield Static("", id="forcefree-verdict")
            yield Static(Text(_("Esc closes; the head finishes the run."), "dim"))

    def on_mount(self) -> None:
        self.app.clear_notifications()
        self._show()

    def step(self, view: object) -> None:
        """One step as the head pushed it: {step, ok, outcome, ...}."""
        if not isinstance(view, dict):
            return
        name = view.get("step")
        if not isinstance(name, str):
            return
        ok = view.get("ok")
        outcome = told_text(view, "outcome")
        self.steps.append(
            {
                "step": clean(name, 32),
                "ok": ok if isinstance(ok, bool) else None,
                "outcome": clean(outcome, 300),
            }
        )
        self._show()

    def done(self, answer: dict[str, Any] | None, problem: str | None = None) -> None:
        """The head's last word: the card is free, or which step failed; or why there
        was no answer."""
        if problem is not None:
            self.verdict = Text(clean(problem, 300), "bold red")
        elif answer is not None:
            steps = answer.get("steps")
            if isinstance(steps, list) and len(steps) > len(self.steps):
                for view in steps[len(self.steps) :]:
                    self.step(view)
            if answer.get("free") is True:
                self.verdict = Text(_("The card is free."), "bold green")
            else:
                failed = next((s for s in self.steps if s["ok"] is False), None)
                if failed is None:
                    said = _("Not free. The card stays drained.")
                else:
                    said = _("Not free at {step}: {outcome}. The card stays drained.").format(
                        step=_step_word(failed["step"]),
                        outcome=failed["outcome"],
                    )
                self.verdict = Text(said, "bold red")
        self._show()

    def _show(self) -> None:
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column()
        seen = {s["step"] for s in self.steps}
        rows = list(self.steps) + [
            {"step": name, "ok": None, "outcome": ""} for name in STEPS if name not in seen
        ]
        running = True
        for row in rows:
            ok = row["ok"]
            if ok is True:
                mark = Text(_("done"), "green")
            elif ok is False:
                mark = Text(_("FAILED"), "bold red")
                running = False
            elif running and self.verdict is None and row["step"] not in seen:
                mark, running = Text("...", "yellow"), False
            else:
                mark = Text("", "dim")
            label = _(_NAMES.get(row["step"], row["step"]))
            table.add_row(mark, Text(label), Text(row["outcome"], "dim"))
        self.query_one("#forcefree-steps", Static).update(table)
        self.query_one("#forcefree-verdict", Static).update(self.verdict or "")

    def action_close(self) -> None:
        self.dismiss(None)
