"""The console's scheduler side, mixed into the app: the head link's worker, what its
messages change on screen, and every request to the head (claim, release, submit,
job actions, logs), each in an app-owned worker. The usage screen's requests are
in ``usage`` (a mixin this one builds on).

A request that cannot be made says why at once (no head configured, the head
unreachable and why); one the head refuses shows the head's own words; one whose
answer was lost with the connection says that it may or may not have been done.
Nothing is dropped without a word.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from textual.css.query import NoMatches

from gputui.config import Config
from gputui.explain_text import explain_pairs
from gputui.scheduler.client import HeadError
from gputui.text import clean
from gputui.ui.gpu_view import GpuRow, HostRow, Row
from gputui.ui.head.drains import DrainActions
from gputui.ui.head.flags import by_gpu
from gputui.ui.head.link import HeadLink, HeadNotice, HeadState, HeadUnreachable
from gputui.ui.head.view import FINAL_STATES, HeadView, env_line
from gputui.ui.model import ClusterModel
from gputui.ui.screens.audit import AuditScreen
from gputui.ui.screens.forms import ClaimScreen, FormScreen, SubmitScreen
from gputui.ui.screens.help import HelpSection, section
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.queue import QueueScreen
from gputui.ui.screens.usage import UsageScreen

LOG_TAIL_BYTES = 256 * 1024
"""Output shown when a job's log is opened: its last this many bytes."""
LOG_POLL_S = 0.5
NOTICE_TITLES = {
    "started": "job started",
    "ended": "job ended",
    "preempted": "job preempted",
    "ownership": "process flagged",
    "idle": "job idle",
}


