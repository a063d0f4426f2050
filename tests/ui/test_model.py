"""The model and the line renderings, without an app."""

from __future__ import annotations

import dataclasses

import pytest
import ui_fakes as fakes
from rich.cells import cell_len
from ui_fakes import NOW

from gputui.config.models import HealthThresholds
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui import format as fmt
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.head.view import Holder
from gputui.ui.model import SORT_KEYS, ClusterModel
from gputui.ui.widgets.grid_columns import plan_columns
from gputui.ui.widgets.grid_render import Palette, column_header, gpu_line, host_line
from gputui.ui.widgets.process_table import plan_columns as plan_process_columns
from gputui.wire import decode, messages


def model() -> ClusterModel:
    m = ClusterModel(HealthThresholds())
    for snapshot in fakes.cluster():
        m.apply(snapshot)
    return m


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.42, "0.4s"),
        (12, "12s"),
        (185, "3m05s"),
        (700, "11m"),
        (11_520, "3h12m"),
        (180_000, "2d02h"),
    ],
)
def test_ages(seconds: float | None, text: str) -> None:
    assert fmt.data_age(seconds) == text


def test_number_formats() -> None:
    assert fmt.mem_pair(12_595, 81_920) == "12.3/80.0G"
    assert fmt.mem_pair(None, 24_576) == "-/24.0G"
    assert fmt.mem_pair(120_000, 143_771) == "117/140G"
    assert fmt.power_pair(245.4, 400) == "245/400W"
    assert fmt.power_pair(None, None) == "-"
    assert fmt.short_model("NVIDIA GeForce RTX 3090") == "RTX 3090"
    assert fmt.short_model(None) == "unknown"
    assert fmt.retry_in(NOW + 8, NOW) == "retry in 8s"
    assert [fmt.mib(v) for v in (None, 812, 4096, 61_000, 150_000)] == [
        "-",
        "812M",
        "4.0G",
        "59.6G",
        "146G",
    ]


def test_process_columns_give_way_to_the_command() -> None:
    wide, command_w, _ = plan_process_columns(64, gpus=False, containers=False)
    assert [title for title, _ in wide] == ["PID", "USER", "MEM", "AGE"] and command_w >= 24
    narrow, command_w, _ = plan_process_columns(48, gpus=False, containers=False)
    assert [title for title, _ in narrow] == ["PID", "USER", "MEM"] and command_w >= 20
    tight, command_w, _ = plan_process_columns(44, gpus=True, containers=True)
    assert ("USER", 6) in tight and command_w >= 12


def test_connecting_host_does_not_repeat_its_status() -> None:
    m = model()
    cols, palette = plan_columns(118), Palette.plain()
    for message, shown in (
        ("connecting", "connecting  "),
        ("Connecting…", "connecting  "),
        ("resolving gpu01.lab", "connecting: resolving gpu01.lab"),
    ):
        m.apply(
            m.hosts["gpu01"].snapshot.with_changes(status=HostStatus.CONNECTING, message=message)
        )
        line = host_line(m.hosts["gpu01"], m, cols, palette, NOW, folded=False).text
        assert shown in line
        assert "connecting: connecting" not in line.lower()


def test_change_tracks_only_changed_gpus() -> None:
    m = model()
    snapshot = fakes.cluster()[0].with_changes(
        sample=fakes.sample(2, NOW, fakes.gpu01_gpus(util0=5))
    )
    change = m.apply(snapshot)
    assert change.gpus == frozenset({0}) and not change.structure
    assert m.apply(snapshot).gpus == frozenset()
    down = snapshot.with_changes(status=HostStatus.UNREACHABLE)
    assert m.apply(down).gpus == frozenset({0, 1, 2, 3})  # dimmed now


def test_history_is_bounded_and_one_point_per_sample() -> None:
    m = model()
    first = fakes.cluster()[0]
    for seq in range(2, 400):
        m.apply(first.with_changes(sample=fakes.sample(seq, NOW + seq, fakes.gpu01_gpus())))
        m.apply(first.with_changes(sample=fakes.sample(seq, NOW + seq, fakes.gpu01_gpus())))
    history = m.history(GpuRow("gpu01", 0))
    assert history is not None
    assert len(history.util) == 300
    assert history.util[-1] == 97


def test_rows_filter_and_sort() -> None:
    m = model()
    assert m.rows("carol") == [HostRow("gpu02"), GpuRow("gpu02", 0)]
    assert m.rows("h100")[0] == HostRow("gpu03")
    assert m.rows("nobody") == []
    util = SORT_KEYS[1]
    flat = m.rows(sort=util, grouped=False)
    assert flat[:3] == [GpuRow("gpu01", 0), GpuRow("gpu02", 2), GpuRow("gpu01", 1)]
    assert flat[-1] == GpuRow("gpu02", 1)  # no reading sorts last
    assert m.rows(collapsed=["gpu01"])[:2] == [HostRow("gpu01"), HostRow("gpu02")]


