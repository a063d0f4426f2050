"""The queue screen's side (``Q``): open it on the head's state, act on a job, and
follow the selected job's record, why it waits, and its output as it grows.

One queue screen at a time; it is shown every new state the head pushes, and told
when the head is unreachable. A job's output is followed in one worker (group
``job-log``): a newer selection replaces it, closing the screen cancels it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.app import App
from textual.worker import Worker

from gputui.common.i18n import _
from gputui.common.job_words import state_text
from gputui.common.text import clean
from gputui.config.models import Config
from gputui.scheduler.client.backend import Answer, AsyncBackend
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.explain_text import explain_pairs
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.head.view import FINAL_STATES, HeadView
from gputui.ui.screens.queue import QueueScreen, what_text
from gputui.wire.words import told_text

LOG_TAIL_BYTES = 256 * 1024
"""Output shown when a job's log is opened: its last this many bytes."""
LOG_POLL_S = 0.5
LOG_CHUNK_BYTES = 65536
"""Output asked for at once while following a job."""
LOG_TIMEOUT_S = 10.0
JOB_ACTIONS = ("cancel", "kill", "preempt", "hold", "release_hold", "requeue")
"""What the queue screen asks of a job (each a capability of the same name)."""


def job_request(
    op: str, job_id: int, reason: str | None, force: bool, task: int | None = None
) -> Callable[[AsyncBackend], Awaitable[Answer]] | None:
    """The request of the queue screen's ``op`` on a job (None: no such action);
    ``task``: one task of array ``job_id`` (cancel only)."""
    if op not in JOB_ACTIONS:
        return None

    def request(backend: AsyncBackend) -> Awaitable[Answer]:
        if op == "requeue":
            return backend.requeue(job_id, reason=reason, force=force)
        if op == "cancel":
            return backend.cancel(job_id, reason=reason, task=task)
        act = {
            "cancel": backend.cancel,
            "kill": backend.kill,
            "preempt": backend.preempt,
            "hold": backend.hold,
            "release_hold": backend.release_hold,
        }[op]
        return act(job_id, reason=reason)

    return request


def logs_request(job_id: int, offset: int) -> Callable[[AsyncBackend], Awaitable[Answer]]:
    """The next part of a job's output, from ``offset``."""
    return lambda b: b.logs(job_id, offset=offset, max_bytes=LOG_CHUNK_BYTES, timeout=LOG_TIMEOUT_S)


Seen = tuple[int, str, str, int, tuple[int, float | None]]


def seen(screen: QueueScreen) -> Seen | None:
    """The selected job as the queue screen sees it now: (id, state, reason, a hash
    of every job that has not ended, with its state: the line it waits in, and its
    run: requeues and start, which change when it is requeued and starts again);
    None when nothing is selected."""
    job, view = screen.selected, screen.view
    if job is None or view is None:
        return None
    line = hash(tuple((j.id, j.state) for j in view.jobs if j.state not in FINAL_STATES))
    return job.id, job.state, job.reason, line, (job.requeues, job.started_at)


def attach_command(config: Config | None, job_id: int) -> list[str]:
    """``gputui attach JOB``, reaching the head as this console does: its socket here,
    else hosts.yaml's head (through SSH)."""
    argv = [sys.executable, "-m", "gputui.entry"]
    head = config.head if config is not None else None
    socket = Path(head.socket).expanduser() if head is not None else None
    if socket is not None and socket.exists():
        argv += ["--socket", str(socket)]
    elif config is not None and Path(config.source).is_file():
        argv += ["--hosts", config.source]
    return [*argv, "attach", str(job_id)]


