"""The console with a real head: claim with a key, submit from the form, a head that is down.

The head is the real daemon on a real Unix socket and SQLite file; only its GPU
hosts are scripted (``headkit.ScriptedHosts``), and the console's own telemetry is
a fixed picture of the same GPUs (same UUIDs), so what the grid shows comes from
the head's pushes alone.
"""

from __future__ import annotations

import grp
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from textual.message import Message
from textual.widgets import DataTable, Input, Log
from ui_fakes import decode
from ui_helpers import grid_line, screen_text, shows, until

from gputui.config.models import Config, HeadConfig
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.backend import AsyncBackend
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.head_backend import console_backend
from gputui.scheduler.store.tables import Job
from gputui.telemetry import HostSnapshot, HostStatus, Listener
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.head.link import HeadState, HeadUnreachable, LinkSession
from gputui.ui.screens.confirm import ConfirmScreen, ReasonScreen
from gputui.ui.screens.forms import ClaimScreen, SubmitScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.queue import QueueScreen
from gputui.ui.widgets.summary import SummaryBar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import SettableClock, running_head

from gputui.scheduler.head import standings

LAYOUT = {"gpu01": 4}


def uuid(host: str, index: int) -> str:
    return f"GPU-{host}-{index:04d}"  # what ScriptedHosts calls its GPUs


def snapshot(host: str, count: int, now: float) -> HostSnapshot:
    gpus = [
        {"index": i, "uuid": uuid(host, i), "name": "NVIDIA A100", "memory_total_mib": 81920}
        for i in range(count)
    ]
    hello = decode(
        {"type": "hello", "protocol": 1, "helper_version": "t", "hostname": host, "gpus": gpus}
    )
    sample = decode(
        {
            "type": "sample",
            "seq": 1,
            "time": now,
            "gpus": [{"index": i, "uuid": uuid(host, i), "util_gpu": 0} for i in range(count)],
        }
    )
    return HostSnapshot(
        name=host,
        address=host,
        status=HostStatus.LIVE,
        pool="a100",
        hello=hello,
        sample=sample,
        received_at=now,
    )


class StaticSource:
    """The console's telemetry: one fixed snapshot per host."""

    def __init__(self, snapshots: list[HostSnapshot]) -> None:
        self._snapshots = {s.name: s for s in snapshots}

    def snapshots(self) -> Mapping[str, HostSnapshot]:
        return dict(self._snapshots)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return lambda: None

    async def start(self) -> None:
        return None

    def retry_now(self, host: str | None = None) -> None:
        return None

    async def close(self) -> None:
        return None


def console(sock: Path) -> GpuTuiApp:
    now = time.time()
    source = StaticSource([snapshot(h, n, now) for h, n in LAYOUT.items()])
    config = Config(head=HeadConfig(socket=str(sock)))
    return GpuTuiApp(source, config)


def notes(app: GpuTuiApp) -> list[str]:
    """The text of every notice so far (the history ``N`` shows), oldest first."""
    return ["\n".join(n.lines) for n in app.notices]


def summary(app: GpuTuiApp) -> str:
    return app.main.query_one(SummaryBar).render().plain


async def connected(pilot: Any, app: GpuTuiApp) -> None:
    await until(
        pilot,
        lambda: app.head.link is not None and app.head.link.view is not None,
        "the first state from the head",
    )
    # The summary bar follows by a message of its own: wait for it too.
    await until(pilot, lambda: "head connecting" not in summary(app), "the summary bar")


