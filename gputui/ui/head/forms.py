"""The enqueue (``n``) and claim (``C``) forms: opened when the head can be asked, and
sent when filled in.

The form stays open until the head answers: on a refusal it shows the head's words
and can be sent again; on success it closes and a notification says what came of it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable
from typing import Any

from textual.app import App

from gputui.common.i18n import N_, _
from gputui.common.job_words import reason_text, state_text
from gputui.common.jobscript import DirectiveError, load_script, submit_kwargs
from gputui.common.text import clean
from gputui.scheduler.client.backend import Answer, AsyncBackend
from gputui.scheduler.client.errors import HeadError
from gputui.ui.head.claim_plan import ClaimPlan, plan_claim
from gputui.ui.head.claims import ClaimActions
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.head.settle import JobSettle, settled_text
from gputui.ui.model import ClusterModel
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.forms import ClaimScreen, FormScreen, SubmitScreen


def script_submission(args: dict[str, Any]) -> dict[str, Any]:
    """The enqueue form's request with a script: the script read now (the copy the job
    runs), its directives under the form's fields (what the form says wins, as the
    command line's flags do), the command field its arguments."""
    form = dict(args)
    path = form.pop("script_path")
    script = load_script(path)
    sent = {"gpus": 1, "preemptible": False, **submit_kwargs(script.options), **form}
    sent["argv"] = [os.path.basename(path) or "script", *form.get("argv", [])]
    sent["script"] = script.text
    return sent


_OP_WHAT = {"submit": N_("submit a job"), "claim": N_("claim GPUs")}
"""A form's request, as a toast's title says it (``cannot submit a job``)."""


def op_what(op: str) -> str:
    """``op`` (a form's wire op) in words, marked for the toast to translate."""
    return _OP_WHAT.get(op, op)


class FormActions:
    """Opening the forms and sending what is filled in."""

    def __init__(
        self, app: App[None], asks: HeadRequests, claims: ClaimActions, model: ClusterModel
    ) -> None:
        self.app = app
        self.asks = asks
        self.claims = claims
        self.model = model
        self.settle = JobSettle()
        """Submitted jobs waited on until they leave ``queued`` (fed each new state)."""
        self.submit_defaults: tuple[str | None, str] = (None, "")
        """(cwd, command) the enqueue form starts with (the demo sets its own job)."""

    def open_submit(self) -> None:
        if self.asks.usable(N_("submit a job"), "submit") is not None:
            self.app.push_screen(SubmitScreen(*self.submit_defaults))

    def open_claim(self, host: str | None) -> None:
        if self.asks.usable(N_("claim GPUs"), "claim") is not None:
            self.app.push_screen(ClaimScreen(host))

    def send(self, message: FormScreen.Requested) -> None:
        problems: list[str] = []
        link = self.asks.connected(problems.append, message.op)
        if link is None:
            self.asks.refuse(op_what(message.op), problems[0])
            message.form.failed(problems[0])
            return
        if message.op == "submit" and "script_path" in message.args:
            try:
                message = FormScreen.Requested(
                    message.form, message.op, script_submission(message.args)
                )
            except DirectiveError as exc:
                message.form.failed(str(exc))
                return
        view = link.view
        many = message.args.get("gpus", 1) > 1 and not message.args.get("mig")
        # (MIG slices: the head picks them; the plan knows whole cards only)
        if message.op == "claim" and many and view is not None:
            self._confirm_claim(link, message, plan_claim(view, self.model, message.args))
            return
        self.asks.request(op_what(message.op), self._send(link, message))

    def _confirm_claim(
        self, link: HeadLink, message: FormScreen.Requested, plan: ClaimPlan
    ) -> None:
        """A claim of more than one GPU: show which it takes, and send it on a yes."""
        form, args = message.form, message.args
        if plan.never:  # no question: the head says why, as for a yes
            self.asks.request(op_what(message.op), self._send(link, message))
            return
        if plan.cannot_wait(args):
            form.failed(
                _(
                    "no host has {count} free GPUs{where} now; tick 'wait in line' to queue"
                    " for them"
                ).format(count=plan.count, where=plan.where_after())
            )
            return

        def answered(yes: bool | None) -> None:
            if not yes:
                form.failed(_("not sent: nothing was claimed"))
                return
            sent = FormScreen.Requested(form, message.op, plan.request(args))
            self.asks.request(op_what(message.op), self._send(link, sent))

        self.app.push_screen(ConfirmScreen(plan.question(args), plan.label), answered)

    async def _send(self, link: HeadLink, message: FormScreen.Requested) -> None:
        form, op, args = message.form, message.op, message.args

        def request(backend: AsyncBackend) -> Awaitable[Answer]:
            if op == "claim":
                return backend.claim(**args)
            return backend.submit(**args)

        try:
            result = await link.ask(op, request)
        except HeadError as exc:
            form.failed(exc.shown)
            self.asks.refuse(op_what(op), exc.shown)
            return
        form.done()
        if op == "claim":
            claim = result.get("claim") or {}
            count = len(claim.get("gpu_uuids") or []) or message.args.get("gpus", 1)
            host = clean(claim.get("host") or "?", 64)
            what = _("{count} GPU(s) on {host}").format(count=count, host=host)
            await self.claims.answered(link, what, claim)
            return
        job = result.get("job") or {}
        job_id, name = job.get("id"), clean(job.get("name") or "", 60)
        array = result.get("array")
        if isinstance(array, dict):  # its tasks settle one by one: say what was queued
            self.app.notify(
                _(
                    "array {array} ({name}): {tasks} tasks queued; Q shows the queue"
                    " (e expands an array)"
                ).format(
                    array=clean(array.get("id"), 20), name=name, tasks=clean(array.get("tasks"), 8)
                ),
                title=_("submitted"),
                markup=False,
            )
            return
        if isinstance(job_id, int) and not isinstance(job_id, bool):
            settled = await self.settle.settled(job_id, link.view)
            if settled is None:
                settled = link.view.job(job_id) if link.view is not None else None
            if settled is not None:
                told = settled_text(settled, link.view)
                self.app.notify(
                    _("job {job} ({name}) {told}; Q shows the queue").format(
                        job=job_id, name=name, told=told
                    ),
                    title=_("submitted"),
                    markup=False,
                )
                return
        reason = clean(job.get("reason") or "", 80)
        state = state_text(clean(job.get("state") or "?", 16))
        if reason:
            told = _("job {job} ({name}) {state}: {reason}; Q shows the queue").format(
                job=job_id, name=name, state=state, reason=reason_text(reason)
            )
        else:
            told = _("job {job} ({name}) {state}; Q shows the queue").format(
                job=job_id, name=name, state=state
            )
        self.app.notify(told, title=_("submitted"), markup=False)
