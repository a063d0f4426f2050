"""The audit screen (``A``): the head's audit trail, newest first, filtered by words.

End to end on the demo's real head: an admin's cancel with a reason shows up as a
row. The parsing of the head's answer takes anything without raising.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from ui_fakes import NOW, FakeSource, fixed_clock
from ui_helpers import grid_line, screen_text, select, until

from gputui.config.models import Config
from gputui.demo.cluster import DemoCluster
from gputui.fleet.fleet import Fleet
from gputui.health.board import Problem
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.ui.screens.audit import AuditRow, AuditScreen, parse_rows
from gputui.ui.screens.confirm import ReasonScreen
from gputui.ui.screens.health import HealthScreen

DEADLINE_S = 60.0

ROWS = [
    AuditRow(NOW - 60, "root", "cancel", "job 7", "node needs a reboot", "ok"),
    AuditRow(NOW - 30, "gputui-head", "preempt", "job 5", "for job 9 (urgent, alice)", "sent"),
    AuditRow(NOW - 10, "root", "drain", "gpu03:2", "Xid 79 twice", "ok"),
]


async def test_an_admin_cancel_shows_in_the_audit_screen() -> None:
    async with DemoCluster(hosts=1, gpus=2, head=True) as cluster:
        config = cluster.config()
        app = GpuTuiApp(Fleet(config), config)
        async with app.run_test(size=(160, 40)) as pilot:
            await until(
                pilot, lambda: app.head.link is not None and app.head.link.connected, "the head"
            )
            await cluster.seed_head()
            link = app.head.link
            assert link is not None

            # The seeded jobs come one by one: wait for a waiting one, not for the first.
            def waiting() -> list[Any]:
                jobs = link.view.jobs if link.view is not None else ()
                return [j for j in jobs if j.state in ("queued", "held")]

            await until(pilot, waiting, "a waiting job", DEADLINE_S)
            queued = waiting()[0]
            await link.ask("cancel", lambda b: b.cancel(queued.id, reason="the node is going away"))
            await pilot.press("A")
            await until(pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen")
            screen = app.screen
            assert isinstance(screen, AuditScreen)
            await until(pilot, lambda: screen.rows, "the head's rows", DEADLINE_S)
            row = next(r for r in screen.rows if r.action == "cancel")
            assert row.target.endswith(str(queued.id)) and row.reason == "the node is going away"
            assert [r.time for r in screen.rows] == sorted(
                (r.time for r in screen.rows), reverse=True
            )


async def test_a_drained_card_shows_in_the_grid_and_the_health_view() -> None:
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
            await until(pilot, lambda: grid_line(app, f"{host}:1"), "the GPU in the grid")
            await until(
                pilot, lambda: link.view is not None and len(link.view.gpus) == 2, "the head's GPUs"
            )
            # D on the GPU, a reason, Enter: the head drains it (the console runs as root).
            await select(pilot, app, GpuRow(host, 1))
            await pilot.press("D")
            await until(pilot, lambda: isinstance(app.screen, ReasonScreen), "the reason")
            assert f"Drain {host} GPU 1?" in str(app.screen.question)
            await pilot.press(*"fan noise", "enter")
            await until(pilot, lambda: "DRAIN" in grid_line(app, f"{host}:1"), "DRAIN", DEADLINE_S)
            assert "DRAIN" not in grid_line(app, f"{host}:0")
            await pilot.press("h")
            await until(pilot, lambda: isinstance(app.screen, HealthScreen), "the health view")
            view = app.screen
            assert isinstance(view, HealthScreen)

            def drained() -> list[Problem]:
                return [p for p in view.problems if p.finding.code == "drained"]

            await until(pilot, drained, "the head's drained problem", DEADLINE_S)
            assert [(p.finding.gpu, p.finding.severity) for p in drained()] == [(1, "info")]
            assert "fan noise" in drained()[0].finding.title
            # D again undrains it.
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is app.main, "back to the grid")
            assert app.main.grid.cursor_row == GpuRow(host, 1)
            await pilot.press("D")
            await until(pilot, lambda: isinstance(app.screen, ReasonScreen), "the reason")
            await pilot.press(*"fixed", "enter")
            await until(
                pilot, lambda: "DRAIN" not in grid_line(app, f"{host}:1"), "no DRAIN", DEADLINE_S
            )
            audit = await link.ask("audit", lambda b: b.audit(limit=20))
            assert [(r["action"], r["reason"]) for r in audit["rows"][-2:]] == [
                ("drain", "fan noise"),
                ("undrain", "fixed"),
            ]


async def test_the_filter_keeps_rows_with_every_word() -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        screen = AuditScreen(clock=fixed_clock)
        await app.push_screen(screen)
        await pilot.pause()
        # No head configured: said in one line.
        assert screen.problem is not None and "no head" in screen.problem
        screen.show_rows(screen.token, [])  # answered, with nothing: said so
        status = str(screen.query_one("#audit-status", Static).render())
        assert status.startswith(" gputui audit ") and "no audit rows yet" in status
        screen.show_rows(screen.token, sorted(ROWS, key=lambda r: -r.time))
        await pilot.press("slash")
        await pilot.press(*"root xid")
        await pilot.pause()
        assert [r.action for r in screen.shown] == ["drain"]
        assert screen.query_one("#audit-table", DataTable).row_count == 1
        # An answer to an older request is dropped.
        screen.show_rows(screen.token - 1, [])
        assert len(screen.rows) == 3


async def _show(pilot: Pilot[Any]) -> None:
    screen = AuditScreen(clock=fixed_clock)
    await pilot.app.push_screen(screen)
    await pilot.pause()
    screen.show_rows(screen.token, sorted(ROWS, key=lambda r: -r.time))
    await pilot.pause()


def test_audit_screen_80x24(snap_compare: Any) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_show)


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_ROW = st.fixed_dictionaries(
    {},
    optional={
        "time": st.floats(allow_nan=True) | st.integers() | st.text(max_size=5),
        "user": _ANY,
        "action": _ANY,
        "target": _ANY,
        "reason": st.text(max_size=600),
        "outcome": _ANY,
    },
)


@settings(max_examples=200)
@given(st.one_of(_ANY, st.fixed_dictionaries({"rows": st.lists(_ROW | _ANY, max_size=8)})))
def test_any_answer_parses_to_clean_rows_or_none(answer: Any) -> None:
    rows = parse_rows(answer)
    for row in rows:
        assert 0 <= row.time < 1e10
        for text in (row.user, row.action, row.target, row.reason, row.outcome):
            assert isinstance(text, str) and "\x1b" not in text and "\n" not in text
        assert len(row.reason) <= 512
    assert [r.time for r in rows] == sorted((r.time for r in rows), reverse=True)


async def test_a_cell_cut_at_80_columns_ends_in_an_ellipsis() -> None:
    # Seen in tmux at 80x24: OUTCOME "it gets S" (of "it gets SIGTERM now, ..."), cut
    # where a reader takes it for the whole word.
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    long = "it gets SIGTERM now, SIGKILL after the grace period, and is requeued"
    async with app.run_test(size=(80, 24)) as pilot:
        screen = AuditScreen(clock=fixed_clock)
        await app.push_screen(screen)
        await pilot.pause()
        screen.show_rows(screen.token, [AuditRow(NOW, "root", "preempt", "job 8", "", long)])
        await pilot.pause()
        line = next(s for s in screen_text(app).splitlines() if "preempt" in s)
        assert re.search(r" it gets \S*…", line), line