async def test_claim_a_gpu_with_the_key_and_see_it_held(tmp_path: Path) -> None:
    messages: list[Message] = []
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=(160, 40), message_hook=messages.append) as pilot:
            await connected(pilot, app)
            assert "HELD" in screen_text(app)
            assert "0 running, 0 waiting" in summary(app)
            assert app.main.grid.select(GpuRow("gpu01", 1))
            await pilot.press("c")
            me = app.head.link.view.me.user if app.head.link and app.head.link.view else "?"
            await until(
                pilot,
                lambda: uuid("gpu01", 1) in app.model.holders,
                "the head to say the GPU is claimed",
            )
            line = grid_line(app, "gpu01:1")
            assert f"c1 {me} <1m idle" in line, line
            assert "c1" not in grid_line(app, "gpu01:0")
            assert f"claim 1 {me} <1m idle" in screen_text(app)  # the detail pane
            await until(pilot, lambda: any("export" in n for n in notes(app)), "the env line")
            assert any(f"export CUDA_VISIBLE_DEVICES={uuid('gpu01', 1)}" in n for n in notes(app))
            assert "1 claim of yours" in summary(app)
            assert any(isinstance(m, MainScreen.SchedulerKey) for m in messages)
            assert any(isinstance(m, HeadState) for m in messages)

            # Claiming it again is refused here, saying who holds it.
            await pilot.press("c")
            await until(pilot, lambda: any("held by claim 1" in n for n in notes(app)), "why")

            await pilot.press("u")
            await until(pilot, lambda: uuid("gpu01", 1) not in app.model.holders, "the release")
            assert "c1" not in grid_line(app, "gpu01:1")

            # A host line asks how many (the claim form, 1 by default), as C does; more
            # than one GPU is shown before it is taken.
            assert app.main.grid.select(HostRow("gpu01"))
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            assert app.screen.query_one("#f-gpus", Input).value == "1"
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "the form closed")
            assert not app.model.holders
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            app.screen.query_one("#f-gpus", Input).value = "2"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "which GPUs")
            await pilot.press("y")
            await until(pilot, lambda: len(app.model.holders) == 2, "two GPUs claimed")
            assert isinstance(app.screen, MainScreen)


async def test_submit_from_the_form_and_see_it_in_the_queue(tmp_path: Path) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=(140, 40)) as pilot:
            await connected(pilot, app)
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            app.notify("an old toast")
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, SubmitScreen), "the enqueue form")
            # A notice never lands on a form: it waits in the history (N) instead.
            assert "an old toast" not in screen_text(app)
            form = app.screen
            form.query_one("#f-command", Input).value = "python train.py --epochs 3"
            form.query_one("#f-gpus", Input).value = "2"
            form.query_one("#f-name", Input).value = "train"
            form.query_one("#f-time", Input).value = "2h"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the form to close")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            table = queue.query_one("#jobs", DataTable)

            def row() -> list[str]:
                return [str(c) for c in table.get_row("1")] if table.row_count else []

            await until(pilot, lambda: row()[3:4] == ["running"], "job 1 running in the table")
            assert row()[1:6] == [app.head.link.view.me.user, "train", "running", "2", "gpu01"]  # type: ignore[union-attr]
            assert hosts.launches[0].argv == ("python", "train.py", "--epochs", "3") or list(
                hosts.launches[0].argv
            ) == ["python", "train.py", "--epochs", "3"]
            text = screen_text(app)
            assert "JOBID" in text and "REASON" in text
            await until(
                pilot,
                lambda: "hello from the job" in "\n".join(queue.query_one("#job-log", Log).lines),
                "the job's output in the log pane",
            )
            assert "python train.py --epochs 3" in screen_text(app)  # the detail

            # Kill asks first; No sends nothing, Yes kills.
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("n")
            await pilot.pause()
            assert hosts.signals == []
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await until(pilot, lambda: hosts.signals != [], "the kill to reach the host")
            await until(pilot, lambda: row()[3:4] == ["killed"], "job 1 killed")

            # The head's refusal is shown in its own words.
            await pilot.press("h")
            await until(
                pilot,
                lambda: any("only a queued job is held" in n for n in notes(app)),
                "why",
                timeout=30,
            )

            # A requeue of a job that ended asks first, saying whose command runs again.
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            me = app.head.link.view.me.user  # type: ignore[union-attr]
            assert f"It runs {me}'s command again, as {me}." in app.screen.question.plain  # type: ignore[attr-defined]
            await pilot.press("y")
            await until(pilot, lambda: len(hosts.launches) == 2, "the job to run again")


