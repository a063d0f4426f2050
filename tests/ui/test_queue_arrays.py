"""Arrays in the console, with a real head (its hosts scripted): the enqueue form's
script and array fields, the queue's folded line for an array's waiting tasks, ``e``
to expand and fold it again, and ``x`` on the folded line cancelling the array
(at 80x24 and 200x50)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_scheduler import connected, console
from textual.widgets import DataTable, Input
from ui_helpers import screen_text, until

from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.forms import SubmitScreen
from gputui.ui.screens.queue import QueueScreen

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head

SCRIPT = (
    "#!/bin/sh\n#SBATCH --job-name=sweep\n#GPUTUI -g 1 --array 0-9%1\necho $SLURM_ARRAY_TASK_ID\n"
)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_an_array_from_the_form_folds_expands_and_cancels(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    path = tmp_path / "sweep.sh"
    path.write_text(SCRIPT)
    async with running_head(tmp_path, {"gpu01": 4}) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, SubmitScreen), "the enqueue form")
            form = app.screen
            form.query_one("#f-command", Input).value = "--lr 3e-4"  # the script's arguments
            form.query_one("#f-script", Input).value = str(path)
            form.query_one("#f-array", Input).value = "0-99:10%2"  # the form's wins
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the form to close")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            table = queue.query_one("#jobs", DataTable)

            def ids() -> list[str]:
                return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]

            folded = ["1_0", "1_10", "1_[20,30,40,50,60,70,80,90]"]
            await until(pilot, lambda: ids() == folded, "two run, eight fold")
            assert len(hosts.launches) == 2
            launch = hosts.launches[0]
            assert launch.script == SCRIPT and list(launch.argv) == ["sweep.sh", "--lr", "3e-4"]
            assert launch.env["SLURM_ARRAY_TASK_ID"] == "0"
            assert "JobArrayTaskLimit" in screen_text(app) or size[0] < 100

            table.move_cursor(row=2)
            await pilot.press("e")
            want = ["1_0", "1_10", *(f"1_{t}" for t in range(20, 100, 10))]
            await until(pilot, lambda: ids() == want, "the array's tasks one a row")
            await pilot.press("e")
            await until(pilot, lambda: ids() == folded, "folded again")

            table.move_cursor(row=2)
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            question = app.screen.question.plain  # type: ignore[attr-defined]
            assert question.startswith("Cancel array 1 (") and "8 waiting here" in question
            await pilot.press("y")
            await until(pilot, lambda: len(hosts.signals) == 2, "both running tasks stopped")
            await until(
                pilot,
                lambda: all(
                    str(table.get_row_at(i)[3]) in ("cancelled", "killing")
                    for i in range(table.row_count)
                ),
                "every task cancelled or being stopped",
            )
