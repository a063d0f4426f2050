"""What a submitted job came to, said once it has settled.

The head answers a submit with the job as it was stored: ``queued``. Its scheduling
pass often starts it a moment later, so a notice made from the answer says
"queued: Resources" about a job that is already running. ``JobSettle`` waits for
the head's next states instead (each pushed state is handed to ``view_changed``)
until the job has left ``queued`` or ``SETTLE_S`` has passed, and the notice says
what the latest state shows: started where, ended how, or why it still waits.
"""

from __future__ import annotations

import asyncio
import contextlib

from gputui.common.tasks import within
from gputui.ui.head.view import FINAL_STATES, HeadJob, HeadView

SETTLE_S = 2.0
"""Longest wait for a submitted job to leave ``queued`` before saying it waits."""


class JobSettle:
    """Submitted jobs being waited on, by id."""

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future[HeadJob]] = {}

    def view_changed(self, view: HeadView) -> None:
        """A new state from the head: wake whoever waits on a job that moved on."""
        for job_id, done in list(self._waiting.items()):
            job = view.job(job_id)
            if job is not None and job.state != "queued" and not done.done():
                done.set_result(job)

    async def settled(
        self, job_id: int, view: HeadView | None, timeout: float = SETTLE_S
    ) -> HeadJob | None:
        """The job once it left ``queued`` (or as the newest state has it after
        ``timeout``); None if no state names it."""
        job = view.job(job_id) if view is not None else None
        if job is not None and job.state != "queued":
            return job
        done: asyncio.Future[HeadJob] = asyncio.get_running_loop().create_future()
        self._waiting[job_id] = done
        try:
            with contextlib.suppress(TimeoutError):
                return await within(done, timeout)
        finally:
            self._waiting.pop(job_id, None)
        return None


def settled_text(job: HeadJob, view: HeadView | None) -> str:
    """``started on gpu01: GPU 0, 1`` / ``ended (completed)`` / ``waits: Resources``."""
    if job.live:
        where = job.host or "?"
        if view is not None and job.gpu_uuids:
            index = {g.uuid: g.index for g in view.gpus}
            gpus = ", ".join(str(index[u]) for u in job.gpu_uuids if u in index)
            if gpus:
                where += f": GPU {gpus}"
        return f"started on {where}"
    if job.state in FINAL_STATES:
        return f"ended ({job.state})"
    return f"{'is held' if job.state == 'held' else 'waits'}: {job.reason or job.state}"
