"""Claiming from the console with a real head, at 80x24 and 200x50: ``c`` on a host
line asks how many, a claim of more than one GPU shows which before it takes them,
a copy says truly what it did (inside tmux too), and a submit's notice says what
the job came to.

The head is the real daemon on a real Unix socket and SQLite file, its hosts
scripted (``headkit``); ``tmux`` is a real executable on PATH (a script that
answers as tmux would).
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from test_scheduler import LAYOUT, connected, console, notes, uuid
from textual.widgets import Input
from ui_helpers import screen_text, shows, until

from gputui.ui import clipboard
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.forms import ClaimScreen, SubmitScreen
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.notices import NoticesScreen

from headkit import running_head  # isort: skip  (tests/scheduler, put on sys.path by test_scheduler)

SIZES = [(80, 24), (200, 50)]
DROPS = "tmux drops OSC 52: run `tmux set -g set-clipboard on`"


def fake_tmux(bin_dir: Path, answer: str) -> None:
    """A ``tmux`` that answers ``show -gv set-clipboard`` with ``answer``."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "tmux"
    exe.write_text(f"#!/bin/sh\necho '{answer}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("size", SIZES)
async def test_c_on_a_host_line_asks_how_many_then_shows_which_gpus(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    async with running_head(tmp_path, LAYOUT) as (head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            assert app.main.grid.select(HostRow("gpu01"))
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            form = app.screen
            assert form.query_one("#f-gpus", Input).value == "1"
            assert form.query_one("#f-host", Input).value == "gpu01"
            assert not app.model.holders  # nothing taken by the key itself
            form.query_one("#f-gpus", Input).value = "3"
            form.query_one("#f-for", Input).value = "2h"
            form.query_one("#f-note", Input).value = "sweep"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "which GPUs")
            text = await shows(pilot, app, "Claim 3 GPUs on gpu01: GPU 0, 1, 2")
            assert "Claim 3 GPUs on gpu01: GPU 0, 1, 2" in text
            shown = [uuid("gpu01", i) for i in range(3)]
            assert all(u in text for u in shown), text
            assert "For 2 h; note: sweep" in text
            # No: nothing is taken, the form is back for a change.
            await pilot.press("n")
            await until(pilot, lambda: app.screen is form, "the form again")
            await shows(pilot, app, "nothing was claimed")  # said once the answer is in
            assert not app.model.holders
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "which GPUs")
            await pilot.press("y")
            await until(pilot, lambda: len(app.model.holders) == 3, "three GPUs claimed")
            assert sorted(app.model.holders) == shown  # exactly those shown
            assert isinstance(app.screen, MainScreen)
            view = app.head.link.view if app.head.link else None
            assert view is not None
            (claim,) = [c for c in view.claims if c.state == "active"]
            assert claim.note == "sweep" and claim.expires_at is not None
            assert claim.granted_at is not None
            assert round(claim.expires_at - claim.granted_at) == 7200
            assert head is not None


@pytest.mark.parametrize("size", SIZES)
async def test_a_claim_that_cannot_be_had_now_and_may_not_wait_is_refused_here(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            assert app.main.grid.select(GpuRow("gpu01", 0))
            await pilot.press("c")  # one of the four taken: four are not free now
            await until(pilot, lambda: len(app.model.holders) == 1, "one GPU claimed")
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            form = app.screen
            form.query_one("#f-gpus", Input).value = "4"
            form.query_one("#f-wait").value = False  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "no host has 4 free GPUs" in screen_text(app), "why")
            assert app.screen is form and len(app.model.holders) == 1
            form.query_one("#f-wait").value = True  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            await shows(pilot, app, "The claim waits in line")


@pytest.mark.parametrize("size", SIZES)
async def test_a_claim_no_host_could_ever_take_is_refused_without_a_question(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """Five GPUs where the one host has four: waiting cannot help, so the console
    does not ask whether to wait; the head refuses it, in its own words."""
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            form = app.screen
            form.query_one("#f-gpus", Input).value = "5"  # (waits in line: the default)
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "no host has more than 4" in screen_text(app), "why")
            # (a question would stand between: the head's words come after a yes)
            assert app.screen is form and not app.model.holders


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(
    ("tmux", "said"),
    [
        (None, "sent to the terminal clipboard (OSC 52)"),
        ("external", DROPS),
        ("on", "sent to the clipboard through tmux (OSC 52)"),
    ],
)
async def test_a_copy_says_what_it_did_and_shows_the_line_whole(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    size: tuple[int, int],
    tmux: str | None,
    said: str,
) -> None:
    # The answer is under test, not the wait: a loaded machine can take past the
    # console's second to start even a shell script (then it says "may drop it").
    monkeypatch.setattr(clipboard, "ASK_TMUX_S", 60.0)
    if tmux is None:
        monkeypatch.delenv("TMUX", raising=False)
    else:
        fake_tmux(tmp_path / "bin", tmux)
        monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
        monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size, notifications=True) as pilot:
            await connected(pilot, app)
            assert app.main.grid.select(GpuRow("gpu01", 1))
            await pilot.press("c")
            env = f"export CUDA_VISIBLE_DEVICES={uuid('gpu01', 1)}"
            await until(pilot, lambda: any(env in n for n in notes(app)), "the claim's notice")
            assert app.clipboard == env
            (notice,) = [n for n in notes(app) if env in n]
            assert notice.splitlines()[0] == said
            assert "Copied to the clipboard" not in notice
            assert ('eval "$(gputui env)"' in notice) is (tmux == "external")
            # The bottom line says what was done (the toast, cut at the edge if need be;
            # it is drawn after the notice is kept, at the screen's next refresh).
            await until(pilot, lambda: said[:40] in screen_text(app).splitlines()[-1], "the toast")
            # N: the line whole, alone on its row, for a mouse.
            await pilot.press("N")
            await until(pilot, lambda: isinstance(app.screen, NoticesScreen), "the notices")
            text = await shows(pilot, app, env)
            assert env in [line.rstrip() for line in text.splitlines()]


@pytest.mark.parametrize("size", SIZES)
async def test_a_submit_notice_says_the_job_started_where(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, SubmitScreen), "the enqueue form")
            app.screen.query_one("#f-command", Input).value = "python train.py"
            app.screen.query_one("#f-name", Input).value = "train"
            await pilot.press("ctrl+s")

            def submitted() -> list[str]:
                return [" ".join(n.lines) for n in app.notices if n.title == "submitted"]

            await until(pilot, submitted, "the submit's notice")
            (notice,) = submitted()
            assert notice.startswith("job 1 (train) started on gpu01: GPU 0"), notice
            assert "queued" not in notice
