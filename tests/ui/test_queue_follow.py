"""The queue screen's detail follows the selected job live, from the head's own pushes.

A real head (``headkit``) on a real socket and SQLite file; its hosts are scripted.
The detail pane once kept the state it had when the job was selected: ``running``
after the job ended, ``held`` after a release. Here each change is made at the head
(not through the screen), and the pane must say it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Log, Static
from ui_helpers import screen_text, told, until

from gputui.common.jobenv import JobSetup
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.queue import QueueScreen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_scheduler import LAYOUT, connected, console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head

SIZES = [(80, 24), (200, 50)]


def detail(app: GpuTuiApp) -> str:
    screen = app.screen
    assert isinstance(screen, QueueScreen)
    return str(screen.query_one("#job-detail", Static).content)


def state_line(app: GpuTuiApp) -> str:
    return next((line for line in detail(app).splitlines() if line.startswith("state")), "")


async def a_running_job(pilot: Pilot[Any], app: GpuTuiApp) -> QueueScreen:
    """One job submitted (``train``, a GPU), the queue screen open, the job running."""
    await connected(pilot, app)
    link = app.head.link
    assert link is not None
    await link.ask("submit", lambda b: b.submit(argv=["train"], gpus=1))
    await pilot.press("Q")
    await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
    await until(pilot, lambda: "running" in state_line(app), "the job running")
    queue = app.screen
    assert isinstance(queue, QueueScreen)
    return queue


@pytest.mark.parametrize("size", SIZES)
async def test_the_detail_follows_a_job_that_ends_at_the_head(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await a_running_job(pilot, app)
            # The record asked for on selection has come (its command is shown) ...
            await until(pilot, lambda: "train" in detail(app), "the job's record")
            # ... and the job ends at the host, not through this screen.
            launch = hosts.launches[0]
            hosts.finish(launch.host, launch.key, exit_code=3)
            await until(pilot, lambda: "failed" in state_line(app), "the detail to say failed")
            assert "exit 3" in state_line(app)


@pytest.mark.parametrize("size", SIZES)
async def test_the_detail_follows_a_hold_and_its_release(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            await link.ask("submit", lambda b: b.submit(argv=["big"], gpus=4))
            waiting = await link.ask("submit", lambda b: b.submit(argv=["next"], gpus=2))
            job_id = waiting["job"]["id"]
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            table = queue.query_one("#jobs", DataTable)
            await until(pilot, lambda: table.row_count == 2, "both jobs")
            table.move_cursor(row=1)  # the waiting one, below the running one
            await until(pilot, lambda: f"job       {job_id}  " in detail(app), "the waiting job")
            await until(pilot, lambda: "queued" in state_line(app), "queued")
            await until(pilot, lambda: "1 of 1" in detail(app), "why it waits")
            await link.ask("hold", lambda b: b.hold(job_id))
            await until(pilot, lambda: "held" in state_line(app), "the detail to say held")
            await link.ask("release", lambda b: b.release_hold(job_id))
            await until(pilot, lambda: "queued" in state_line(app), "the detail to say queued")
            # The job that ran ends: the waiting one starts, and its detail says so and
            # no longer says why it waits.
            await link.ask("cancel", lambda b: b.cancel(job_id - 1))
            await until(pilot, lambda: "running" in state_line(app), "the detail to say running")
            assert "1 of 1" not in detail(app)


@pytest.mark.parametrize("size", SIZES)
async def test_why_a_job_waits_follows_the_line(tmp_path: Path, size: tuple[int, int]) -> None:
    """Its place in line is asked again when the queue moves: second of two, then,
    the job ahead held, first of one."""
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            await link.ask("submit", lambda b: b.submit(argv=["big"], gpus=4))
            ahead = (await link.ask("submit", lambda b: b.submit(argv=["a"], gpus=2)))["job"]["id"]
            await link.ask("submit", lambda b: b.submit(argv=["b"], gpus=2))
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            table = queue.query_one("#jobs", DataTable)
            await until(pilot, lambda: table.row_count == 3, "the jobs")
            await pilot.press("end")  # the last row: the job last in line
            assert table.cursor_row == 2
            await until(pilot, lambda: "2 of 2" in detail(app), "second in line")
            await link.ask("hold", lambda b: b.hold(ahead))
            await until(pilot, lambda: "1 of 1" in detail(app), "first in line")
            # The row keys every table of the console answers to.
            await pilot.press("k")
            assert table.cursor_row == 1
            await pilot.press("home")
            assert table.cursor_row == 0
            await pilot.press("j", "j")
            assert table.cursor_row == 2


def output(app: GpuTuiApp) -> list[str]:
    screen = app.screen
    assert isinstance(screen, QueueScreen)
    return list(screen.query_one("#job-log", Log).lines)


@pytest.mark.parametrize("size", SIZES)
async def test_the_output_of_a_requeued_job_is_its_new_runs(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    # Seen in tmux: after P (preempt, requeued, started again at once) the pane kept
    # the first run's output and showed the new run's only once it had outgrown the
    # first one's (the offset into the old log was kept for the new one).
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            answer = await link.ask("submit", lambda b: b.submit(argv=["train"], gpus=1))
            job_id = answer["job"]["id"]
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            await until(pilot, lambda: bool(hosts.launches), "the job launched")
            first = hosts.launches[0]
            hosts.logs[first.key] = "".join(f"first run, step {i}\n" for i in range(40))
            await until(pilot, lambda: "first run, step 39" in output(app), "the first run")
            await link.ask("preempt", lambda b: b.preempt(job_id))
            await until(pilot, lambda: len(hosts.launches) == 2, "the job started again")
            hosts.logs[hosts.launches[1].key] = "second run, step 0\n"
            await until(pilot, lambda: "second run, step 0" in output(app), "the new run")
            assert not any("first run" in line for line in output(app))


@pytest.mark.parametrize("size", SIZES)
async def test_an_ended_job_is_said_to_have_ended_not_asked_about(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    # Seen in tmux: K on a completed job asked "Kill job 8 (root: train.py), completed
    # on gpu04? Its work so far is lost. y/N", and only the head's answer said no.
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await a_running_job(pilot, app)
            launch = hosts.launches[0]
            hosts.finish(launch.host, launch.key, exit_code=0)
            await until(pilot, lambda: "completed" in state_line(app), "the job completed")
            for key in ("K", "x", "P"):
                await pilot.press(key)
                await pilot.pause()
                assert isinstance(app.screen, QueueScreen), key
            said = [text for _, text in told(app) if "already ended" in text]
            assert said == ["job 1 already ended (completed); R requeues it"] * 3
            await pilot.press("R")  # a requeue of an ended job is still asked
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")


@pytest.mark.parametrize("size", SIZES)
async def test_the_detail_says_what_the_job_runs_in(tmp_path: Path, size: tuple[int, int]) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            setup = JobSetup(image="team/train:1.0", runtime="podman")
            await link.ask("submit", lambda b: b.submit(argv=["train"], gpus=1, setup=setup))
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            await until(pilot, lambda: "train" in detail(app), "the job's record")
            line = next(x for x in detail(app).splitlines() if x.startswith("runs in"))
            assert line.split(None, 2)[2] == "podman team/train:1.0"
            assert hosts.launches[0].image == "team/train:1.0"
            assert hosts.launches[0].runtime == "podman"


@pytest.mark.parametrize("size", SIZES)
async def test_a_cell_that_grows_in_place_widens_its_column(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """A running job's TIME grows in place (``0:03``, then days); the column grows with
    it rather than cutting it (the table sizes a column by the cells it was given, and
    a cell changed in place did not count)."""
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            queue = await a_running_job(pilot, app)
            table = queue.query_one("#jobs", DataTable)
            assert len(str(table.get_row_at(0)[6])) <= len("59:59")
            later = time.time() + 12 * 86400 + 3 * 3600
            queue.clock = lambda: later  # the same job, twelve days on: ``12-03:00:0x``
            await until(pilot, lambda: str(table.get_row_at(0)[6]).startswith("12-03:"), "days")
            await until(
                pilot,
                lambda: str(table.get_row_at(0)[6]) in screen_text(app),
                "the TIME whole on screen",
            )