def test_flags_and_summary() -> None:
    m = model()
    lost = m.gpu(GpuRow("gpu02", 1))
    hot = m.gpu(GpuRow("gpu02", 2))
    assert lost is not None and hot is not None
    assert [f.label for f in m.flags(lost, NOW)] == ["LOST", "Xid 79"]
    assert [f.label for f in m.flags(lost, NOW + 3600)] == ["LOST"]  # Xid no longer recent
    assert [f.label for f in m.flags(hot, NOW)] == ["THRTL"]
    summary = m.summary(NOW)
    assert (summary.hosts_live, summary.hosts_total, summary.gpus) == (2, 3, 12)
    assert summary.problems == 3  # gpu03 unreachable, GPU lost, GPU hot
    xid_only = fakes.cluster()[1].with_changes(sample=fakes.sample(2, NOW, fakes.gpu02_gpus()[:1]))
    m.apply(xid_only.with_changes(events=(fakes.xid_event("gpu02", 0, 13, 95, "Graphics"),)))
    assert m.summary(NOW).problems == 2  # gpu03, and gpu02's GPU 0 with a recent Xid
    totals = m.hosts["gpu02"].totals
    assert (totals.problem_gpus(NOW), totals.problem_gpus(NOW + 3600)) == (1, 0)  # Xid ages out


def test_lines_without_colour_keep_severity_readable() -> None:
    m = model()
    cols = plan_columns(118)
    palette = Palette.plain()
    hot = m.gpu(GpuRow("gpu02", 2))
    assert hot is not None
    assert "91°C!" in gpu_line(hot, m, cols, palette, NOW).text
    down = host_line(m.hosts["gpu03"], m, cols, palette, NOW, folded=False).text
    assert "!! unreachable" in down
    stale = m.hosts["gpu01"].snapshot.with_changes(received_at=NOW - 30)
    m.apply(stale)
    assert "! stale 30s" in host_line(m.hosts["gpu01"], m, cols, palette, NOW, folded=True).text


@pytest.mark.parametrize("width", [60, 79, 100, 119, 140, 199, 260])
def test_every_line_fits_its_width(width: int) -> None:
    m = model()
    cols = plan_columns(width)
    palette = Palette.plain()
    for gpu in m.iter_gpus():
        assert cell_len(gpu_line(gpu, m, cols, palette, NOW).text) == width
    for entry in m.hosts.values():
        assert cell_len(host_line(entry, m, cols, palette, NOW, folded=False).text) == width


@pytest.mark.parametrize("width", [80, 100, 140])
def test_a_held_gpu_says_so_in_an_80_column_pane_too(width: int) -> None:
    m = model()
    gpu = next(iter(m.iter_gpus()))
    m.set_holders({gpu.uuid: Holder("job", 12, "alice", NOW - 300, "train")})
    cols = plan_columns(width, held=True)
    palette = Palette.plain()
    header = column_header(cols, palette).text
    line = gpu_line(gpu, m, cols, palette, NOW).text
    assert "HELD" in header and cell_len(line) == width
    at = header.index("HELD")
    assert line[at:].startswith("j12 ali"), line
    if width >= 100:
        assert "j12 alice 5m" in line, line


def test_missing_everything_does_not_crash() -> None:
    m = ClusterModel()
    bare = decode.decode_helper_line(
        '{"type":"sample","seq":1,"time":1,"gpus":[{"index":0,"uuid":"GPU-x"}]}'
    )
    assert isinstance(bare, messages.Sample)
    m.apply(HostSnapshot(name="h", address="h", status=HostStatus.LIVE, sample=bare))
    m.apply(HostSnapshot(name="empty", address="e"))
    gpu = m.gpu(GpuRow("h", 0))
    assert gpu is not None
    line = gpu_line(gpu, m, plan_columns(120), Palette.plain(), NOW).text
    assert "unknown" in line and "-" in line
    assert m.rows() == [HostRow("h"), GpuRow("h", 0), HostRow("empty")]


def test_rows_for_4096_gpus_filter_and_sort_within_each_host() -> None:
    """What the grid shows for a filter and a sort at 4,096 GPUs (bench/model_rows.py
    measures how long it takes)."""
    m = ClusterModel()
    hosts = [fakes.cluster()[0].with_changes(name=f"n{i:03d}") for i in range(1024)]
    for snapshot in hosts:
        m.apply(snapshot)
    assert sum(1 for _ in m.iter_gpus()) == 4096
    # alice has GPU 0 (97 %, 60.5 G used) and GPU 2 (12 %, 7.8 G; shared with bob).
    names = [f"n{i:03d}" for i in range(1024)]
    by_util = [r for n in names for r in (HostRow(n), GpuRow(n, 0), GpuRow(n, 2))]
    by_free = [r for n in names for r in (HostRow(n), GpuRow(n, 2), GpuRow(n, 0))]
    assert SORT_KEYS[1].name == "util" and SORT_KEYS[5].name == "free"
    assert m.rows("alice", SORT_KEYS[1]) == by_util
    assert m.rows("alice", SORT_KEYS[5]) == by_free


def test_memory_held_by_no_process_is_flagged() -> None:
    from gputui.config.models import HealthThresholds
    from gputui.health import gpu_flags, has_standing_problem
    from gputui.wire.messages import GpuSample, ProcessSample

    health = HealthThresholds()
    held = GpuSample(index=0, uuid="GPU-1", mem_used_mib=20480, mem_total_mib=81920)
    assert [f.label for f in gpu_flags(held, (), 0.0, health)] == ["NOPROC"]
    assert has_standing_problem(held, health)
    owned = dataclasses.replace(held, processes=(ProcessSample(pid=42, gpu_mem_mib=20000),))
    idle = GpuSample(index=0, uuid="GPU-1", mem_used_mib=300, mem_total_mib=81920)
    for sample in (owned, idle):
        assert gpu_flags(sample, (), 0.0, health) == []
        assert not has_standing_problem(sample, health)
