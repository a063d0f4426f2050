"""What the console keeps at 80x24 and shows at 200x50: the header's counts whole, the
HELD column whole (grouped and flat), model labels, the PROCS column, "free" as a
sort and a filter (unclaimed and idle), and the audit screen's OWNER and OUTCOME."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable
from ui_fakes import NOW, FakeSource, fixed_clock
from ui_helpers import grid_line, help_text, lines, screen_text, shown, shows, until

from gputui.config.models import Config
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.ui.head.view import Holder
from gputui.ui.model import SORT_KEYS
from gputui.ui.screens.audit import AuditRow, AuditScreen
from gputui.ui.widgets.grid_columns import plan_columns
from gputui.ui.widgets.summary import SummaryBar, head_forms

SIZES = [(80, 24), (200, 50)]
CLAIM = Holder("claim", 12, "bob", NOW - 3 * 3600 - 300, "")
"""On gpu01's GPU 3, idle: with it, one GPU is free (gpu02's 3); gpu03 is unreachable."""
JOB = Holder("job", 7, "alice", NOW - 180, "resnet")
HELD_CLAIM = "c12 bob 3h05m idle"
HELD_JOB = "j7 alice 3m"


def _uuid(host: str, index: int) -> str:
    return f"GPU-{host}-{index:04d}-0000-0000-000000000000"


async def _with_head(app: GpuTuiApp) -> None:
    """As the console is with a head: the scheduler's column, two holders, counts."""
    main = app.main
    main.enable_scheduler()
    rows = app.model.set_holders({_uuid("gpu01", 3): CLAIM, _uuid("gpu01", 0): JOB})
    main.holders_changed(rows)
    main.head_line = (head_forms(4, 2, 1), False)
    main.refresh_summary()


@pytest.mark.parametrize("size", SIZES)
async def test_the_header_keeps_the_counts_whole(size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await _with_head(app)
        await pilot.pause()
        header = app.main.query_one(SummaryBar).render().plain
        assert len(header) <= size[0]
        assert "…" not in header, header  # nothing cut mid-word
        for part in ("problem", "GPUs 12", "busy 5", "free 1"):
            assert part in header, header
        if size[0] == 80:
            assert "head 4 run, 2 wait, 1 claim" in header
            assert "mem " not in header  # the least important went whole
        else:
            assert "head 4 running, 2 waiting, 1 claim of yours" in header
            assert "hosts 2/3" in header and "mem " in header and "sort:host" in header


@pytest.mark.parametrize("size", SIZES)
async def test_held_stays_whole_grouped_and_flat(size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await _with_head(app)
        for flat in (False, True):
            if flat:
                await pilot.press("g")
                await until(pilot, lambda: not app.main.grid.grouped, "the flat view")
            await pilot.pause()
            header = lines(app.main.grid)[0]
            assert "HELD" in header and "PROCS" in header and " P " not in header
            assert HELD_JOB in grid_line(app, "gpu01:0")
            if not flat or size[0] > 80:
                assert HELD_CLAIM in grid_line(app, "gpu01:3")
            else:  # the host column takes 6 cells of it: the age stays, "idle" is cut
                assert "c12 bob 3h05m" in grid_line(app, "gpu01:3")
            label = "A100-80G" if size[0] == 80 else "A100-SXM4-80GB"
            assert label in grid_line(app, "gpu01:0")
            assert all(len(line) <= size[0] for line in screen_text(app).splitlines())


async def test_free_is_a_sort_and_a_filter_of_unclaimed_idle_gpus() -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await _with_head(app)
        # Idle: gpu01's GPU 3 (held by an idle claim: not free), gpu02's GPU 3, and
        # gpu03's four (its host is unreachable: not free either).
        await pilot.press("slash", *"free", "enter")
        await until(pilot, lambda: app.main.query_text == "free", "the filter")
        assert shown(app) == ["gpu02", "gpu02:3"]
        # The claim ends: its GPU is free again, and the filter shows it.
        app.main.holders_changed(app.model.set_holders({_uuid("gpu01", 0): JOB}))
        await until(pilot, lambda: "gpu01:3" in shown(app), "gpu01:3 free again")
        assert shown(app) == ["gpu01", "gpu01:3", "gpu02", "gpu02:3"]
        await pilot.press("escape")
        await until(pilot, lambda: app.main.query_text == "", "the filter cleared")
        # As a sort: the free GPUs first, in one list across the hosts.
        free = next(i for i, key in enumerate(SORT_KEYS) if key.name == "free")
        for _ in range(free):
            await pilot.press("s")
        await pilot.press("g")
        await until(pilot, lambda: not app.main.grid.grouped, "the flat view")
        assert shown(app)[:2] == ["gpu01:3", "gpu02:3"]
        assert "free (unclaimed and idle)" in SORT_KEYS[free].label


async def test_the_help_screen_names_every_grid_column() -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        text = help_text(app)
        assert "PROCS  How many processes run on the GPU" in text
        assert "HELD  The job (j12) or claim (c4)" in text


ROWS = [
    AuditRow(NOW - 60, "root", "cancel", "job 7", "node needs a reboot", "ok", "alice"),
    AuditRow(NOW - 10, "gputui-head", "preempt", "job 5", "for job 9 (urgent)", "sent", "bob"),
]


@pytest.mark.parametrize("size", SIZES)
async def test_the_audit_screen_keeps_owner_and_outcome(size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = AuditScreen(clock=fixed_clock)
        await app.push_screen(screen)
        await pilot.pause()
        screen.show_rows(screen.token, sorted(ROWS, key=lambda r: -r.time))
        # The highlighted row's detail comes with the highlight, drawn at the next frame.
        text = await shows(pilot, app, "reason   for job 9 (urgent)")
        header = next(line for line in text.splitlines() if "TIME" in line)
        for column in ("ACTOR", "ACTION", "TARGET", "OWNER", "OUTCOME", "REASON"):
            assert column in header, header
        row = next(line for line in text.splitlines() if "preempt" in line)
        assert "bob" in row and "sent" in row
        # The highlighted row whole, below the table.
        assert "reason   for job 9 (urgent)" in text
        assert "of bob" in text
        table = screen.query_one("#audit-table", DataTable)
        assert table.row_count == 2


async def test_a_line_drawn_before_the_resize_is_handled_uses_the_new_widths_plan() -> None:
    """A layout sets the grid's new size before its ``Resize`` is handled; a line drawn
    in between came from the old width's plan, cut to the new width, so the last
    columns (owners, flags) fell off the end: the Slurm console's ROGUE was lost so."""
    app = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        await _with_head(app)
        await pilot.pause()
        grid = app.main.grid
        fresh = grid_line(app, "gpu01:0")
        assert fresh.rstrip().endswith("ok"), fresh  # the state column, last
        grid._columns = plan_columns(grid.size.width + 64, held=True)  # the old layout's
        grid.invalidate_rows([GpuRow("gpu01", 0)])  # its holder changed: drawn again
        stale = grid.render_line(1 + grid.rows.index(GpuRow("gpu01", 0))).text
        assert stale.rstrip() == fresh.rstrip()
