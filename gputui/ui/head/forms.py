"""The enqueue (``n``) and claim (``C``) forms: opened when the head can be asked, and
sent when filled in.

The form stays open until the head answers: on a refusal it shows the head's words
and can be sent again; on success it closes and a notification says what came of it.
"""

from __future__ import annotations

from collections.abc import Awaitable

from textual.app import App

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
        if self.asks.usable("submit a job", "submit") is not None:
            self.app.push_screen(SubmitScreen(*self.submit_defaults))

    def open_claim(self, host: str | None) -> None:
        if self.asks.usable("claim GPUs", "claim") is not None:
            self.app.push_screen(ClaimScreen(host))

    def send(self, message: FormScreen.Requested) -> None:
        problems: list[str] = []
        link = self.asks.connected(problems.append, message.op)
        if link is None:
            self.asks.refuse(message.op, problems[0])
            message.form.failed(problems[0])
            return
        view = link.view
        if message.op == "claim" and message.args.get("gpus", 1) > 1 and view is not None:
            self._confirm_claim(link, message, plan_claim(view, self.model, message.args))
            return
        self.asks.request(message.op, self._send(link, message))

    def _confirm_claim(
        self, link: HeadLink, message: FormScreen.Requested, plan: ClaimPlan
    ) -> None:
        """A claim of more than one GPU: show which it takes, and send it on a yes."""
        form, args = message.form, message.args
        if plan.cannot_wait(args):
            form.failed(
                f"no host has {plan.count} free GPUs{plan.where} now;"
                " tick 'wait in line' to queue for them"
            )
            return

        def answered(yes: bool | None) -> None:
            if not yes:
                form.failed("not sent: nothing was claimed")
                return
            sent = FormScreen.Requested(form, message.op, plan.request(args))
            self.asks.request(message.op, self._send(link, sent))

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
            form.failed(exc.message)
            self.asks.refuse(op, exc.message)
            return
        form.done()
        if op == "claim":
            claim = result.get("claim") or {}
            count = len(claim.get("gpu_uuids") or []) or message.args.get("gpus", 1)
            what = f"{count} GPU(s) on {clean(claim.get('host') or '?', 64)}"
            await self.claims.answered(link, what, claim)
            return
        job = result.get("job") or {}
        job_id, name = job.get("id"), clean(job.get("name") or "", 60)
        if isinstance(job_id, int) and not isinstance(job_id, bool):
            settled = await self.settle.settled(job_id, link.view)
            if settled is None:
                settled = link.view.job(job_id) if link.view is not None else None
            if settled is not None:
                told = settled_text(settled, link.view)
                self.app.notify(
                    f"job {job_id} ({name}) {told}; Q shows the queue",
                    title="submitted",
                    markup=False,
                )
                return
        reason = clean(job.get("reason") or "", 80)
        self.app.notify(
            f"job {job_id} ({name}) {clean(job.get('state') or '?', 16)}"
            + (f": {reason}" if reason else "")
            + "; Q shows the queue",
            title="submitted",
            markup=False,
        )