async def test_an_admin_gives_a_reason_to_act_on_another_users_job(tmp_path: Path) -> None:
    # This console's user (the test's) is an admin: the admin group is its own group.
    group = grp.getgrgid(os.getgid()).gr_name
    async with running_head(tmp_path, {"gpu01": 0}, admin_group=group) as (head, _hosts, sock):
        with head.store.transaction() as tx:
            other = Job(
                uid=54321, user="someone", group="someone", name="sweep", argv='["sweep"]',
                cwd="/", env="{}", gpus=1, priority="normal", submitted_at=time.time(),
                state="queued", reason="Resources",
            )  # fmt: skip
            tx.s.add(other)
            tx.flush()
            job_id = other.id
        app = console(sock)
        async with app.run_test(size=(140, 40)) as pilot:
            await connected(pilot, app)
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            await until(pilot, lambda: queue.selected is not None, "the other user's job")
            await pilot.press("h")
            await until(pilot, lambda: isinstance(app.screen, ReasonScreen), "the reason dialog")
            await shows(pilot, app, "someone's job: say why")
            await pilot.press("enter")  # no reason: refused here, nothing sent
            await until(pilot, lambda: "A reason is required" in screen_text(app), "the refusal")
            assert isinstance(app.screen, ReasonScreen)
            await pilot.press(*"node reboot", "enter")
            await until(pilot, lambda: app.screen is queue, "the dialog to close")

            def stored() -> tuple[str, list[tuple[str, str]], list[tuple[int, str]]]:
                with head.store.snapshot() as tx:
                    job = tx.job(job_id)
                    audit = tx.s.exec(text("SELECT action, reason FROM audit")).all()
                    notes_ = tx.s.exec(text("SELECT uid, text FROM notice")).all()
                    return (job.state if job else "?", list(audit), list(notes_))

            await until(pilot, lambda: stored()[0] == "held", "the job held")
            _, audit, told = stored()
            assert audit == [("hold", "node reboot")]
            assert told and told[-1][0] == 54321 and told[-1][1].endswith(": node reboot")
            # Escape sends nothing.
            await pilot.press("H")
            await until(pilot, lambda: isinstance(app.screen, ReasonScreen), "the reason dialog")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is queue, "the dialog to close")
            assert stored()[0] == "held"


async def test_a_form_the_head_refuses_stays_open_with_the_reason(tmp_path: Path) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=(140, 40)) as pilot:
            await connected(pilot, app)
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, SubmitScreen), "the enqueue form")
            form = app.screen
            assert isinstance(form, SubmitScreen)
            form.query_one("#f-command", Input).value = "sleep 1"
            form.query_one("#f-pool", Input).value = "nosuchpool"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "no pool named" in screen_text(app), "the head's reason")
            assert app.screen is form and not form.sending
            form.query_one("#f-time", Input).value = "soon"
            form.query_one("#f-pool", Input).value = ""
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "not a duration" in screen_text(app), "the form's check")


@pytest.mark.parametrize("press", ["c", "u", "Q"])
async def test_a_head_that_is_down_is_said_and_keys_say_why(tmp_path: Path, press: str) -> None:
    messages: list[Message] = []
    app = console(tmp_path / "no-head.sock")
    # An 80-column pane, as tmux gives by default: the whole reason is on screen.
    async with app.run_test(size=(80, 30), message_hook=messages.append) as pilot:
        await until(pilot, lambda: "head unreachable (" in summary(app), "the summary to say so")
        assert any(isinstance(m, HeadUnreachable) for m in messages)
        top = screen_text(app).splitlines()[0]
        assert top.startswith(" gputui  !! head unreachable (no socket there; is"), top
        assert top.rstrip().endswith("…"), top  # the rest is cut at the edge, not wrapped
        # The footer: the scheduler's keys come first, so a narrow pane keeps them.
        shown = [a.binding.key for a in app.screen.active_bindings.values() if a.binding.show]
        assert shown.index("Q") < shown.index("T") and shown.index("n") < shown.index("K")
        assert {"c", "C", "u", "Q", "n"} <= set(shown), shown
        assert app.main.grid.select(GpuRow("gpu01", 0))
        assert "gpu01" in screen_text(app)  # monitoring goes on
        await pilot.press(press)
        if press == "Q":
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            await until(pilot, lambda: "head unreachable" in screen_text(app), "its banner")
            return
        await until(pilot, lambda: notes(app), "a notification")
        assert "head unreachable (" in notes(app)[-1]
        assert "no socket there" in notes(app)[-1]


async def test_without_a_head_the_keys_are_not_offered() -> None:
    now = time.time()
    app = GpuTuiApp(StaticSource([snapshot("gpu01", 2, now)]), Config())
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "HELD" not in text and "Claim" not in text and "head" not in summary(app)
        await pilot.press("c", "Q")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen) and not notes(app)


