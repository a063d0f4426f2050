"""What the enqueue and claim forms say after the head is asked, in Chinese, through a
real head (``headkit``): a claim that cannot be had now and may not wait, a "no" to
the question of which GPUs, a claim granted, and an array queued. Nothing English is
left in those lines but the test's own data."""

from __future__ import annotations

import sys
from pathlib import Path

from test_scheduler import connected, console, notes
from textual.widgets import Input
from ui_helpers import told, until

from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.forms import ClaimScreen, SubmitScreen

from headkit import running_head  # isort: skip  (tests/scheduler, on sys.path via test_scheduler)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words

DATA = {"gpu", "gpu01", "python", "train.py", "train", "export", "CUDA_VISIBLE_DEVICES"}


def _error(form: ClaimScreen | SubmitScreen) -> str:
    return str(form.query_one("#form-error").render())


async def test_the_forms_lines_after_the_head_is_asked_are_in_chinese(
    tmp_path: Path, chinese: None
) -> None:
    async with running_head(tmp_path, {"gpu01": 4}) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=(200, 50), notifications=True) as pilot:
            await connected(pilot, app)
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            form = app.screen
            assert isinstance(form, ClaimScreen)
            form.query_one("#f-gpus", Input).value = "5"  # more than the host has: the head says
            form.query_one("#f-wait").value = False  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "要求 5 块 GPU" in _error(form), "why never")
            assert english_words(_error(form), DATA) == [], _error(form)

            form.query_one("#f-gpus", Input).value = "2"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "which GPUs")
            await pilot.press("n")
            await until(pilot, lambda: app.screen is form, "the form again")
            assert "未发送" in _error(form) and english_words(_error(form), DATA) == []

            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "which GPUs")
            await pilot.press("y")
            await until(pilot, lambda: len(app.model.holders) == 2, "two GPUs claimed")
            await until(pilot, lambda: any("gpu01 上的 2 块 GPU" in n for n in notes(app)), "told")

            await pilot.press("C")  # three of the four: not free now (the console says)
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the form again")
            form = app.screen
            assert isinstance(form, ClaimScreen)
            form.query_one("#f-gpus", Input).value = "3"
            form.query_one("#f-wait").value = False  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "3 块空闲 GPU" in _error(form), "why not now")
            assert english_words(_error(form), DATA) == [], _error(form)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ClaimScreen), "the form closed")

            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, SubmitScreen), "the enqueue form")
            submit = app.screen
            assert isinstance(submit, SubmitScreen)
            submit.query_one("#f-command", Input).value = "python train.py"
            submit.query_one("#f-cwd", Input).value = "/"
            submit.query_one("#f-array", Input).value = "0-2"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: any("作业数组" in n for n in notes(app)), "the array")
            (said,) = [n for n in notes(app) if "作业数组" in n]
            assert english_words(said, DATA) == [], said
            assert "Q 显示队列" in said
            assert [t for t, text in told(app) if text == said] == ["已提交"]
