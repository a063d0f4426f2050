"""The command palette and the ``:`` line, driven with keys at 80x24 and 200x50.

Without a head (a fixed picture of the cluster) for the palette, sorting, completion,
history and an unknown command; with a real head (``headkit``) for ``:claim``, the
views replacing each other, and ``:q``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.command import CommandList, CommandPalette
from textual.widgets import Input
from ui_fakes import FakeSource, fixed_clock
from ui_helpers import burst, told, until

from gputui.config.models import Config
from gputui.ui.app import GpuTuiApp
from gputui.ui.model import SORT_KEYS
from gputui.ui.screens.command_line import CommandLine
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.queue import QueueScreen
from gputui.ui.screens.usage import UsageScreen

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_scheduler import LAYOUT, connected, console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head

SIZES = [(80, 24), (200, 50)]
UTIL = [k.name for k in SORT_KEYS].index("util")


def notes(app: GpuTuiApp) -> list[str]:
    """Every notice's text so far (the history ``N`` shows)."""
    return [text for _, text in told(app)]


def palette_hits(app: GpuTuiApp) -> list[str]:
    options = app.screen.query_one(CommandList)
    prompts = (options.get_option_at_index(i).prompt for i in range(options.option_count))
    return [str(prompt).split("\n")[0] for prompt in prompts]


@pytest.mark.parametrize("size", SIZES)
async def test_the_palette_offers_gputuis_commands(size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for query in ("queue", "claim", "usage", "health", "audit", "help", "quit", "release"):
            await pilot.press("ctrl+p")
            await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
            await pilot.press(*query)
            await until(pilot, lambda q=query: any(q in h for h in palette_hits(app)), query)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "closed")
        # The keys of the screen below: SIGTERM is the main screen's T.
        await pilot.press("ctrl+p", *"sigterm")
        await until(pilot, lambda: any("SIGTERM" in h for h in palette_hits(app)), "SIGTERM")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "closed")
        await pilot.press("ctrl+p", *"sort util")
        await until(pilot, lambda: palette_hits(app)[:1] == ["sort util"], "sort util first")
        await pilot.press("enter")
        await until(pilot, lambda: app.main.sort_index == UTIL, "sorted by utilisation")


@pytest.mark.parametrize("size", SIZES)
async def test_the_colon_line_completes_keeps_history_and_says_what_it_cannot_do(
    size: tuple[int, int], tmp_path: Path
) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    history = tmp_path / "commands"
    app.commands.history_file = history
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, CommandLine), "the command line")
        line = app.screen.query_one("#command", Input)
        await pilot.press("s", "o", "tab")
        assert line.value == "sort "
        await pilot.press("u", "tab", "enter")
        await until(pilot, lambda: app.main.sort_index == UTIL, "sorted by utilisation")
        assert history.read_text() == "sort util\n"
        await pilot.press("colon", *"queu", "enter")
        await until(pilot, lambda: any("unknown command :queu" in n for n in notes(app)), "why")
        said = next(n for n in notes(app) if "unknown command" in n)
        assert said == "unknown command :queu; did you mean :queue? (:help lists them)"
        # Up walks back through the history, Down comes back to what was typed.
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, CommandLine), "the command line")
        line = app.screen.query_one("#command", Input)
        await pilot.press("h", "up")
        assert line.value == "queu"
        await pilot.press("up")
        assert line.value == "sort util"
        await pilot.press("down", "down")
        assert line.value == "h"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CommandLine), "closed")
        # A history file in a bad state is said once, in one line, and the line works.
        history.write_bytes(b"\xff\xfe")
        app.commands.history = None  # read again, as by the next console
        for key in ("host", "util"):
            await pilot.press("colon", *f"sort {key}", "enter")
            await until(pilot, lambda k=key: SORT_KEYS[app.main.sort_index].name == k, key)
        ignored = [n for n in notes(app) if "command history" in n]
        assert ignored == [f"command history {history} ignored: not UTF-8 text"]
        assert history.read_bytes() == b"\xff\xfe"


@pytest.mark.parametrize("size", SIZES)
async def test_a_colon_line_typed_in_one_burst_is_run_whole(size: tuple[int, int]) -> None:
    # ":sort util" Enter as fast as a k9s user types it (or a paste): the keys after
    # ":" came before the line was open and went to the screen below (s: sort, u:
    # release...), and the line closed empty. Seen in tmux on the health view.
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        burst(app, ["colon", *"sort", "space", *"util", "enter"])
        await until(pilot, lambda: app.main.sort_index == UTIL, "sorted by utilisation")
        assert app.screen is app.main
        assert notes(app) == ["sort: utilisation"]  # nothing else was done
        await pilot.press("N")  # the notices screen, a view over the main screen
        burst(app, ["colon", *"help", "enter"])
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")


@pytest.mark.parametrize("size", SIZES)
async def test_a_colon_is_text_in_a_field_and_nothing_over_a_question(
    size: tuple[int, int],
) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"gpu", "colon")
        field = app.main.query_one("#filter", Input)
        assert field.value == "gpu:"
        assert not isinstance(app.screen, CommandLine)
        await pilot.press("escape")
        app.push_screen(ConfirmScreen(Text("Really?")))
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)


@pytest.mark.parametrize("size", SIZES)
async def test_claim_views_and_quit_from_the_colon_line(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None

            def claimed() -> list[Any]:
                view = link.view
                return [c for c in view.claims if c.state == "active"] if view else []

            # More than one GPU: which ones is shown first, as from the claim form.
            await pilot.press("colon", *"claim 2 --pool a100", "enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "which GPUs")
            question = app.screen.question.plain  # type: ignore[attr-defined]
            assert "Claim 2 GPUs on" in question
            assert not claimed()  # nothing taken before the yes
            await pilot.press("n")
            await until(pilot, lambda: any("nothing was claimed" in n for n in notes(app)), "no")
            assert not claimed()
            await pilot.press("colon", *"claim 2 --pool a100", "enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "which GPUs")
            await pilot.press("y")
            await until(pilot, claimed, "the claim granted")
            assert len(claimed()[0].gpu_uuids) == 2
            assert all(u in question for u in claimed()[0].gpu_uuids)  # those shown
            await pilot.press("colon", *"claim 99", "enter")
            await until(pilot, lambda: any("must be 1 to 64" in n for n in notes(app)), "why")
            await pilot.press("colon", *"queue", "enter")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue")
            await pilot.press("colon", *"usage", "enter")
            await until(pilot, lambda: isinstance(app.screen, UsageScreen), "usage")
            assert not any(isinstance(s, QueueScreen) for s in app.screen_stack)
            assert app.head.jobs.screen is None  # the queue was closed, not hidden
            await pilot.press("colon", "q", "enter")
            await until(pilot, lambda: app._exit, "the console to quit")