async def test_a_waiting_jobs_detail_says_why_it_waits(tmp_path: Path) -> None:
    """The queue screen's detail of a queued job carries ``explain``: its place in
    line, the reason in words, its class and fair share, and a start estimate."""
    clock = SettableClock()
    async with running_head(tmp_path, LAYOUT, clock=clock) as (head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=(140, 50)) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            await link.ask("submit", lambda b: b.submit(argv=["big"], gpus=4, time_limit_s=3600))
            waiting = await link.ask("submit", lambda b: b.submit(argv=["next"], gpus=2))
            await link.ask("submit", lambda b: b.submit(argv=["nolimit"], gpus=3, preemptible=True))
            job_id = waiting["job"]["id"]
            # The figures are the scheduler's, worked out again each minute: one passes.
            clock.advance(standings.REFRESH_S)
            await until(
                pilot,
                lambda: head.batch.standings.current.factor("root") < 1.0,
                "the scheduler's next figures",
            )
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            table = queue.query_one("#jobs", DataTable)
            await until(pilot, lambda: table.row_count == 3, "the jobs listed")
            row = [str(k.value) for k in table.rows].index(str(job_id + 1))
            table.move_cursor(row=row)
            await until(
                pilot,
                lambda: "2 of 2: " in (t := screen_text(app)) and "starts    " in t,
                "why the last waits, and when it starts",
            )
            row = [str(k.value) for k in table.rows].index(str(job_id))
            table.move_cursor(row=row)
            # The whole detail, not its first frame: the pane grows to the new lines
            # at the next layout, so a frame between may show only the first of them.
            await until(
                pilot,
                lambda: "1 of 2: Resources" in (t := screen_text(app)) and "class     " in t,
                "why it waits",
            )
            text = screen_text(app)
            assert "why       no host has enough free GPUs" in text
            assert "class     normal (2 of 4)" in text
            assert "share     0.500 (root: " in text  # all the use so far is its group's
            assert re.search(r"starts    \w{3} \d\d:\d\d \(in (59|1:00):\d\d\) on gpu01", text)


async def test_a_console_is_told_on_connecting_what_happened_while_it_was_closed(
    tmp_path: Path,
) -> None:
    """A notice written while no console was open is shown by the next one, once."""
    from gputui.scheduler.store.tables import Notice

    text_ = "job 7 (train) is being preempted: preempted for job 8 (urgent, root)"
    async with running_head(tmp_path, LAYOUT) as (head, _hosts, sock):

        def write(tx: Any, ctx: Any) -> None:
            tx.notice(Notice(uid=os.getuid(), time=ctx.now, kind="preempted", text=text_))

        await head.call_tx(write)
        app = console(sock)
        async with app.run_test(size=(160, 40)) as pilot:
            await connected(pilot, app)
            await until(pilot, lambda: text_ in notes(app), "the notice kept for us")
        again = console(sock)
        async with again.run_test(size=(160, 40)) as pilot:
            await connected(pilot, again)
            await pilot.pause()
            assert text_ not in notes(again)


class Lacking:
    """The head's backend over the console's connection, less ``lacks``; each request
    asked of it is kept in ``asked``."""

    def __init__(self, inner: AsyncBackend, lacks: set[str]) -> None:
        self.inner = inner
        self.lacks = lacks
        self.asked: list[str] = []

    @property
    def name(self) -> str:
        return "test"

    def supports(self, capability: str) -> bool:
        return capability not in self.lacks and self.inner.supports(capability)

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        return getattr(self.inner, name)


