"""``N`` then ``h``: your notice history as a real head keeps it (a real daemon on a
real socket and SQLite file, its hosts scripted), at 80x24 and 200x50; ``h`` again
goes back to this session's notices; without a head it says so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_scheduler import LAYOUT, connected, console
from ui_helpers import screen_text, shows, until

from gputui.scheduler.head.actions import run_key
from gputui.ui.app import GpuTuiApp
from gputui.ui.screens.notices import NoticesScreen, parse_history

from headkit import running_head  # isort: skip  (tests/scheduler, put on sys.path by test_scheduler)

SIZES = [(80, 24), (200, 50)]


@pytest.mark.parametrize("size", SIZES)
async def test_h_shows_what_the_head_kept_for_you(tmp_path: Path, size: tuple[int, int]) -> None:
    async with running_head(tmp_path, LAYOUT) as (_head, hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            job = (await link.ask("submit", lambda b: b.submit(argv=["train"], gpus=1)))["job"][
                "id"
            ]
            await until(pilot, lambda: hosts.launches, "the launch")
            hosts.finish(hosts.launches[-1].host, run_key(job, 1), 3)
            await until(
                pilot,
                lambda: any("failed" in n.line for n in app.notices),
                "the failure's notice",
            )
            await pilot.press("N")
            await until(pilot, lambda: isinstance(app.screen, NoticesScreen), "the notices")
            await shows(pilot, app, "h: the head's history of yours")
            await pilot.press("h")
            await until(
                pilot, lambda: "as the head keeps them: the newest" in screen_text(app), "history"
            )
            lines = screen_text(app).splitlines()
            failed = next(i for i, line in enumerate(lines) if f"job {job} (train) failed" in line)
            started = next(
                i for i, line in enumerate(lines) if f"job {job} (train) started" in line
            )
            assert failed < started  # newest first
            assert " ended " in lines[failed] and " started " in lines[started]
            assert all(len(line) <= size[0] for line in lines)
            await pilot.press("h")
            await until(pilot, lambda: "Notices: " in screen_text(app), "this session's again")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, NoticesScreen), "back")


async def test_h_without_a_head_says_so_in_one_line(app: GpuTuiApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("N")
        await until(pilot, lambda: isinstance(app.screen, NoticesScreen), "the notices")
        await pilot.press("h")
        await until(pilot, lambda: "no head configured" in screen_text(app), "the one line")


def test_a_malformed_history_is_left_out_never_raised() -> None:
    answer = {
        "notices": [
            {"time": 5.0, "kind": "ended", "text": "job 1 \x1b[31mfailed", "unread": True},
            {"time": "x", "kind": "ended", "text": "bad time"},
            {"time": True, "kind": "ended", "text": "bool time"},
            "not a row",
            {"time": 9.0, "kind": None, "text": None},
        ]
    }
    rows = parse_history(answer)
    assert [(r.time, r.kind, r.text, r.unread) for r in rows] == [
        (9.0, "", "", False),
        (5.0, "ended", "job 1 failed", True),
    ]
    assert parse_history(None) == [] and parse_history({"notices": 3}) == []
