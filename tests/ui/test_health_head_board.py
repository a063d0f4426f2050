"""With a head the health view is the head's board: a problem is first seen when the
head first saw it (not when this console opened), and the header counts the list.
End to end on the demo's real head over loopback SSH."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from textual.widgets import DataTable, Static
from ui_fakes import NOW, FakeSource, fixed_clock
from ui_helpers import until

from gputui.config.models import Config
from gputui.demo.cluster import DemoCluster
from gputui.fleet.fleet import Fleet
from gputui.scheduler.client import HeadClient
from gputui.ui.app import GpuTuiApp
from gputui.ui.head.health_acks import SharedBoard
from gputui.ui.screens.health import HealthScreen
from gputui.ui.widgets.summary import SummaryBar

DEADLINE_S = 60.0


def _counted(status: str) -> int:
    return sum(int(n) for n in re.findall(r"(\d+) (?:critical|warnings?|notes?)\b", status))


async def test_first_seen_is_the_heads_and_the_header_counts_the_list() -> None:
    async with DemoCluster(hosts=1, gpus=2, head=True) as cluster:
        config = cluster.config()
        assert config.head is not None
        host = config.hosts[0].name
        sock = Path(config.head.socket)

        def call(op: str, args: dict[str, object]) -> Any:
            with HeadClient(sock) as client:
                return client.call(op, args)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while len((await asyncio.to_thread(call, "cluster", {}))["gpus"]) < 2:
            assert loop.time() < deadline, "the head never had the GPUs"
            await asyncio.sleep(0.05)
        # The head sees the problem before this console is even started.
        await asyncio.to_thread(call, "drain", {"target": f"{host}:1", "reason": "loud fan"})
        while not (
            heads := [
                p
                for p in (await asyncio.to_thread(call, "health", {}))["problems"]
                if p["key"] == f"{host}:1:drained"
            ]
        ):
            assert loop.time() < deadline, "the head's board never had the drain"
            await asyncio.sleep(0.05)
        first_seen = heads[0]["first_seen"]

        app = GpuTuiApp(Fleet(config), config)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(
                pilot, lambda: app.head.link is not None and app.head.link.connected, "the head"
            )
            await pilot.press("h")
            await until(pilot, lambda: isinstance(app.screen, HealthScreen), "the health view")
            view = app.screen
            assert isinstance(view, HealthScreen)
            await until(pilot, lambda: view.problems, "the head's board", DEADLINE_S)
            (drained,) = [p for p in view.problems if p.key == f"{host}:1:drained"]
            assert drained.first_seen == first_seen  # the head's, to the microsecond
            assert "loud fan" in drained.finding.title
            # The header counts exactly the rows listed.
            table = view.query_one("#health-table", DataTable)
            status = str(view.query_one("#health-status", Static).render())
            assert _counted(status) == table.row_count == len(view.problems)
            assert "the head's board" in status
            # So does the main screen's header, from the count the head pushes.
            # (The board may gain a problem meanwhile, the simulated host's own: the
            # header and the list are compared as each is now, not as first read.)
            await until(
                pilot,
                lambda: app.main.board_problems == len(view.problems),
                "the head's count",
                DEADLINE_S,
            )
            listed = len(view.problems)
            header = app.main.query_one(SummaryBar)._text.plain
            assert f"!! {listed} problem" in header, header
            # The console judges nothing itself with a head: its own board stays empty.
            app.judge_health(at_once=True)
            assert app.health.problems() == []


def _answer(first_seen: float) -> dict[str, Any]:
    problem = {
        "key": "gpu01:1:xid-79",
        "severity": "crit",
        "host": "gpu01",
        "gpu": 1,
        "code": "xid-79",
        "title": "Xid 79 (hardware)",
        "first_seen": first_seen,
        "last_seen": first_seen + 60,
        "count": 2,
    }
    return {"problems": [problem], "hosts": 1}


async def test_before_the_first_read_it_says_so_and_after_a_failure_since_when() -> None:
    shared = SharedBoard()
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        view = HealthScreen(shared, clock=fixed_clock, refresh_s=0.05, note=shared.note)
        await app.push_screen(view)
        status = view.query_one("#health-status", Static)
        await until(pilot, lambda: "reading the head's board" in str(status.render()), "waiting")
        assert "No problems" not in str(status.render())  # not known yet is not "no problems"
        shared.take(_answer(NOW - 3 * 3600), NOW)
        await until(pilot, lambda: view.problems, "the head's problem")
        assert view.problems[0].first_seen == NOW - 3 * 3600
        assert "3h ago" in str(view.query_one("#health-table", DataTable).get_row_at(0)[4])
        assert "1 critical" in str(status.render())
        shared.failure = "the head is unreachable"
        await until(pilot, lambda: "as read at" in str(status.render()), "the stale note")
        assert view.problems  # the last board read stays
