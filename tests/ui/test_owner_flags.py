"""The console shows the head's ownership flags and idle jobs.

A real head on a real socket and SQLite file (``headkit.running_head``), its one
host scripted so that a process of a user with no job or claim sits on GPU 2; the
console's own telemetry shows that same process (same pid, same GPU uuid). The
grid marks the GPU (``ROGUE``), the process table marks the pid (``!``) and the
detail pane says why and when the head signals it. The parsing of the flags
(untrusted, like all the head sends) and the queue screen's idle REASON are
checked on their own below.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_scheduler import LAYOUT, StaticSource, snapshot, uuid
from textual.content import Content
from textual.coordinate import Coordinate
from textual.widgets import Static
from ui_helpers import grid_line, screen_text, steady, until

from gputui.config.models import Config, HeadConfig
from gputui.config.scheduler import Ownership, SchedulerConfig
from gputui.scheduler.head.actions import Rules
from gputui.telemetry import HostSnapshot
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.ui.head.flags import parse_flags
from gputui.ui.head.view import HeadView
from gputui.ui.screens.queue import job_cells
from gputui.ui.widgets.process_table import ProcessTable
from gputui.wire.messages import ProcessSample

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head

ROGUE = ProcessSample(
    pid=4242, uid=4321, user="gtu_bob", command="python rogue.py", start_ticks=99, gpu_mem_mib=900
)


def with_rogue(snap: HostSnapshot) -> HostSnapshot:
    """The console's own sample of the host lists the rogue on GPU 2, as the head's does."""
    assert snap.sample is not None
    gpus = tuple(
        dataclasses.replace(g, processes=(ROGUE,)) if g.index == 2 else g for g in snap.sample.gpus
    )
    return snap.with_changes(sample=snap.sample.model_copy(update={"gpus": gpus}))


async def test_the_grid_marks_a_flagged_gpu_and_the_detail_says_why(tmp_path: Path) -> None:
    sched = SchedulerConfig(ownership=Ownership(mode="enforce", grace_s=600.0))
    async with running_head(tmp_path, LAYOUT, rules=Rules(sched=sched)) as (_head, hosts, sock):
        hosts.put_processes("gpu01", 2, (ROGUE,))
        now = time.time()
        source = StaticSource([with_rogue(snapshot(h, n, now)) for h, n in LAYOUT.items()])
        app = GpuTuiApp(source, Config(head=HeadConfig(socket=str(sock))))
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: uuid("gpu01", 2) in app.model.owner_flags, "the head's flag")
            await until(pilot, lambda: "ROGUE" in grid_line(app, "gpu01:2"), "the marker")
            assert "ROGUE" not in grid_line(app, "gpu01:1")
            assert app.main.grid.select(GpuRow("gpu01", 2))
            await steady(pilot, app)  # the detail pane grows to the flag at the next layout
            text = screen_text(app)
            assert "flagged" in text
            # Wrapped at the pane's width, never cut: what it is, why, and when. Where
            # the wrap falls depends on the flag's age ("0s" or "1s"), so the lines are
            # joined before reading; "10m" is a fresh flag, "9m" one a second older.
            detail = app.main.query_one("#detail-text", Static).render()
            assert isinstance(detail, Content) and "…" not in detail.plain
            assert re.search(
                r"ROGUE pid 4242 gtu_bob python rogue\.py: no job or claim of gtu_bob on this"
                r" GPU, \d+s; SIGTERM in (9|10)m",
                " ".join(detail.plain.split()),
            ), detail.plain
            table = app.main.query_one(ProcessTable)
            assert pid_cell(table) == "!4242"
            # The process ends on the head's host: the flag goes, and so does the marker.
            hosts.put_processes("gpu01", 2, ())
            await until(pilot, lambda: "ROGUE" not in grid_line(app, "gpu01:2"), "no marker")
            await until(pilot, lambda: "flagged" not in screen_text(app), "no detail line")
            assert pid_cell(table) == "4242"  # the console's own sample still lists it


def pid_cell(table: ProcessTable) -> str:
    return str(table.get_cell_at(Coordinate(0, 0)))


_FLAG: dict[str, Any] = {
    "host": "gpu01", "gpu_uuid": "GPU-1", "gpu_index": 1, "pid": 77, "uid": 1003,
    "user": "bob", "name": "python", "kind": "no-allocation", "since": 1000.0,
    "signal_at": 1300.0, "next_signal": "TERM", "signalled": None,
}  # fmt: skip

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(sorted(_FLAG)), JSON), max_size=4) | JSON)
def test_any_flags_parse_without_raising_and_keep_only_well_formed_ones(flags: Any) -> None:
    for flag in parse_flags(flags):
        assert flag.kind in ("no-allocation", "outside-allocation") and flag.gpu_uuid
        assert flag.label in ("ROGUE", "STRAY") and flag.pid >= 0
        assert isinstance(flag.line(2000.0), str)


def test_flag_strings_are_cleaned_and_bad_flags_dropped() -> None:
    flags = parse_flags(
        [
            {**_FLAG, "name": "evil\x1b[31mred\x07", "user": "bo\nb"},
            {**_FLAG, "kind": "other"},
            {**_FLAG, "pid": True},
            {**_FLAG, "pid": -1},
            {**_FLAG, "signal_at": float("nan"), "kind": "outside-allocation", "user": None},
        ]
    )
    assert [f.label for f in flags] == ["ROGUE", "STRAY"]
    assert "\x1b" not in flags[0].name and "red" in flags[0].name and "\n" not in flags[0].user
    assert flags[0].action(1000.0) == "SIGTERM in 5m"
    assert flags[1].signal_at is None and flags[1].user == "uid 1003"
    assert flags[1].action(1000.0) == "warn only"


def test_the_queue_screen_says_idle_for_a_job_idle_past_the_heads_limit() -> None:
    now = 10_000.0
    state = {
        "me": {"uid": 0, "user": "root"},
        "idle_after_s": 3600,
        "jobs": [
            {"id": 1, "state": "running", "started_at": 1.0, "idle_since": now - 7500},
            {"id": 2, "state": "running", "started_at": 1.0, "idle_since": now - 60},
            {"id": 3, "state": "running", "started_at": 1.0, "reason": ""},
        ],
    }
    view = HeadView.parse(state)
    reasons = [job_cells(j, now, view.idle_after_s)[-1] for j in view.jobs]
    assert reasons == ["Idle 2h05m", "-", "-"]
    assert view.idle_for(view.jobs[0], now) == 7500
    assert [job_cells(j, now)[-1] for j in view.jobs] == ["-", "-", "-"]  # no limit known
