"""End to end: the demo's real head on its simulated hosts, seen through the console.

A real ``gputui head`` process schedules on real helpers over loopback SSH; the
console connects to its socket. Seeded jobs run, wait with their reasons, one is
held, a claim is idle, and the short job of the console's user is seen to start
and finish (its notices reach the console).
"""

from __future__ import annotations

from typing import Any

from ui_helpers import grid_line, until

from gputui.demo.cluster import DemoCluster
from gputui.fleet.fleet import Fleet
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.link import HeadNotice
from gputui.ui.head.view import HeadView

DEADLINE_S = 90.0


async def test_the_demo_head_is_seeded_and_the_console_shows_it() -> None:
    notices: list[HeadNotice] = []

    def hook(message: Any) -> None:
        if isinstance(message, HeadNotice):
            notices.append(message)

    async with DemoCluster(hosts=2, gpus=6, head=True) as cluster:
        config = cluster.config()
        assert config.head is not None and config.head.socket.startswith(str(cluster.directory))
        app = GpuTuiApp(Fleet(config), config)
        async with app.run_test(size=(160, 40), message_hook=hook) as pilot:
            await until(
                pilot, lambda: app.head.link is not None and app.head.link.connected, "the head"
            )
            done = await cluster.seed_head()
            assert not [d for d in done if "stopped" in d or "refused" in d], done

            def view() -> HeadView:
                assert app.head.link is not None and app.head.link.view is not None
                return app.head.link.view

            def states() -> dict[str, tuple[str, str]]:
                return {j.name: (j.state, j.reason) for j in view().jobs}

            seeded = {"resnet50", "llama-lora", "vit-b16", "sweep-all", "quick-test", "eval-big"}
            await until(
                pilot,
                lambda: (
                    states().get("resnet50", ("",))[0] == "running"
                    and seeded <= set(states())
                    and view().claims
                    # held after its submission: a view pushed between the two shows
                    # it queued, and the next one held
                    and states()["eval-big"][0] == "held"
                ),
                "the seeded jobs and claim in the console",
                DEADLINE_S,
            )
            assert states()["sweep-all"] == ("queued", "Resources")
            assert states()["eval-big"] == ("held", "Held")
            assert [c.state for c in view().claims] == ["active"]
            # Each with a time limit: the week view has starts and ends to estimate.
            limits = {j.name: j.time_limit_s for j in view().jobs if j.name in seeded}
            assert all(limit and limit >= 600 for limit in limits.values()), limits

            resnet = next(j for j in view().jobs if j.name == "resnet50")
            assert resnet.host is not None
            gpu = next(g for g in view().gpus if g.uuid == resnet.gpu_uuids[0])
            await until(
                pilot,
                lambda: f"j{resnet.id} {resnet.user}" in grid_line(app, f"{gpu.host}:{gpu.index}"),
                "the grid to show which job holds the GPU",
                DEADLINE_S,
            )

            def quick_ended() -> bool:
                return any(n.kind == "ended" and "quick-test" in n.text for n in notices)

            await until(pilot, quick_ended, "the quick job to finish", DEADLINE_S)
            await until(
                pilot, lambda: states()["quick-test"][0] == "completed", "its state", DEADLINE_S
            )
            assert any(n.kind == "started" and "quick-test" in n.text for n in notices)
    assert cluster.head is None and cluster.directory is None  # stopped and cleaned
