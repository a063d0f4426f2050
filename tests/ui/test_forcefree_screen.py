"""The force-free modal (``F``): each step as the head reports it, then the verdict.

Screenshots from fixed steps; end to end on the demo's real head: a card taken back
with the steps arriving live.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from ui_fakes import FakeSource, fixed_clock
from ui_helpers import select, until

from gputui.config.models import Config
from gputui.demo.cluster import DemoCluster
from gputui.fleet.fleet import Fleet
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.ui.screens.confirm import ReasonScreen
from gputui.ui.screens.forcefree import ForceFreeScreen

DEADLINE_S = 90.0
STEPS = [
    {"step": "drain", "ok": True, "outcome": "drained (force-free: 20 GB stuck)"},
    {"step": "stop", "ok": True, "outcome": "killed job 41 (alice); released claim 7 (bob)"},
    {"step": "sigterm", "ok": True, "outcome": "SIGTERM pid 4242 (carol, python train.py)"},
    {"step": "sigkill", "ok": True, "outcome": "SIGKILL pid 4242: it ignored SIGTERM"},
    {"step": "memory", "ok": False, "outcome": "20480 MiB still held with no process"},
    {"step": "holders", "ok": True, "outcome": "pid 977 (root, nvidia-persistenced): nvidiactl"},
]


async def _show(pilot: Pilot[Any], finished: bool) -> None:
    screen = ForceFreeScreen("gpu01 GPU 2", "20 GB stuck after a crash")
    await pilot.app.push_screen(screen)
    await pilot.pause()
    for step in STEPS if finished else STEPS[:3]:
        screen.step(step)
    if finished:
        screen.done({"free": False, "steps": STEPS})
    await pilot.pause()


def make_app() -> GpuTuiApp:
    return GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)


def test_force_free_modal_running_80x24(snap_compare: Any) -> None:
    async def run(pilot: Pilot[Any]) -> None:
        await _show(pilot, finished=False)

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run)


def test_force_free_modal_finished_200x50(snap_compare: Any) -> None:
    async def run(pilot: Pilot[Any]) -> None:
        await _show(pilot, finished=True)

    assert snap_compare(make_app(), terminal_size=(200, 50), run_before=run)


async def test_the_verdict_names_the_failed_step_and_hostile_steps_are_dropped() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ForceFreeScreen("gpu01 GPU 2", "why")
        await app.push_screen(screen)
        await pilot.pause()
        for junk in (None, [], {"ok": True}, {"step": 5}, "drain"):
            screen.step(junk)
        assert screen.steps == []
        screen.step({"step": "drain\x1b[31m", "ok": True, "outcome": "x\n" * 400})
        assert "\x1b" not in screen.steps[0]["step"] and "\n" not in screen.steps[0]["outcome"]
        screen.done({"free": False, "steps": [*screen.steps, STEPS[4]]})
        assert screen.verdict is not None and "at memory" in str(screen.verdict)
        screen.done(None, "only admins force-free")
        assert str(screen.verdict) == "only admins force-free"


async def test_force_free_from_the_console_on_the_demo_head() -> None:
    async with DemoCluster(hosts=1, gpus=2, head=True) as cluster:
        config = cluster.config()
        app = GpuTuiApp(Fleet(config), config)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(
                pilot, lambda: app.head.link is not None and app.head.link.connected, "the head"
            )
            link = app.head.link
            assert link is not None
            host = config.hosts[0].name
            await until(
                pilot, lambda: link.view is not None and len(link.view.gpus) == 2, "the head's GPUs"
            )
            await select(pilot, app, GpuRow(host, 1))
            await pilot.press("F")
            await until(pilot, lambda: isinstance(app.screen, ReasonScreen), "the reason")
            await pilot.press(*"stuck card", "enter")
            await until(pilot, lambda: isinstance(app.screen, ForceFreeScreen), "the modal")
            screen = app.screen
            assert isinstance(screen, ForceFreeScreen)
            await until(pilot, lambda: screen.verdict is not None, "the verdict", DEADLINE_S)
            assert str(screen.verdict) == "The card is free.", (screen.verdict, screen.steps)
            names = [s["step"] for s in screen.steps]
            assert names[:5] == ["drain", "stop", "sigterm", "sigkill", "memory"], names
            audit = await link.ask("audit", lambda b: b.audit(limit=50))
            steps = [r for r in audit["rows"] if r["action"] == "force-free"]
            assert len(steps) >= 5 and all(r["target"] == f"{host}:1" for r in steps)
