"""Generated hostile helper output through the real grid, detail pane and process table.

Properties: nothing raises; every line the grid draws is exactly the screen's width
in cells (wide, zero-width and combining text included); no ESC, C0 or C1 character
reaches what is drawn.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import hostile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len, get_character_cell_size
from textual.strip import Strip
from ui_fakes import NOW, FakeSource, fixed_clock

from gputui.common.text import clean
from gputui.config.models import Config
from gputui.health import Flag
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.model import ClusterModel
from gputui.ui.widgets.grid_columns import plan_columns
from gputui.ui.widgets.grid_render import (
    Palette,
    _fitting,
    column_header,
    gpu_line,
    host_line,
)
from gputui.wire.decode import ProtocolError, decode_helper_line
from gputui.wire.messages import Event, Hello, Sample

WIDTHS = (80, 200)


def decoded(obj: Any, kind: type[Any]) -> Any:
    try:
        message = decode_helper_line(hostile.line(obj))
    except ProtocolError:
        return None
    return message if isinstance(message, kind) else None


@st.composite
def snapshots(draw: st.DrawFn, name: str = "gpu01") -> HostSnapshot:
    hello = decoded(draw(hostile.hello()), Hello)
    sample = decoded(draw(hostile.sample(seq=st.integers(0, 10**6))), Sample)
    events = tuple(
        e for e in (decoded(draw(hostile.event()), Event) for _ in range(draw(st.integers(0, 3))))
        if e is not None
    )  # fmt: skip
    status = draw(st.sampled_from(list(HostStatus)))
    return HostSnapshot(
        name=name,
        address="10.0.0.1",
        status=status,
        message=clean(draw(hostile.hostile_text), 200),  # as the fleet cleans its messages
        pool="a100",
        hello=hello,
        sample=sample,
        received_at=NOW - draw(st.floats(0, 1e6)),
        next_retry_at=draw(st.one_of(st.none(), st.floats(NOW - 1e6, NOW + 1e6))),
        events=events,
    )


def cells(strip: Strip) -> list[str]:
    """The line cell by cell (a wide character, then ""; marks stay on their cell)."""
    out: list[str] = []
    for char in "".join(segment.text for segment in strip):
        size = get_character_cell_size(char)
        if size == 0 and out:
            out[-1] += char
        elif size:
            out += [char] + [""] * (size - 1)
    return out


def assert_columns(strip: Strip, reference: Strip, header: str) -> None:
    """The numbers and the state sit where the header says, whatever text came before."""
    util, state = header.index("UTIL"), header.index("STATE")
    end = header.index("OWNERS") if "OWNERS" in header else state
    line, ref = cells(strip), cells(reference)
    assert line[util:end] == ref[util:end], ("".join(line), "".join(ref))
    assert line[state:] == ref[state:], ("".join(line), "".join(ref))


def measured(strip: Strip) -> int:
    return sum(cell_len(segment.text) for segment in strip)


def assert_line(strip: Strip, width: int) -> None:
    text = "".join(segment.text for segment in strip)
    assert measured(strip) == width, (width, measured(strip), text)
    assert hostile.is_safe_text(text), repr(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.booleans(), st.booleans())
def test_every_grid_line_is_the_screen_width_and_safe(
    snap: HostSnapshot, grouped: bool, held: bool
) -> None:
    model = ClusterModel()
    model.apply(snap)
    palette = Palette.plain()
    for width in WIDTHS:
        cols = plan_columns(width, grouped, host_w=len(snap.name), held=held)
        for row in model.rows(grouped=grouped):
            if isinstance(row, HostRow):
                entry = model.hosts[row.host]
                strip = host_line(entry, model, cols, palette, NOW, folded=False)
            else:
                gpu = model.gpu(row)
                assert gpu is not None
                strip = gpu_line(gpu, model, cols, palette, NOW)
                info = gpu.info.model_copy(update={"name": "ref"}) if gpu.info else None
                plain = replace(gpu, info=info, owners=())
                reference = gpu_line(plain, model, cols, palette, NOW)
                assert_columns(strip, reference, column_header(cols, palette).text)
            assert_line(strip, width)


async def _look_everywhere(snaps: list[HostSnapshot], size: tuple[int, int]) -> None:
    app = GpuTuiApp(FakeSource(snaps), Config(), clock=fixed_clock)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        grid = app.main.grid
        rows = list(grid.rows)
        for row in rows:
            grid.select(row)
            await pilot.pause()
            for strip in app.screen._compositor.render_strips():
                assert_line(strip, size[0])
        if any(isinstance(row, GpuRow) for row in rows):
            await pilot.press("enter")  # the process table takes the keys
            await pilot.pause()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(snapshots(), min_size=1, max_size=2), st.sampled_from(WIDTHS))
def test_the_whole_screen_stays_in_shape_through_pilot(
    snaps: list[HostSnapshot], width: int
) -> None:
    named = [s.with_changes(name=f"gpu{i:02d}") for i, s in enumerate(snaps)]
    asyncio.run(_look_everywhere(named, (width, 40)))


def test_flags_that_do_not_fit_are_counted_not_cut() -> None:
    flags = [Flag("LOST", "crit"), Flag("Xid 79", "crit"), Flag("ECC", "warn")]
    assert _fitting(flags, 20) == flags
    assert _fitting(flags, 15) == flags  # "LOST Xid 79 ECC" exactly
    assert _fitting(flags, 14) == flags[:2]  # "LOST Xid 79 +1"
    assert _fitting(flags, 8) == flags[:1]  # "LOST +2"
    assert _fitting(flags, 3) == flags[:1]  # the worst always, cut if it must be
