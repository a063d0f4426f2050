"""End to end: book cards ahead from the console's own link to a real head, see them
on the week view at 80x24 (and 200x50), let the booking start on the head's clock,
and see it become the booker's claim on the grid.

The head is the real daemon on a real Unix socket and SQLite file, its hosts
scripted (``headkit``), its clock one the test moves (no sleeps: every wait is a
poll for what the screen or the head's state shows).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_scheduler import LAYOUT, StaticSource, connected, snapshot, uuid
from ui_helpers import shows, until

from gputui.config.models import Config, HeadConfig
from gputui.scheduler.head.actions import Rules
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.main import MainScreen
from gputui.ui.screens.week import WeekScreen
from gputui.ui.widgets.week_board import covered, day_cells, label_width

from headkit import FAST_TICK_S, SettableClock, running_head  # isort: skip  (on sys.path via test_scheduler)

SIZES = [(80, 24), (200, 50)]


@pytest.mark.parametrize("size", SIZES)
async def test_book_ahead_see_the_week_then_the_booking_becomes_a_claim(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    clock = SettableClock()
    async with running_head(
        tmp_path, LAYOUT, clock=clock, tick_s=FAST_TICK_S, rules=Rules(claim_idle_s=3600)
    ) as (_head, _hosts, sock):
        source = StaticSource([snapshot(h, n, time.time()) for h, n in LAYOUT.items()])
        app = GpuTuiApp(source, Config(head=HeadConfig(socket=str(sock))), clock=clock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            start = clock() + 2 * 3600
            made = await link.ask(
                "book",
                lambda b: b.book(start=start, duration_s=86400, gpus=2, note="paper deadline"),
            )
            booking = made["booking"]
            booked = sorted(booking["gpu_uuids"])
            assert booked == [uuid("gpu01", 0), uuid("gpu01", 1)]

            await pilot.press("W")
            await until(pilot, lambda: isinstance(app.screen, WeekScreen), "the week screen")
            week = app.screen
            assert isinstance(week, WeekScreen)
            await until(pilot, lambda: week.lines and not week.asking, "the week's bookings")
            lines = week.lines
            width = size[0]
            assert all(len(line) <= width for line in lines)
            label = label_width(width, week.rows)
            cells = day_cells(width, label)
            cover = set(covered(start, start + 86400, week.since, cells))
            for index in range(4):
                row = next(line for line in lines if line.startswith(f"gpu01:{index} "))
                drawn = row[label + 1 :]
                got = {c for c, ch in enumerate(drawn) if ch == "A"}
                assert got == (cover if index < 2 else set()), (index, row)
            # The board grows to its lines at the next layout: its last ones come then.
            text = await shows(pilot, app, f"A b{booking['id']} root 2 GPU", "gpu01:3")
            assert f"A b{booking['id']} root 2 GPU" in text and "paper deadline" in text
            assert "gpu01:3" in text  # every GPU has its line, at 80x24 too

            # The start comes (on the head's clock): the cards become root's claim.
            clock.advance(2 * 3600 + 1)

            def claimed() -> bool:
                view = link.view
                return view is not None and any(
                    c.state == "active" and sorted(c.gpu_uuids) == booked for c in view.claims
                )

            await until(pilot, claimed, "the booking's claim", timeout=20)
            await pilot.press("r")
            await until(pilot, lambda: not week.asking, "the week again")
            assert any(b.ident == booking["id"] for b in week.bars)
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "the GPUs again")
            await until(pilot, lambda: sorted(app.model.holders) == booked, "held on the grid")
