"""Pilot tests: what a person sees and what the console asks of the source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import ui_fakes as fakes
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input
from ui_fakes import NOW, FakeControl, FakeSource, fixed_clock
from ui_helpers import grid, grid_line, help_text, lines, screen_text, shown, shows, told, until

from gputui.config.models import Config
from gputui.fleet.fleet import Fleet
from gputui.telemetry import HostStatus, ReadOnly, RequestOutcome
from gputui.ui import intake
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.intake import HostsSampled
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.health import HealthScreen
from gputui.ui.screens.help import HelpScreen, key_label
from gputui.ui.screens.main import MainScreen
from gputui.ui.widgets.gpu_grid import GpuGrid
from gputui.ui.widgets.process_table import ProcessTable
from gputui.ui.widgets.rows import ROW_KEYS

ALL_ROWS = [
    "gpu01", "gpu01:0", "gpu01:1", "gpu01:2", "gpu01:3",
    "gpu02", "gpu02:0", "gpu02:1", "gpu02:2", "gpu02:3",
    "gpu03", "gpu03:0", "gpu03:1", "gpu03:2", "gpu03:3",
]  # fmt: skip


@pytest.mark.parametrize(
    ("size", "lost_state", "model"),
    [
        ((120, 40), "LOST Xid 79", "A100-SXM4-80GB"),
        # At 80 columns the model is its short label, the whole name is in the detail.
        ((80, 24), "LOST +1", "A100-80G"),
    ],
)
async def test_grid_shows_every_host_and_gpu(
    app: GpuTuiApp, size: tuple[int, int], lost_state: str, model: str
) -> None:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert shown(app) == ALL_ROWS
        text = "\n".join(lines(grid(app)))
        assert "gpu01 [a100]" in text
        assert model in text
        assert "NVIDIA A100" not in text
        assert "live 1.2s" in text
        for row in ("gpu02:1", "gpu02:2", "gpu03"):
            app.main.grid.select(GpuRow("gpu02", 1) if row == "gpu02:1" else HostRow(row))
        # Lost GPU: dashes, not a crash; the Xid is flagged.
        lost = grid_line(app, "gpu02:1")
        assert " - " in lost
        assert lost.rstrip().endswith(" " + lost_state)
        assert f" {lost_state}" in screen_text(app)  # on the screen, not only in the grid
        assert "91°C!" in grid_line(app, "gpu02:2")
        down = grid_line(app, "gpu03")
        assert "!! unreachable: connection refused" in down
        # Every line fits the width: nothing wraps.
        assert all(len(line) <= size[0] for line in screen_text(app).splitlines())


async def test_narrow_screen_drops_fan_and_owners_not_state(app: GpuTuiApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        header = lines(grid(app))[0]
        assert "FAN" not in header and "OWNERS" not in header
        assert "STATE" in header and "TEMP" in header and "POWER" in header
    wide = GpuTuiApp(FakeSource(), Config(), clock=fixed_clock)
    async with wide.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        header = lines(grid(wide))[0]
        assert "FAN" in header and "OWNERS" in header and "SM" in header


async def test_fan_not_supported_shows_dash_and_owners_listed(app: GpuTuiApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "alice,bob" in grid_line(app, "gpu01:2")
        fanless = grid_line(app, "gpu01:3")
        assert " - " in fanless and "30%" not in fanless


async def test_hostile_process_name_renders_literally(app: GpuTuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        grid(app).select(GpuRow("gpu01", 2))
        await pilot.pause()
        table = app.main.query_one(ProcessTable)
        commands = [str(table.get_row_at(i)[-1]) for i in range(table.row_count)]
        assert any("[bold]markup[/]" in c for c in commands)
        assert not any("\x1b" in c for c in commands)
        assert "evil --red [bold]markup[/]" in screen_text(app)


async def test_filter_by_user_and_by_model(app: GpuTuiApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"alice")
        await pilot.pause()
        assert app.main.query_text == "alice"
        assert shown(app) == ["gpu01", "gpu01:0", "gpu01:2", "gpu02", "gpu02:2"]
        await pilot.press("escape")
        await pilot.pause()
        assert shown(app) == ALL_ROWS
        await pilot.press("slash", *"3090", "enter")
        await pilot.pause()
        assert shown(app) == ["gpu02", "gpu02:0", "gpu02:1", "gpu02:2", "gpu02:3"]
        assert app.main.grid.has_focus
        assert "filter 3090" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("slash", *"A100 BOB")
        await pilot.pause()
        assert shown(app) == ["gpu01", "gpu01:1", "gpu01:2"]


async def test_filter_matches_pool_and_host(app: GpuTuiApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"gpu03")
        await pilot.pause()
        assert shown(app) == ["gpu03", "gpu03:0", "gpu03:1", "gpu03:2", "gpu03:3"]
        app.main.query_one("#filter", Input).value = "rtx"
        await pilot.pause()
        assert shown(app)[0] == "gpu02" and len(shown(app)) == 5


async def test_sort_cycles_and_reorders(app: GpuTuiApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
        assert "sort:util" in screen_text(app)
        assert shown(app)[:5] == ["gpu01", "gpu01:0", "gpu01:1", "gpu01:2", "gpu01:3"]
        assert shown(app)[5:10] == ["gpu02", "gpu02:2", "gpu02:0", "gpu02:3", "gpu02:1"]
        await pilot.press("s")  # memory used
        await pilot.pause()
        assert shown(app)[5:10] == ["gpu02", "gpu02:2", "gpu02:0", "gpu02:3", "gpu02:1"]
        await pilot.press("s", "s", "s")  # temp, power, free memory
        await pilot.pause()
        assert "sort:free" in screen_text(app)
        assert shown(app)[1] == "gpu01:3"  # the idle A100 has the most free memory
        await pilot.press("g")  # one list across all hosts
        await pilot.pause()
        assert shown(app)[0] == "gpu01:3" and "gpu01" not in shown(app)
        await pilot.press("s")  # back to host order
        await pilot.pause()
        assert "sort:host" in screen_text(app)


async def test_collapse_and_expand_a_host(app: GpuTuiApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert grid(app).cursor_row == HostRow("gpu01")
        await pilot.press("enter")
        await pilot.pause()
        assert shown(app)[:2] == ["gpu01", "gpu02"]
        assert grid_line(app, "gpu01").startswith("▸")
        await pilot.press("right")
        await pilot.pause()
        assert shown(app) == ALL_ROWS
        await pilot.press("down", "left")  # from a GPU row, left folds its host
        await pilot.pause()
        assert shown(app)[:2] == ["gpu01", "gpu02"]
        assert grid(app).cursor_row == HostRow("gpu01")


async def test_cursor_keys_and_click_select(app: GpuTuiApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("end")
        assert grid(app).cursor_row == GpuRow("gpu03", 3)
        await pilot.press("home", "down", "down")
        assert grid(app).cursor_row == GpuRow("gpu01", 1)
        await pilot.press("pagedown")
        assert grid(app).cursor_row == GpuRow("gpu03", 3)
        await pilot.click("#grid", offset=(10, 8))  # header line + 7 rows down
        await pilot.pause()
        assert grid(app).cursor_row == GpuRow("gpu02", 1)
        table = app.main.query_one(ProcessTable)
        assert table.row_count == 0
        assert "fallen off the bus" in screen_text(app)


async def test_help_lists_every_key(app: GpuTuiApp) -> None:
    every = [
        *GpuTuiApp.BINDINGS,
        *MainScreen.BINDINGS,
        *GpuGrid.BINDINGS,
        *ConfirmScreen.BINDINGS,
        *HealthScreen.BINDINGS,
        *ROW_KEYS,
    ]
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = help_text(app)  # the whole list, not what fits on the screen (it scrolls)
        for binding in every:
            assert isinstance(binding, Binding)
            line = f"{key_label(binding.key)}  {binding.tooltip or binding.description}"
            assert line in text, line
        for keys in ("g  Group by host", "j  Next row", "k  Previous row", "Enter Space  Fold"):
            assert keys in text, keys
        assert "r  Reconnect the selected host now" in text
        assert "n Esc  No: cancel" in text and "y  Yes" in text
        assert "←  Collapse host" in text and "→  Expand host" in text
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_theme_keys_and_palette(app: GpuTuiApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.theme == "gputui-dark"
        await pilot.press("t")
        await pilot.pause()
        assert app.theme == "gputui-high-contrast"
        await pilot.press("t")
        assert app.theme == "gputui-light"
        app.theme = "nord"
        await pilot.pause()
        assert app.theme == "nord"
        assert "gputui-light" in app.cycle_themes and "nord" not in app.cycle_themes


def test_theme_argument_beats_config_and_unknown_is_a_clear_error(source: FakeSource) -> None:
    app = GpuTuiApp(source, Config(theme="gputui-light"), theme="gputui-high-contrast")
    assert app.theme == "gputui-high-contrast"
    assert GpuTuiApp(source, Config(theme="gputui-light")).theme == "gputui-light"
    with pytest.raises(ValueError, match=r"unknown theme 'neon'; known themes: gputui-dark, "):
        GpuTuiApp(source, Config(), theme="neon")


async def _select_process(app: GpuTuiApp, pilot: object, row: GpuRow, index: int = 0) -> None:
    grid(app).select(row)
    await pilot.pause()  # type: ignore[attr-defined]
    table = app.main.query_one(ProcessTable)
    table.move_cursor(row=index)
    await pilot.pause()  # type: ignore[attr-defined]


async def test_kill_flow_confirmed_sends_the_signal(app: GpuTuiApp, control: FakeControl) -> None:
    messages: list[Message] = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await pilot.pause()
        await _select_process(app, pilot, GpuRow("gpu01", 0))
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        question = app.screen.question.plain
        assert question == (
            "Send SIGKILL to pid 4242 (alice: python train.py --epochs 90) on gpu01 GPU 0? y/N"
        )
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert control.signals == [("gpu01", "GPU-gpu01-0000-0000-0000-000000000000", 4242, "KILL")]
        assert any(isinstance(m, MainScreen.SignalConfirmed) for m in messages)
        assert [text for _, text in told(app)] == ["sent SIGKILL to pid 4242"]


async def test_kill_flow_declined_sends_nothing(app: GpuTuiApp, control: FakeControl) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await _select_process(app, pilot, GpuRow("gpu01", 2), index=1)
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "pid 6002 (alice: jupyter-kernel)" in app.screen.question.plain
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        await pilot.press("T", "escape", "T", "enter")  # Esc and Enter (on Cancel) decline too
        await pilot.pause()
        assert control.signals == []


async def test_signal_outcome_denied_is_shown(source: FakeSource, control: FakeControl) -> None:
    control.outcome = RequestOutcome(False, "permission denied: pid 5150 belongs to bob", "EPERM")
    app = GpuTuiApp(source, Config(), clock=fixed_clock, control=control)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await _select_process(app, pilot, GpuRow("gpu01", 1))
        await pilot.press("T", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert control.signals == [("gpu01", "GPU-gpu01-0001-0000-0000-000000000000", 5150, "TERM")]
        notes = [text for _, text in told(app)]
        assert "permission denied: pid 5150 belongs to bob" in notes
        note = list(app._notifications)[-1]
        assert note.severity == "error"


async def test_a_read_only_source_says_it_cannot_act(source: FakeSource) -> None:
    app = GpuTuiApp(source, Config(), clock=fixed_clock)  # the fake source is no HostControl
    assert isinstance(app.control, ReadOnly)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await _select_process(app, pilot, GpuRow("gpu01", 1))
        await pilot.press("T", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        note = list(app._notifications)[-1]
        assert told(app)[-1][1] == "this console cannot act on hosts (its data source is read-only)"
        assert note.severity == "error"


def test_the_fleet_is_source_and_control_and_a_given_control_wins() -> None:
    fleet = Fleet(Config())
    assert GpuTuiApp(fleet, Config()).control is fleet
    control = FakeControl()
    assert GpuTuiApp(fleet, Config(), control=control).control is control


async def test_kill_without_a_process_warns(app: GpuTuiApp, control: FakeControl) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        grid(app).select(GpuRow("gpu01", 3))
        await pilot.pause()
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert any("No process selected" in n.message for n in app._notifications)
        assert control.signals == []


async def test_host_going_unreachable_while_others_update(
    app: GpuTuiApp, source: FakeSource
) -> None:
    messages: list[Message] = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await pilot.pause()
        assert "97%" in grid_line(app, "gpu01:0")
        down = source.get("gpu02").with_changes(
            status=HostStatus.UNREACHABLE, message="timed out", next_retry_at=NOW + 16
        )
        source.push(down)
        for seq, util in ((2, 61), (3, 42)):
            source.push(
                source.get("gpu01").with_changes(
                    sample=fakes.sample(seq, NOW, fakes.gpu01_gpus(util0=util)), received_at=NOW
                )
            )
            await pilot.pause()
        await pilot.pause()
        assert "42%" in grid_line(app, "gpu01:0")
        assert "live 0.0s" in grid_line(app, "gpu01")
        text = "\n".join(lines(grid(app)))
        assert "!! unreachable: timed out" in text
        assert "retry in 16s" in text
        assert " 42% " in text
        sampled = [m for m in messages if isinstance(m, HostsSampled)]
        assert {name for m in sampled for name in m.snapshots} == {"gpu01", "gpu02", "gpu03"}
        assert app.model.summary(NOW).hosts_live == 1


async def test_a_burst_of_snapshots_is_one_message_and_the_newest_wins(
    app: GpuTuiApp, source: FakeSource
) -> None:
    messages: list[Message] = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await pilot.pause()
        before = len([m for m in messages if isinstance(m, HostsSampled)])
        for seq, util in ((2, 11), (3, 22), (4, 33)):
            source.push(
                source.get("gpu01").with_changes(
                    sample=fakes.sample(seq, NOW, fakes.gpu01_gpus(util0=util)), received_at=NOW
                )
            )
        source.push(source.get("gpu03").with_changes(received_at=NOW))
        await pilot.pause()
        batches = [m for m in messages if isinstance(m, HostsSampled)][before:]
        assert len(batches) == 1
        assert set(batches[0].snapshots) == {"gpu01", "gpu03"}
        assert " 33% " in grid_line(app, "gpu01:0")


async def test_only_changed_rows_render_again(source: FakeSource, control: FakeControl) -> None:
    # No age tick during the test: on a slow machine one would redraw every host header.
    app = GpuTuiApp(source, Config(), clock=fixed_clock, control=control, tick_interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        g = grid(app)
        before = g.renders
        source.push(
            source.get("gpu01").with_changes(
                sample=fakes.sample(2, NOW, fakes.gpu01_gpus(util0=10)), received_at=NOW
            )
        )
        await until(pilot, lambda: g.renders - before >= 2, "gpu01's changed rows drawn")
        await pilot.pause()
        # The host header and GPU 0 changed; GPUs 1-3 and every other host are cached.
        assert g.renders - before == 2
        before = g.renders
        g.refresh_hosts()
        await pilot.pause()
        assert g.renders - before == 3  # three host headers, no GPU lines


async def test_source_lifecycle_and_worker_failures(source: FakeSource) -> None:
    class Broken(FakeSource):
        async def start(self) -> None:
            raise OSError("no route to host")

    broken = Broken()
    app = GpuTuiApp(broken, Config(), clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        assert notes == ["connecting to the GPU hosts failed: OSError: no route to host"]
    assert broken.closed
    good = GpuTuiApp(source, Config(), clock=fixed_clock)
    async with good.run_test() as pilot:
        await pilot.pause()
        assert source.started
        await pilot.press("q")
    assert source.closed


async def test_bad_user_theme_is_reported_not_fatal(source: FakeSource, tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("name: broken\nprimary: not-a-colour\n")
    app = GpuTuiApp(source, Config(), clock=fixed_clock, theme_dir=tmp_path)
    async with app.run_test() as pilot:
        await pilot.pause()
        notes = [text for _, text in told(app)]
        assert notes == [f"{tmp_path / 'broken.yaml'}: primary: 'not-a-colour' is not a colour"]


async def test_user_theme_with_a_bad_variable_is_skipped_even_when_asked_for(
    source: FakeSource, tmp_path: Path
) -> None:
    # Textual would stop the app with "Error in stylesheet" (and exit 0) on this value.
    (tmp_path / "ugly.yaml").write_text(
        'name: ugly\nprimary: "#336699"\n'
        'variables: {block-cursor-background: "not a colour ;;; }"}\n'
    )
    (tmp_path / "fine.yaml").write_text("name: fine\nprimary: '#336699'\n")
    app = GpuTuiApp(source, Config(), theme="ugly", clock=fixed_clock, theme_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.theme == "gputui-dark"
        assert "ugly" not in app.available_themes and "ugly" not in app.cycle_themes
        notes = told(app)
        assert notes == [
            (
                "theme skipped",
                f"{tmp_path / 'ugly.yaml'}: variables.block-cursor-background:"
                " 'not a colour ;;; }' is not a colour",
            ),
            ("theme skipped", "theme 'ugly' cannot be used; using gputui-dark"),
        ]
        for _ in range(len(app.cycle_themes) + 1):  # round every theme `t` offers
            await pilot.press("t")
            await pilot.pause()
        assert app.is_running and isinstance(app.screen, MainScreen)
        assert "fine" in app.cycle_themes
        assert "gpu01" in screen_text(app)


async def test_4096_gpus_render_only_what_is_visible() -> None:
    template = fakes.cluster()[0]
    big = [
        template.with_changes(
            name=f"n{i:03d}",
            hello=fakes.hello(f"n{i:03d}", "NVIDIA H100 80GB HBM3", 8, 81_559, 700.0),
            sample=fakes.sample(1, NOW, fakes.gpu01_gpus() + fakes.gpu01_gpus()),
        )
        for i in range(512)
    ]
    source = FakeSource(big)
    app = GpuTuiApp(source, Config(), clock=fixed_clock)
    async with app.run_test(size=(120, 40)) as pilot:
        g = grid(app)
        # The hosts come in batches (a loaded machine takes more than one pause).
        await until(pilot, lambda: len(g.rows) == 512 * 9, "every host's rows")
        assert " 97% " in grid_line(app, "n000:0")
        before = g.renders
        for seq in (2, 3):
            for snapshot in big:
                source.push(
                    snapshot.with_changes(
                        sample=fakes.sample(seq, NOW, fakes.gpu01_gpus(util0=seq) * 2)
                    )
                )
            await until(
                pilot,
                lambda seq=seq: all(e.gpus[0].util == seq for e in app.model.hosts.values()),
                f"round {seq} applied to every host",
            )
            await pilot.pause()
        redrawn = g.renders - before
        # The screen shows the newest data: the grid was told of the change and redrew.
        visible = lines(g)
        assert visible[1].startswith("▾ n000") and visible[2].lstrip().startswith("0 ")
        assert " 3% " in visible[2] and " 97% " not in "\n".join(visible)
        # Two full rounds of 4,096 changed GPUs redraw only lines that were on screen.
        assert 0 < redrawn <= 2 * g.size.height


async def test_a_big_burst_is_applied_in_slices_and_the_newest_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(intake, "SLICE_S", 0.0)  # every 32 hosts, let input through
    template = fakes.cluster()[0]
    hosts = [template.with_changes(name=f"n{i:03d}") for i in range(100)]
    source = FakeSource(hosts)
    app = GpuTuiApp(source, Config(), clock=fixed_clock)
    messages: list[Message] = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await pilot.pause()
        before = len([m for m in messages if isinstance(m, HostsSampled)])
        for snapshot in hosts:
            source.push(snapshot.with_changes(sample=fakes.sample(2, NOW, fakes.gpu01_gpus(11))))
        # A newer snapshot of a host in the burst's last slice, while the burst is applied.
        await pilot.press("down")
        source.push(hosts[99].with_changes(sample=fakes.sample(3, NOW, fakes.gpu01_gpus(77))))

        def settled() -> bool:  # every host got the burst and no slice is left to apply
            return not app.intake.pending and all(
                entry.gpus[0].util != 97 for entry in app.model.hosts.values()
            )

        await until(pilot, settled, "the burst to be applied")
        await pilot.pause()
        assert len([m for m in messages if isinstance(m, HostsSampled)]) - before >= 4
        utils = {name: entry.gpus[0].util for name, entry in app.model.hosts.items()}
        assert utils == {f"n{i:03d}": 77 if i == 99 else 11 for i in range(100)}
        assert grid(app).cursor_row == GpuRow("n000", 0)
        assert " 11% " in grid_line(app, "n000:0")


async def test_r_retries_the_selected_host_now(app: GpuTuiApp, control: FakeControl) -> None:
    messages: list[Message] = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await pilot.pause()
        grid(app).select(GpuRow("gpu03", 2))  # a GPU of the unreachable host
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert control.retries == ["gpu03"]
        assert [n.message for n in app._notifications] == ["retrying gpu03 now"]
        assert any(isinstance(m, MainScreen.RetryRequested) for m in messages)
        grid(app).select(HostRow("gpu01"))  # live: nothing to retry
        await pilot.press("r")
        await pilot.pause()
        assert control.retries == ["gpu03"]
        assert "gpu01 is live: nothing to retry" in [n.message for n in app._notifications]


async def test_r_with_nothing_selected_retries_every_host() -> None:
    control = FakeControl()
    app = GpuTuiApp(FakeSource([]), Config(), clock=fixed_clock, control=control)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert control.retries == [None]
        assert [n.message for n in app._notifications] == ["retrying all hosts now"]


async def test_narrow_process_table_gives_the_command_room(app: GpuTuiApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await _select_process(app, pilot, GpuRow("gpu01", 0))
        text = await shows(pilot, app, "python train.py --epo")  # was cut to "python -"
        assert "59.6G" in text and "61000M" not in text  # as the grid spells memory
        assert " AGE " not in text  # the age gives way before the command does


def test_a_hung_up_terminal_is_noticed() -> None:
    """After a hang-up every tty call fails with EIO: that is how the console knows its
    terminal is gone when no SIGHUP reaches it."""
    import os
    import pty

    from gputui.ui.terminal_exit import _terminal_alive

    master, slave = pty.openpty()
    try:
        assert _terminal_alive(slave)
        os.close(master)
        assert not _terminal_alive(slave)
    finally:
        os.close(slave)


KEY_CHANGED = (
    "HOST KEY CHANGED for gpu03: server presented "
    "SHA256:Zr8qWmF3xO1y0m2qTt6mJ3y1o8nVJ1uQv0wq9m0aF8s, ~/.ssh/known_hosts expects "
    "SHA256:0f3kQ9bBq7dE2yq1Hq0eWm5rX1o7t9uVz3m8xL2nK4c; not connecting"
)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_changed_host_key_shows_both_fingerprints_whole(size: tuple[int, int]) -> None:
    snaps = fakes.cluster()
    snaps[2] = snaps[2].with_changes(status=HostStatus.HOST_KEY_CHANGED, message=KEY_CHANGED)
    app = GpuTuiApp(FakeSource(snaps), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        grid(app).select(HostRow("gpu03"))
        fingerprints = re.findall(r"SHA256:\S{43}", KEY_CHANGED)
        assert len(fingerprints) == 2
        # Each on one line, not broken across two (once the pane has its new width).
        await until(
            pilot, lambda: all(f in screen_text(app) for f in fingerprints), "both fingerprints"
        )
        assert app.main.query_one("#processes").display is False
        grid(app).select(GpuRow("gpu01", 0))  # a GPU again: its processes are back
        await until(pilot, lambda: "python train.py" in screen_text(app), "the processes")


async def test_the_panes_titles_follow_the_cursor_on_screen(app: GpuTuiApp) -> None:
    """The titles are repainted alone (a line, not the pane): what shows must follow."""
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for row, processes, detail in (
            (GpuRow("gpu01", 0), "processes on gpu01 GPU 0", "gpu01 GPU 0"),
            (GpuRow("gpu02", 2), "processes on gpu02 GPU 2", "gpu02 GPU 2"),
            (HostRow("gpu01"), "processes on gpu01", "gpu01"),
        ):
            grid(app).select(row)
            await until(
                pilot,
                lambda p=processes, d=detail: (
                    f"─{p}─" in screen_text(app) and f"─{d}─" in screen_text(app)
                ),
                f"the titles {processes!r} and {detail!r} on screen",
            )


async def test_the_summary_counts_a_host_that_went_down_between_ticks(
    source: FakeSource,
) -> None:
    """A host retrying goes connecting, then unreachable, within a second: the summary
    must show where it ended, not where it was when the last tick happened to come."""
    app = GpuTuiApp(source, Config(), clock=fixed_clock, tick_interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        # gpu02's lost and hot GPUs, and gpu03 down.
        assert "!! 3 problems" in screen_text(app)
        gpu01 = source.get("gpu01")
        source.push(gpu01.with_changes(status=HostStatus.CONNECTING, message="connecting"))
        await pilot.pause()
        source.push(gpu01.with_changes(status=HostStatus.UNREACHABLE, message="refused"))
        await until(pilot, lambda: "!! 4 problems" in screen_text(app), "gpu01 counted down")


@pytest.mark.parametrize("gone", ["#summary", "#processes", "#detail", "#side"])
async def test_a_tick_while_the_app_closes_is_harmless(app: GpuTuiApp, gone: str) -> None:
    """The once-a-second timer can fire while the app is being taken down, after some
    of the main screen's widgets are gone, in whatever order Textual removes them (CI
    saw NoMatches on the summary bar, then on the process table)."""
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.main.grid.cursor_row, HostRow)  # a tick re-shows it
        await app.main.query_one(gone).remove()
        app.main.tick()  # nothing to draw on: nothing happens