class JobActions:
    """The open queue screen (if any) and every request made from it."""

    def __init__(
        self,
        app: App[None],
        asks: HeadRequests,
        clock: Callable[[], float],
        config: Config | None = None,
    ) -> None:
        self.app = app
        self.asks = asks
        self.clock = clock
        self.config = config
        self.screen: QueueScreen | None = None
        """The queue screen while it is open."""
        self._seen: Seen | None = None
        """The selected job as last seen (``seen``): when
        it moves, why it waits is asked again and a job back from the dead is followed."""

    def open_queue(self) -> None:
        link = self.asks.link
        if link is None:
            self.asks.refuse(_("open the queue"), _("no head configured (add a head: section)"))
            return
        if self.screen is not None:
            return
        screen = QueueScreen(link.view, clock=self.clock, lacks=lambda op: link.lacks((op,)))
        self.screen = screen

        def closed(_: None) -> None:
            self.screen = None
            self.app.workers.cancel_group(self.app, "job-log")

        self.app.push_screen(screen, closed)
        if not link.connected:
            screen.show_unreachable(link.reason or _("not connected"))

    def show_view(self, view: HeadView) -> None:
        screen = self.screen
        if screen is None:
            return
        screen.show_view(view)
        job, link = screen.selected, self.asks.link
        before, now = self._seen, seen(screen)
        self._seen = now
        if job is None or link is None or before is None or now is None or before[0] != job.id:
            return
        if before == now:
            return
        if before[4] != now[4] or (before[1] in FINAL_STATES and job.state not in FINAL_STATES):
            self.select(job.id)  # requeued, or started again: a new run, a new output
        elif job.pending:
            self.app.run_worker(
                self._explain(link, screen, job.id),
                name=f"job-explain-{job.id}",
                group="job-explain",
                description=f"why job {job.id} waits",
                exclusive=True,
                exit_on_error=False,
            )

    def show_unreachable(self, reason: str) -> None:
        if self.screen is not None:
            self.screen.show_unreachable(reason)

    def attach(self, job_id: int) -> None:
        """This terminal on the job's (``gputui attach``), the console suspended until
        the user detaches or the job ends."""
        from textual.app import SuspendNotSupported

        argv = attach_command(self.config, job_id)
        try:
            with self.app.suspend():
                done = subprocess.run(argv, check=False)
        except SuspendNotSupported:
            what = _("attach to job {job}").format(job=job_id)
            self.asks.refuse(what, _("this terminal cannot be handed over"))
            return
        except OSError as exc:
            what = _("attach to job {job}").format(job=job_id)
            self.asks.refuse(what, clean(exc.strerror or exc, 120))
            return
        if done.returncode == 0:  # detached (or the job ended well): it said which, there
            self.app.notify(_("back from job {job}'s terminal").format(job=job_id), markup=False)
        else:
            what = _("gputui attach {job} ended with status {status}").format(
                job=job_id, status=done.returncode
            )
            self.app.notify(what, severity="warning", markup=False)

    def act(self, message: QueueScreen.JobAction) -> None:
        target = message.job_id if message.task is None else f"{message.job_id}_{message.task}"
        what = what_text(message.op, target)
        request = job_request(
            message.op, message.job_id, message.reason, message.force, message.task
        )
        if request is None:
            self.asks.refuse(what, _("no such action on a job: {op}").format(op=message.op))
            return
        link = self.asks.usable(what, message.op)
        if link is not None:
            self.asks.request(what, self._act(link, what, message.op, message.job_id, request))

    async def _act(
        self,
        link: HeadLink,
        what: str,
        op: str,
        job_id: int,
        request: Callable[[AsyncBackend], Awaitable[Answer]],
    ) -> None:
        result = await self.asks.call(link, what, op, request)
        if result is None:
            return
        job = result.get("job") or {}
        told = told_text(result)
        state = state_text(clean(job.get("state") or "?", 16))
        line = _("job {job}: {state}").format(job=job_id, state=state)
        if told:
            line = _("job {id}: {state}: {told}").format(
                id=job_id, state=state, told=clean(told, 200)
            )
        self.app.notify(
            line,
            title=what,
            timeout=5,
            markup=False,
        )

    def select(self, job_id: int | None) -> None:
        """Follow job ``job_id`` (the queue screen's cursor is on it)."""
        screen = self.screen
        link = self.asks.link
        if screen is None or link is None or job_id is None:
            return
        self._seen = seen(screen)
        screen.reset_log(job_id)

        async def follow() -> None:
            await self._follow(link, screen, job_id)

        # A function, not a coroutine: it is made when the worker starts, so an
        # exclusive worker cancelled before it ran leaves no coroutine never awaited.
        _worker: Worker[None] = self.app.run_worker(
            follow,
            name=f"job-log-{job_id}",
            group="job-log",
            description=f"output of job {job_id}",
            exclusive=True,
            exit_on_error=False,
        )

    async def _explain(self, link: HeadLink, screen: QueueScreen, job_id: int) -> None:
        """Why a waiting job waits (``gputui explain``), under its detail; an older
        head without ``explain``, or an answer that does not parse, adds nothing."""
        try:
            body = await link.ask("explain", lambda b: b.explain(job_id))
            pairs = explain_pairs(body, time.time())
        except (HeadError, KeyError, TypeError, ValueError, AttributeError):
            return
        screen.show_explain(job_id, pairs)

    async def _follow(self, link: HeadLink, screen: QueueScreen, job_id: int) -> None:
        """The job's record, then its output: the last part at once, then as it grows.

        The next poll is asked for only after the last answer came, so polls never
        pile up; an answer that fails is said in the log's title and tried again.
        """
        try:
            detail = (await link.ask("show", lambda b: b.show(job_id)))["job"]
            screen.show_detail(job_id, detail)
        except (HeadError, KeyError, TypeError) as exc:
            detail = None
            screen.show_detail(job_id, None, getattr(exc, "message", _("no detail")))
        if isinstance(detail, dict) and detail.get("state") in ("queued", "held"):
            await self._explain(link, screen, job_id)
        offset = 0
        first = True
        while True:
            try:
                answer = await link.ask("logs", logs_request(job_id, offset))
            except HeadError as exc:
                screen.log_note(job_id, clean(exc.message, 120))
                if exc.code == "unsupported":
                    return  # asking again would only say it again
                await asyncio.sleep(2.0)
                continue
            size = answer.get("size")
            if first and isinstance(size, int) and size > LOG_TAIL_BYTES:
                offset = size - LOG_TAIL_BYTES
                note = _("… (the first {bytes} bytes are not shown)").format(bytes=offset)
                screen.reset_log(job_id, note)
                first = False
                continue
            first = False
            data = answer.get("data")
            next_offset = answer.get("offset")
            if isinstance(next_offset, int) and next_offset >= offset:
                offset = next_offset
            if isinstance(data, str) and data:
                screen.append_log(job_id, data)
                screen.log_note(job_id, "")
                continue
            if answer.get("state") in FINAL_STATES:
                ended = state_text(clean(answer.get("state"), 16))
                screen.log_note(job_id, _("ended ({state})").format(state=ended))
                return
            screen.log_note(job_id, _("following…"))
            await asyncio.sleep(LOG_POLL_S)
