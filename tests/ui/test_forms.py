"""The enqueue and claim forms: keys typed in a burst, a GPU count that must be
given, and checkboxes that read on and off without colour (80x24 and 200x50)."""

from __future__ import annotations

import pytest
from textual.message import Message
from textual.widgets import Input
from ui_helpers import burst, screen_text, until

from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.forms import ClaimScreen, FormScreen, SubmitScreen
from gputui.ui.widgets.tickbox import TickBox

SIZES = [(80, 24), (200, 50)]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("form", [ClaimScreen, SubmitScreen])
async def test_keys_typed_in_a_burst_after_tab_reach_the_next_field(
    app: GpuTuiApp, size: tuple[int, int], form: type[FormScreen]
) -> None:
    async with app.run_test(size=size) as pilot:
        await app.push_screen(form())
        await until(pilot, lambda: isinstance(app.focused, Input), "the form's first field")
        first = app.focused
        assert isinstance(first, Input)
        first.value = ""
        # Claim: GPUs then pool; submit: command then GPUs (digits only: the letters
        # would be refused by a GPU field that still had the focus).
        typed = ["2", "tab", "x", "y"] if form is ClaimScreen else ["a", "tab", "7", "tab", "x"]
        burst(app, typed)
        want = (
            {"f-gpus": "2", "f-pool": "xy"}
            if form is ClaimScreen
            else {"f-command": "a", "f-gpus": "7", "f-pool": "x"}
        )

        def values() -> dict[str, str]:
            return {f: app.screen.query_one(f"#{f}", Input).value for f in want}

        await until(pilot, lambda: values() == want, f"every key in its field: {want}")


@pytest.mark.parametrize("size", SIZES)
async def test_editing_keys_in_a_burst_act_on_the_field_they_were_typed_in(
    app: GpuTuiApp, size: tuple[int, int]
) -> None:
    # Backspace (a binding, not text) typed before Tab must not reach the next field.
    async with app.run_test(size=size) as pilot:
        screen = ClaimScreen("gpu01")
        await app.push_screen(screen)
        await until(pilot, lambda: app.focused is screen.query_one("#f-gpus"), "the GPUs field")
        gpus = screen.query_one("#f-gpus", Input)
        gpus.cursor_position = len(gpus.value)  # after the "1"
        burst(app, ["backspace", "3", "tab", "x", "y", "backspace", "z", "left", "w"])

        def values() -> tuple[str, str]:
            return gpus.value, screen.query_one("#f-pool", Input).value

        await until(pilot, lambda: values() == ("3", "xwz"), "each key on its own field")
        await pilot.pause(0.1)
        assert values() == ("3", "xwz")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("form", [ClaimScreen, SubmitScreen])
async def test_an_empty_gpu_field_is_refused_not_taken_for_one(
    app: GpuTuiApp, size: tuple[int, int], form: type[FormScreen]
) -> None:
    messages: list[Message] = []
    async with app.run_test(size=size, message_hook=messages.append) as pilot:
        screen = form()
        await app.push_screen(screen)
        await pilot.pause()
        gpus = screen.query_one("#f-gpus", Input)
        assert gpus.placeholder == "required (e.g. 1)"
        if isinstance(screen, SubmitScreen):
            screen.query_one("#f-command", Input).value = "python train.py"
        gpus.value = ""
        await pilot.press("ctrl+s")
        await until(pilot, lambda: "GPUs: required" in screen_text(app), "the field's problem")
        assert app.screen is screen and not screen.sending
        assert app.focused is gpus
        assert not any(isinstance(m, FormScreen.Requested) for m in messages)


@pytest.mark.parametrize("size", SIZES)
async def test_checkboxes_read_on_and_off_without_colour(
    app: GpuTuiApp, size: tuple[int, int]
) -> None:
    async with app.run_test(size=size) as pilot:
        screen = ClaimScreen()
        await app.push_screen(screen)
        await pilot.pause()
        assert "[x] wait in line if not free now" in screen_text(app)
        box = screen.query_one("#f-wait", TickBox)
        box.focus()
        await pilot.press("space")
        await until(pilot, lambda: "[ ] wait in line" in screen_text(app), "the box unticked")
        assert box.value is False
        await app.push_screen(SubmitScreen())
        await pilot.pause()
        assert "[ ] preemptible" in screen_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_typing_in_the_offered_command_adds_to_it(
    app: GpuTuiApp, size: tuple[int, int]
) -> None:
    """The demo offers its own job's command: typing goes after it, not over it (a
    field that selected all on focus replaced the command with the first key)."""
    async with app.run_test(size=size) as pilot:
        screen = SubmitScreen(command="python3 train.py --steps 20")
        await app.push_screen(screen)
        field = screen.query_one("#f-command", Input)
        await until(pilot, lambda: app.focused is field, "the command field")
        burst(app, ["space", "-", "-", "x"])
        await until(pilot, lambda: field.value.endswith("--x"), "the typed keys")
        assert field.value == "python3 train.py --steps 20 --x"


@pytest.mark.parametrize("size", SIZES)
async def test_the_enqueue_form_sends_the_environment_and_what_the_job_runs_in(
    app: GpuTuiApp, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_TOKEN", "from-the-console")
    messages: list[Message] = []
    async with app.run_test(size=size, message_hook=messages.append) as pilot:
        screen = SubmitScreen(cwd="/srv/proj")
        await app.push_screen(screen)
        await pilot.pause()
        for field, value in (
            ("f-command", "python train.py"),
            ("f-env", "SEED=1 'NOTE=two words'"),
            ("f-export", "TEAM_TOKEN"),
            ("f-runs-in", "podman team/train:1.0"),
        ):
            screen.query_one(f"#{field}", Input).value = value
        await pilot.press("ctrl+s")
        await until(
            pilot,
            lambda: any(isinstance(m, FormScreen.Requested) for m in messages),
            "the request",
        )
        (sent,) = [m for m in messages if isinstance(m, FormScreen.Requested)]
        setup = sent.args["setup"]
        assert dict(setup.env) == {
            "SEED": "1",
            "NOTE": "two words",
            "TEAM_TOKEN": "from-the-console",
        }
        assert (setup.image, setup.runtime, setup.conda, setup.venv) == (
            "team/train:1.0",
            "podman",
            None,
            None,
        )


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("f-env", "1X=y", "env: --env: '1X' is not an environment variable name"),
        ("f-export", "ALL,NONE", "export: --export: NONE stands alone"),
        ("f-runs-in", "docker ubuntu;x", "runs in: image 'ubuntu;x' is not an image name"),
        ("f-runs-in", "lxc ubuntu", "runs in: give conda ENV, venv PATH, image IMAGE"),
        ("f-runs-in", "venv relative/path/../../x:y", "runs in: --venv must be an absolute"),
    ],
)
async def test_a_bad_environment_field_is_named_and_nothing_is_sent(
    app: GpuTuiApp, field: str, value: str, words: str
) -> None:
    messages: list[Message] = []
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        screen = SubmitScreen(cwd="/srv/proj")
        await app.push_screen(screen)
        await pilot.pause()
        screen.query_one("#f-command", Input).value = "python train.py"
        screen.query_one(f"#{field}", Input).value = value
        await pilot.press("ctrl+s")
        await until(pilot, lambda: words in screen_text(app), f"the problem: {words}")
        assert app.focused is screen.query_one(f"#{field}", Input)
        assert not any(isinstance(m, FormScreen.Requested) for m in messages)