class HeadActions(DrainActions):
    """The scheduler part of ``GpuTuiApp`` (a mixin: it needs the app's model and screens)."""

    config: Config
    model: ClusterModel
    clock: Callable[[], float]
    head_link: HeadLink | None = None
    submit_defaults: tuple[str | None, str] = (None, "")
    """(cwd, command) the enqueue form starts with (the demo sets its own job)."""
    _queue_screen: QueueScreen | None = None

    # -- start ---------------------------------------------------------------------

    def start_head(self) -> None:
        """With a ``head:`` section: connect in a worker, turn the scheduler keys on."""
        if self.config.head is None:
            return
        self.head_link = HeadLink(self.config, self.post_message)
        main = self._main()
        main.enable_scheduler()
        main.head_line = (f"connecting to {self.head_link.where()}…", False)
        self.run_worker(
            self.head_link.run(),
            name="head",
            group="head",
            description="the link to the scheduler's head",
            exclusive=True,
            exit_on_error=False,
        )

    def _main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    def head_help_sections(self) -> list[HelpSection]:
        title = "Scheduler" if self.head_link is not None else "Scheduler (needs a head: section)"
        _, rows = section(title, MainScreen.SCHEDULER_BINDINGS)
        _, queue = section("Queue screen (Q)", QueueScreen.BINDINGS)
        _, usage = section("Usage screen (U)", UsageScreen.BINDINGS)
        _, audit = section("Audit screen (A)", AuditScreen.BINDINGS)
        return [
            (title, rows),
            ("Queue screen (Q)", queue),
            ("Usage screen (U)", usage),
            ("Audit screen (A)", audit),
        ]

    # -- what the head says ----------------------------------------------------------

    def on_head_state(self, message: HeadState) -> None:
        if not self.screen_stack:
            return  # landed while the console shuts down: nothing left to show it on
        view = message.view
        main = self._main()
        rows = self.model.set_holders(view.holders())
        rows += self.model.set_owner_flags(by_gpu(view.flags))
        rows += self.model.set_head_states(
            {g.uuid: g.state for g in view.gpus if g.state in ("unhealthy", "drained")}
        )
        running, pending = view.counts()
        mine = sum(1 for c in view.claims if c.user == view.me.user and c.state == "active")
        line = f"{running} running, {pending} waiting"
        if mine:
            line += f", {mine} claim{'s' if mine != 1 else ''} of yours"
        main.head_line = (line, False)
        main.board_problems = view.board_problems
        self._show_summary(main)
        if rows:
            main.holders_changed(rows)
        if self._queue_screen is not None:
            self._queue_screen.show_view(view)

    def _show_summary(self, main: MainScreen) -> None:
        with contextlib.suppress(NoMatches):  # the app is closing: its widgets are gone
            main.refresh_summary()

    def on_head_unreachable(self, message: HeadUnreachable) -> None:
        if not self.screen_stack:
            return  # as in ``on_head_state``
        main = self._main()
        main.head_line = (f"head unreachable ({clean(message.reason, 80)})", True)
        main.board_problems = None  # the console's own count until the head is back
        self._show_summary(main)
        if self._queue_screen is not None:
            self._queue_screen.show_unreachable(message.reason)

    def on_head_notice(self, message: HeadNotice) -> None:
        severity = "information"
        if message.kind in ("preempted", "ownership", "idle") or (
            message.kind == "ended" and " completed " not in f" {message.text} "
        ):
            severity = "warning"
        self.notify(
            message.text,
            title=NOTICE_TITLES.get(message.kind, message.kind or "scheduler"),
            severity=severity,  # type: ignore[arg-type]
            timeout=10,
            markup=False,
        )

    # -- requests --------------------------------------------------------------------

    def on_main_screen_scheduler_key(self, message: MainScreen.SchedulerKey) -> None:
        action, row = message.action, message.row
        if action == "queue":
            self._open_queue()
            return
        if action == "usage":
            self.open_usage()
            return
        if action == "audit":
            self.open_audit()
            return
        if action == "submit":
            if self._link("submit a job") is not None:
                self.push_screen(SubmitScreen(*self.submit_defaults))
            return
        if action == "claim_n":
            if self._link("claim GPUs") is not None:
                self.push_screen(ClaimScreen(row.host if isinstance(row, GpuRow) else None))
            return
        handler = {
            "claim": self._claim_row,
            "release": self._release_row,
            "env": self._env_row,
            "drain": self.drain_row,
            "force_free": self.force_free_row,
        }
        handler[action](row)

    def _view(self) -> HeadView | None:
        return self.head_link.view if self.head_link is not None else None

    def _claim_row(self, row: Row | None) -> None:
        link = self._link("claim")
        view = self._view()
        if link is None or view is None:
            return
        if row is None:
            self._refuse("claim", "select a GPU (or a host) first")
            return
        known = {g.uuid for g in view.gpus}
        holders = self.model.holders
        if isinstance(row, GpuRow):
            gpu = self.model.gpu(row)
            if gpu is None or gpu.uuid not in known:
                self._refuse("claim", f"the head does not know {row.host} GPU {row.index}")
                return
            holder = holders.get(gpu.uuid)
            if holder is not None:
                whose = "yours" if holder.user == view.me.user else f"{holder.user}'s"
                self._refuse(
                    "claim",
                    f"{row.host} GPU {row.index} is held by {holder.ref} ({whose});"
                    " C claims any free GPUs",
                )
                return
            uuids = [gpu.uuid]
            what = f"{row.host} GPU {row.index}"
        else:
            entry = self.model.hosts.get(row.host)
            gpus = entry.gpus.values() if entry is not None else ()
            uuids = [g.uuid for g in gpus if g.uuid in known and g.uuid not in holders]
            if not uuids:
                self._refuse("claim", f"no free GPU on {row.host}")
                return
            what = f"{len(uuids)} GPU(s) on {row.host}"
        args = {"gpu_refs": uuids, "wait": False, "note": ""}
        self._request(f"claim {what}", self._claim(link, what, args))

    async def _claim(self, link: HeadLink, what: str, args: dict[str, Any]) -> None:
        result = await self._call(link, f"claim {what}", "claim", args)
        if result is not None:
            await self._claim_answer(link, what, result.get("claim") or {})

    async def _env_text(self, link: HeadLink, host: str, fallback: list[Any]) -> str:
        """What ``gputui env --host HOST`` prints (every claim of yours there)."""
        try:
            result = await link.call("env", {"host": host} if host else {})
        except HeadError:
            result = {}
        line = env_line(result.get("uuids"))
        return line if line else env_line(fallback)

    def _release_row(self, row: Row | None) -> None:
        link = self._link("release")
        view = self._view()
        if link is None or view is None:
            return
        if row is None:
            self._refuse("release", "select a GPU (or a host) first")
            return
        me = view.me.user
        if isinstance(row, HostRow):
            ids = [c.id for c in view.claims if c.user == me and c.host == row.host]
            what = f"your claims on {row.host}"
            if not ids:
                self._refuse("release", f"no claim of yours on {row.host}")
                return
        else:
            gpu = self.model.gpu(row)
            holder = self.model.holders.get(gpu.uuid) if gpu is not None else None
            where = f"{row.host} GPU {row.index}"
            if holder is None:
                self._refuse("release", f"nobody holds {where}")
                return
            if holder.kind == "job":
                self._refuse(
                    "release",
                    f"{where} is held by job {holder.id}: cancel it on the queue screen (Q)",
                )
                return
            if holder.user != me and not view.me.admin:
                self._refuse("release", f"claim {holder.id} on {where} belongs to {holder.user}")
                return
            ids = [holder.id]
            what = f"claim {holder.id} ({where})"
        self._request(f"release {what}", self._release(link, what, ids))

    async def _release(self, link: HeadLink, what: str, ids: list[int]) -> None:
        result = await self._call(link, f"release {what}", "release", {"claim_ids": ids})
        if result is None:
            return
        released = result.get("released") or []
        count = sum(len(c.get("gpu_uuids") or []) for c in released if isinstance(c, dict))
        self.notify(
            f"released {what}: {count} GPU(s) free again",
            title="released",
            timeout=5,
            markup=False,
        )

    def _env_row(self, row: Row | None) -> None:
        link = self._link("show the env line")
        if link is None:
            return
        host = row.host if row is not None else ""
        self._request("env line", self._env(link, host))

    async def _env(self, link: HeadLink, host: str) -> None:
        result = await self._call(link, "show the env line", "env", {"host": host} if host else {})
        if result is None:
            return
        line = env_line(result.get("uuids"))
        if not line:
            self._refuse("show the env line", f"no active claim of yours on {host or 'any host'}")
            return
        self.copy_to_clipboard(line)
        self.notify(
            f"Copied to the clipboard:\n{line}", title=f"env on {host}", timeout=15, markup=False
        )

    # -- forms -------------------------------------------------------------------------

    def on_form_screen_requested(self, message: FormScreen.Requested) -> None:
        link = self._link(message.op)
        if link is None:
            message.form.failed(f"head unreachable ({self.head_link and self.head_link.reason})")
            return
        self._request(message.op, self._send_form(link, message))

    async def _send_form(self, link: HeadLink, message: FormScreen.Requested) -> None:
        form, op = message.form, message.op
        try:
            result = await link.call(op, message.args)
        except HeadError as exc:
            form.failed(exc.message)
            self._refuse(op, exc.message)
            return
        form.done()
        if op == "claim":
            claim = result.get("claim") or {}
            what = f"{len(claim.get('gpu_uuids') or []) or message.args.get('gpus', 1)} GPU(s)"
            await self._claim_answer(link, what, claim)
            return
        job = result.get("job") or {}
        reason = clean(job.get("reason") or "", 80)
        self.notify(
            f"job {job.get('id')} ({clean(job.get('name') or '', 60)}) {job.get('state')}"
            + (f": {reason}" if reason else "")
            + "; Q shows the queue",
            title="submitted",
            timeout=8,
            markup=False,
        )

    async def _claim_answer(self, link: HeadLink, what: str, claim: dict[str, Any]) -> None:
        if claim.get("state") == "active":
            host = clean(claim.get("host") or "", 64)
            env = await self._env_text(link, host, claim.get("gpu_uuids") or [])
            if env:
                self.copy_to_clipboard(env)
            copied = f"Copied to the clipboard:\n{env}" if env else "No valid GPU UUIDs to copy."
            self.notify(
                f"claim {claim.get('id')} granted: {what}. {copied}",
                title=f"claimed on {host}",
                timeout=20,
                markup=False,
            )
        else:
            self.notify(
                f"claim {claim.get('id')} waits in line ({clean(claim.get('reason') or '', 80)})",
                title="claim queued",
                timeout=8,
                markup=False,
            )

    # -- the queue screen -------------------------------------------------------------

    def _open_queue(self) -> None:
        if self.head_link is None:
            self._refuse("open the queue", "no head configured (add a head: section)")
            return
        if self._queue_screen is not None:
            return
        screen = QueueScreen(self.head_link.view, clock=self.clock)
        self._queue_screen = screen

        def closed(_: None) -> None:
            self._queue_screen = None
            self.workers.cancel_group(self, "job-log")

        self.push_screen(screen, closed)
        if not self.head_link.connected:
            screen.show_unreachable(self.head_link.reason or "not connected")

    def on_queue_screen_submit_wanted(self, message: QueueScreen.SubmitWanted) -> None:
        if self._link("submit a job") is not None:
            self.push_screen(SubmitScreen(*self.submit_defaults))

    def on_queue_screen_job_action(self, message: QueueScreen.JobAction) -> None:
        what = f"{message.op.replace('_', '-')} job {message.job_id}"
        link = self._link(what)
        if link is not None:
            args: dict[str, Any] = {"job_id": message.job_id}
            if message.reason:
                args["reason"] = message.reason
            if message.force:
                args["force"] = True
            self._request(what, self._job_action(link, what, message.op, args))

    async def _job_action(self, link: HeadLink, what: str, op: str, args: dict[str, Any]) -> None:
        job_id = args["job_id"]
        result = await self._call(link, what, op, args)
        if result is None:
            return
        job = result.get("job") or {}
        told = result.get("told")
        self.notify(
            f"job {job_id}: {clean(job.get('state') or '?', 16)}"
            + (f": {clean(told, 200)}" if isinstance(told, str) and told else ""),
            title=what,
            timeout=5,
            markup=False,
        )

    def on_queue_screen_job_selected(self, message: QueueScreen.JobSelected) -> None:
        screen = self._queue_screen
        link = self.head_link
        if screen is None or link is None or message.job_id is None:
            return
        job_id = message.job_id
        screen.reset_log(job_id)
        self.run_worker(
            self._follow_job(link, screen, job_id),
            name=f"job-log-{job_id}",
            group="job-log",
            description=f"output of job {job_id}",
            exclusive=True,
            exit_on_error=False,
        )

    async def _explain_job(self, link: HeadLink, screen: QueueScreen, job_id: int) -> None:
        """Why a waiting job waits (``gputui explain``), under its detail; an older
        head without ``explain``, or an answer that does not parse, adds nothing."""
        try:
            body = await link.call("explain", {"job_id": job_id})
            pairs = explain_pairs(body, time.time())
        except (HeadError, KeyError, TypeError, ValueError, AttributeError):
            return
        screen.show_explain(job_id, pairs)

    async def _follow_job(self, link: HeadLink, screen: QueueScreen, job_id: int) -> None:
        """The job's record, then its output: the last part at once, then as it grows.

        The next poll is asked for only after the last answer came, so polls never
        pile up; an answer that fails is said in the log's title and tried again.
        """
        try:
            detail = (await link.call("show", {"job_id": job_id}))["job"]
            screen.show_detail(job_id, detail)
        except (HeadError, KeyError, TypeError) as exc:
            detail = None
            screen.show_detail(job_id, None, getattr(exc, "message", "no detail"))
        if isinstance(detail, dict) and detail.get("state") in ("queued", "held"):
            await self._explain_job(link, screen, job_id)
        offset = 0
        first = True
        while True:
            try:
                answer = await link.call(
                    "logs", {"job_id": job_id, "offset": offset, "max_bytes": 65536}, timeout=10
                )
            except HeadError as exc:
                screen.log_note(job_id, clean(exc.message, 120))
                await asyncio.sleep(2.0)
                continue
            size = answer.get("size")
            if first and isinstance(size, int) and size > LOG_TAIL_BYTES:
                offset = size - LOG_TAIL_BYTES
                screen.reset_log(job_id, f"… (the first {offset} bytes are not shown)")
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
                screen.log_note(job_id, f"ended ({clean(answer.get('state'), 16)})")
                return
            screen.log_note(job_id, "following…")
            await asyncio.sleep(LOG_POLL_S)