async def test_what_the_scheduler_lacks_is_said_in_one_line_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    """A scheduler without preempt and drain: ``P`` on the queue screen and ``D`` on
    the main screen say so in one line, before any question, and send nothing; what
    it has (kill) still goes through."""
    async with running_head(tmp_path, LAYOUT) as (head, hosts, sock):
        app = console(sock)
        backends: list[Lacking] = []

        async def opener() -> LinkSession:
            client = await AsyncHeadClient.open_local(sock)
            backend = Lacking(console_backend(client, local=True), {"preempt", "drain"})
            backends.append(backend)
            return LinkSession(client, local=True, backend=backend)  # type: ignore[arg-type]

        app.head.opener = opener
        async with app.run_test(size=(140, 40)) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None and len(backends) == 1
            scheduler = backends[0]
            job = await link.ask("submit", lambda b: b.submit(argv=["train"], preemptible=True))
            job_id = job["job"]["id"]
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            await until(
                pilot,
                lambda: queue.selected is not None and queue.selected.state == "running",
                "the job running",
            )
            await until(pilot, lambda: any("started" in n for n in notes(app)), "its notice")
            seen = len(notes(app))
            await pilot.press("P")
            await until(pilot, lambda: len(notes(app)) > seen, "a notification")
            assert notes(app)[seen:] == ["the test scheduler cannot preempt a job"]
            await pilot.pause()
            assert app.screen is queue  # no question asked first
            with pytest.raises(HeadError) as refused:
                await link.ask("preempt", lambda b: b.preempt(job_id))
            assert refused.value.message == "the test scheduler cannot preempt a job"

            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
            assert app.main.grid.select(GpuRow("gpu01", 0))
            await pilot.press("D")
            await until(pilot, lambda: len(notes(app)) == seen + 2, "a second notification")
            assert notes(app)[-1] == "the test scheduler cannot drain"
            await pilot.pause()
            assert isinstance(app.screen, MainScreen)  # no reason asked for
            assert "preempt" not in scheduler.asked and "drain" not in scheduler.asked
            assert hosts.signals == []
            with head.store.snapshot() as tx:
                assert [g.uuid for g in tx.gpus() if g.drained_at is not None] == []
                assert tx.job(job_id).state == "running"  # type: ignore[union-attr]

            # The control: what the scheduler has goes through the same stand-in.
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await pilot.press("y")
            await until(pilot, lambda: hosts.signals != [], "the kill to reach the host")
            assert "kill" in scheduler.asked


def test_news_for_a_queue_screen_whose_widgets_are_gone_is_dropped_not_raised() -> None:
    """The head's news (a new run's output, its detail, why it waits) can reach the
    queue screen while it closes, or the app does, after its widgets went: each
    such call is a no-op then (seen once as NoMatches ending a console's test)."""
    screen = QueueScreen(None)  # never mounted: no widgets, as after it was removed
    screen.reset_log(7, "note")
    screen.append_log(7, "a line\n")
    screen.log_note(7, "following")
    screen._selected = 7
    screen.show_detail(7, {"argv": ["train"]})
    screen.show_explain(7, [("place", "1 of 2: Resources")])


async def test_a_attaches_to_a_running_interactive_job_and_says_why_not_to_others(
    tmp_path: Path,
) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        client = await AsyncHeadClient.open_local(sock)
        shell = await client.call("submit", {"argv": ["bash"], "cwd": "/", "pty": True})
        plain = await client.call("submit", {"argv": ["python", "train.py"], "cwd": "/"})
        await client.close()
        app = console(sock)
        messages: list[Message] = []
        async with app.run_test(size=(140, 40), message_hook=messages.append) as pilot:
            await connected(pilot, app)
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            await until(
                pilot,
                lambda: (
                    queue.selected is not None
                    and queue.selected.id == shell["job"]["id"]
                    and queue.selected.state == "running"
                ),
                "the interactive job running and selected",
            )
            await pilot.press("a")
            await until(pilot, lambda: any("handed over" in n for n in notes(app)), "the refusal")
            # The app asked to attach to that job; a headless test terminal cannot be
            # handed over, which is said in one line.
            assert [m.job_id for m in attach_asked(messages)] == [shell["job"]["id"]]
            await pilot.press("down")
            await until(
                pilot,
                lambda: queue.selected is not None and queue.selected.id == plain["job"]["id"],
                "the plain job selected",
            )
            await pilot.press("a")
            await until(pilot, lambda: any("has no terminal" in n for n in notes(app)), "why not")
            assert len(attach_asked(messages)) == 1


def attach_asked(messages: list[Message]) -> list[QueueScreen.AttachWanted]:
    """Each ``AttachWanted`` once (the hook sees it at the screen and at the app)."""
    found = {id(m): m for m in messages if isinstance(m, QueueScreen.AttachWanted)}
    return list(found.values())
