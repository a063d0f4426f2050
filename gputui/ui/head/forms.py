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
from gputui.ui.head.claims import ClaimActions
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.screens.forms import ClaimScreen, FormScreen, SubmitScreen


class FormActions:
    """Opening the forms and sending what is filled in."""

    def __init__(self, app: App[None], asks: HeadRequests, claims: ClaimActions) -> None:
        self.app = app
        self.asks = asks
        self.claims = claims
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
        self.asks.request(message.op, self._send(link, message))

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
            what = f"{len(claim.get('gpu_uuids') or []) or message.args.get('gpus', 1)} GPU(s)"
            await self.claims.answered(link, what, claim)
            return
        job = result.get("job") or {}
        reason = clean(job.get("reason") or "", 80)
        self.app.notify(
            f"job {job.get('id')} ({clean(job.get('name') or '', 60)}) {job.get('state')}"
            + (f": {reason}" if reason else "")
            + "; Q shows the queue",
            title="submitted",
            timeout=8,
            markup=False,
        )
