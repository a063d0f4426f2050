"""Acknowledgements with a head: the head keeps them, for every console.

End to end on the demo's real head over loopback SSH: ``a`` in the health view
sends the acknowledgement to the head (stored and audited there); one made at the
head by another admin shows in the console's view; and when the head drops one
(its problem changed) the console's view drops it too.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from textual.widgets import DataTable, Static
from ui_helpers import until

from gputui.demo.cluster import DemoCluster
from gputui.fleet.fleet import Fleet
from gputui.ui.app import GpuTuiApp
from gputui.ui.head import health_acks
from gputui.ui.head.link import HeadLink
from gputui.ui.screens.confirm import ReasonScreen
from gputui.ui.screens.health import HealthScreen

DEADLINE_S = 60.0


async def _drain(link: HeadLink, target: str, why: str) -> None:
    await link.ask("drain", lambda b: b.drain(target, reason=why))


async def _head_problem(link: HeadLink, key: str) -> dict[str, Any] | None:
    answer = await link.ask("health", lambda b: b.health())
    return next((p for p in answer["problems"] if p["key"] == key), None)


def _problem(app: GpuTuiApp, key: str) -> Any:
    """The problem as the health view shows it (the head's board, as last read)."""
    return next((p for p in app.head.health.board.problems() if p.key == key), None)


async def test_an_ack_goes_to_the_head_and_the_heads_acks_show_in_the_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(health_acks, "HEAD_BOARD_EVERY_S", 0.2)
    async with DemoCluster(hosts=1, gpus=2, head=True) as cluster:
        config = cluster.config()
        host = config.hosts[0].name
        app = GpuTuiApp(Fleet(config), config)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(
                pilot, lambda: app.head.link is not None and app.head.link.connected, "the head"
            )
            link = app.head.link
            assert link is not None
            await until(
                pilot, lambda: link.view is not None and len(link.view.gpus) == 2, "the head's GPUs"
            )
            for gpu, why in ((0, "bad fan"), (1, "vendor visit")):
                await _drain(link, f"{host}:{gpu}", why)
            mine, theirs = f"{host}:0:drained", f"{host}:1:drained"
            for key in (mine, theirs):  # on the head's board after its tick
                deadline = time.monotonic() + DEADLINE_S
                while await _head_problem(link, key) is None:
                    assert time.monotonic() < deadline, f"{key} never on the head's board"
                    await pilot.pause(0.05)
            await pilot.press("h")
            await until(pilot, lambda: isinstance(app.screen, HealthScreen), "the health view")
            screen = app.screen
            assert isinstance(screen, HealthScreen)
            await until(pilot, lambda: mine in [p.key for p in screen.problems], "the row")

            # a on the selected problem: the note goes to the head, which keeps and audits it.
            table = screen.query_one("#health-table", DataTable)
            table.move_cursor(row=[p.key for p in screen.problems].index(mine), animate=False)
            await pilot.pause()
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, ReasonScreen), "the note")
            await pilot.press(*"fan on order", "enter")
            await until(pilot, lambda: _problem(app, mine).ack is not None, "the ack shown")
            kept = await _head_problem(link, mine)
            assert kept is not None and kept["acknowledged"]["note"] == "fan on order"
            assert kept["acknowledged"]["by"] == "root"
            audit = await link.ask("audit", lambda b: b.audit(limit=50))
            assert [
                (r["action"], r["reason"]) for r in audit["rows"] if r["action"] == "health-ack"
            ] == [("health-ack", "fan on order")]

            # Another admin acknowledges the other one at the head: it shows here too.
            await link.ask("health_ack", lambda b: b.health_ack(theirs, "vendor on Tuesday"))
            await until(
                pilot, lambda: _problem(app, theirs).ack is not None, "the head's ack", DEADLINE_S
            )
            assert _problem(app, theirs).ack.note == "vendor on Tuesday"
            table.move_cursor(row=[p.key for p in screen.problems].index(theirs), animate=False)
            await until(
                pilot,
                lambda: (
                    "vendor on Tuesday" in str(screen.query_one("#health-detail", Static).render())
                ),
                "the note in the detail",
            )

            # The problem changes (a new reason): the head drops its ack, and so does the view.
            await link.ask("drain", lambda b: b.drain(f"{host}:1", reason="vendor visit moved"))
            await until(
                pilot,
                lambda: (
                    (p := _problem(app, theirs)) is not None
                    and "moved" in p.finding.title
                    and p.ack is None
                ),
                "the ack dropped",
                DEADLINE_S,
            )
            assert _problem(app, mine).ack is not None  # the unchanged one keeps its ack
