"""The console in Chinese (``LANG=zh_CN.UTF-8``), beyond the grid: the detail pane (a
GPU with processes, one the head flags ROGUE, a fenced one, an unreachable host), the
health view with the problems of the health tests' fault fixtures, the force-free
steps and verdicts, the summary bar, and the refusals and toasts of those screens.

Each shows no English a translation should have replaced (``english_words``; the
words allowed are the test's own data: host, user and command names, and what the
helper or the head said in their own words). The health and process tables keep
their columns in line in Chinese at 80 and 200 columns.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter
from test_health_screen import board as fault_board
from test_snapshots import make_app, select_alice
from textual.widgets import DataTable, Static
from ui_fakes import NOW, fixed_clock, gpu01_gpus, process, sample
from ui_helpers import grid_line, screen_text, steady, until

from gputui.common import i18n
from gputui.common.text import cells
from gputui.config.models import HealthThresholds
from gputui.health import outside
from gputui.health.board import HealthBoard
from gputui.health.words import TEMPLATES, shown
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow, HostRow
from gputui.ui.head.claim_plan import ClaimPlan
from gputui.ui.head.flags import by_gpu, parse_flags
from gputui.ui.head.view import Holder
from gputui.ui.model import ClusterSummary
from gputui.ui.screens.forcefree import ForceFreeScreen
from gputui.ui.screens.health import HealthScreen
from gputui.ui.widgets.detail import DetailPane, wrap_cells
from gputui.ui.widgets.process_table import ProcessTable
from gputui.ui.widgets.summary import SummaryBar, head_forms
from gputui.wire.messages import GpuSample, Hello, Sample

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
from untranslated import english_words

COMMAND_WORDS = (
    # Commands and flags a line tells a person to run, as they are typed.
    "gputui", "unfence", "undrain", "release", "reason", "nvidia-smi", "fuser",
    "nvidia-persistenced", "nvidia-fabricmanager", "systemctl", "status", "ssh-keyscan",
    "known_hosts", "nvidia", "dev", "run",
    # Names a Chinese console keeps as they are (as ``ALWAYS`` keeps GPU and Xid).
    "NVSwitch", "BIOS", "PSU", "CRC", "GSP", "RPC", "NVDEC", "NVENC", "C2C", "RMA", "SXid",
)  # fmt: skip
FIXTURE_WORDS = {
    # The fake cluster's own data: hosts, users, commands, models, the helper.
    "gpu", "GPU-gpu", "alice", "bob", "carol", "dave", "python", "train.py",
    "torchrun", "jupyter", "eval.py", "render", "A100-SXM4-80GB", "RTX", "HBM3",
    "GeForce", "python3", "fake", "cuda", "gtu_bob", "rogue.py", "nccl",
    # What the fixtures' hosts said in their own words (the fleet's, the driver's).
    "connection", "refused", "has", "fallen", "off", "the", "bus",
}  # fmt: skip


def untranslated(text: str, *allowed: str) -> list[str]:
    return english_words(text, FIXTURE_WORDS | set(allowed))


def detail_text(app: GpuTuiApp) -> str:
    body = app.main.query_one("#detail-text", Static).render()
    title = app.main.query_one(DetailPane).border_title or ""
    return f"{title}\n{getattr(body, 'plain', body)}"


def process_text(app: GpuTuiApp) -> str:
    table = app.main.query_one(ProcessTable)
    titles = " ".join(str(column.label) for column in table.columns.values())
    return f"{table.border_title}\n{titles}"


ROGUE_FLAG: dict[str, Any] = {
    "host": "gpu01", "gpu_uuid": "", "gpu_index": 1, "pid": 4242, "uid": 1003,
    "user": "gtu_bob", "name": "python rogue.py", "kind": "no-allocation",
    "since": NOW - 300, "signal_at": NOW + 240, "next_signal": "TERM", "signalled": None,
}  # fmt: skip


async def test_the_detail_pane_of_a_gpu_with_processes_is_chinese(chinese: None) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await select_alice(pilot)
        text = detail_text(app)
        assert "型号" in text and "利用率" in text and "事件" in text, text
        assert not untranslated(text + "\n" + process_text(app)), text
        # The labels' column is padded by display cells: the values start in line.
        for label in ("型号", "UUID", "驱动", "频率", "降频", "事件"):
            line = next(line for line in text.splitlines() if line.startswith(label))
            padded = re.match(r"\S+(?: ID)?\s+", line)
            assert padded is not None and cells(padded.group()) == 9, line


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_detail_pane_says_why_a_rogue_process_is_flagged(
    chinese: None, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        gpu = app.model.gpu(GpuRow("gpu01", 1))
        assert gpu is not None
        flags = parse_flags([{**ROGUE_FLAG, "gpu_uuid": gpu.uuid}])
        rows = app.model.set_owner_flags(by_gpu(flags))
        rows += app.model.set_holders({gpu.uuid: Holder("claim", 7, "bob", NOW - 600, "")})
        app.main.holders_changed(rows)
        app.main.enable_scheduler()
        assert app.main.grid.select(GpuRow("gpu01", 1))
        await until(pilot, lambda: "越权" in detail_text(app), "the flagged line")
        await steady(pilot, app)  # the pane grows to the wrapped flag at the next layout
        text = detail_text(app)
        joined = "".join(text.split())
        assert "已标记" in text and "此GPU上没有gtu_bob的作业或认领" in joined, text
        # Wrapped by display cells at the pane's width, never cut: it ends with when.
        drawn = region_text(app, app.main.query_one(DetailPane).region)
        assert "4m后发送SIGTERM" in "".join(drawn.split()), drawn
        assert "越权" in grid_line(app, "gpu01:1"), grid_line(app, "gpu01:1")
        assert not untranslated(text + "\n" + grid_line(app, "gpu01:1")), text


async def test_a_fenced_gpu_and_an_unreachable_host_are_chinese(chinese: None) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        gpu = app.model.gpu(GpuRow("gpu02", 2))
        assert gpu is not None
        app.main.holders_changed(app.model.set_head_states({gpu.uuid: "unhealthy"}))
        assert app.main.grid.select(GpuRow("gpu02", 2))
        await until(pilot, lambda: "gpu02 GPU 2" in detail_text(app), "the fenced GPU")
        line = grid_line(app, "gpu02:2")
        assert "隔离" in line and "FENCE" not in line, line
        assert not untranslated(detail_text(app) + "\n" + line)
        assert app.main.grid.select(HostRow("gpu03"))
        await until(pilot, lambda: "不可达" in detail_text(app), "the host's detail")
        text = detail_text(app) + "\n" + grid_line(app, "gpu03")
        assert "状态" in text and "后重试" in text, text
        assert not untranslated(text, "10.0.0.3", "pidfd"), text


async def test_the_summary_bar_is_chinese_in_each_of_its_forms(chinese: None) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        bar = app.main.query_one(SummaryBar)
        summary = ClusterSummary(
            hosts_live=2, hosts_total=3, gpus=12, busy=5, mem_used_mib=90_000,
            mem_total_mib=400_000, problems=2, free=4,
        )  # fmt: skip
        seen = []
        for head, problem in ((head_forms(4, 2, 1), False), (("调度主节点不可达 (x)",), True)):
            for width in (200, 120, 80, 60, 40):
                bar.show(
                    summary, now=NOW, sort="util", query="alice", grouped=False,
                    head=head, head_problem=problem,
                )  # fmt: skip
                await pilot.resize_terminal(width, 24)
                await pilot.pause()
                seen.append(bar.render().plain)
        text = "\n".join(seen)
        assert "2 个问题" in text and "空闲" in text and "排序" in text, text
        assert not untranslated(text, "x"), text


def _fault_host() -> HostSnapshot:
    """A host whose one card shows several faults at once, and a helper that failed
    on another host: each kind of problem line the health checks write."""
    gpu = TypeAdapter(GpuSample).validate_python(
        {
            "index": 0, "uuid": "GPU-c0", "health_read": True, "ecc_uncorrected": 3,
            "remap_failed": True, "retired_dbe": 80, "pcie_gen": 3, "pcie_width": 8,
            "util_gpu": 99, "pcie_replays": 500, "temp_c": 86,
            "throttle": ["hw_slowdown", "sw_thermal", "sw_power_cap"],
            "fabric_state": "completed", "fabric_status": "NV_ERR_TIMEOUT",
            "errors": {"nvlinks": "NotSupported", "persistence": "Unknown"},
        }
    )  # fmt: skip
    from gputui.wire.messages import GpuInfo

    info = GpuInfo(index=0, uuid="GPU-c0", name="NVIDIA A100-SXM4-80GB", pcie_max_gen=4,
                   pcie_max_width=16, temp_slowdown_c=88)  # fmt: skip
    return HostSnapshot(
        name="gpu04",
        address="gpu04",
        status=HostStatus.LIVE,
        hello=Hello(protocol=1, helper_version="t", hostname="gpu04", gpus=(info,)),
        sample=Sample(seq=1, time=NOW, gpus=(gpu,)),
        received_at=NOW,
    )


def problem_board() -> HealthBoard:
    """The health tests' fault board, one more host of many faults, and the head's
    findings (a fence, a drain, a rogue process, idle jobs and claims)."""
    b = fault_board()
    b.observe(_fault_host(), NOW)
    b.observe(HostSnapshot(name="gpu05", address="gpu05", status=HostStatus.HOST_KEY_CHANGED), NOW)
    b.set_outside(
        [
            outside.fenced("gpu02", 0, "GPU-b0", "Xid 79: GPU has fallen off the bus"),
            outside.drained("gpu02", 1, "GPU-b1", ""),
            outside.process_flag("gpu01", 1, "GPU-a1", 4242, "bob", "python", "no-allocation"),
            outside.process_flag("gpu01", 0, "GPU-a0", 77, "carol", "render", "x"),
            outside.idle_job("gpu01", 41, "alice", 7200),
            outside.idle_claim("gpu01", 7, "bob", 4000, release_in_s=600),
            outside.idle_claim("gpu01", 8, "dave", 4000, release_in_s=None),
        ],
        NOW,
    )
    return b


def _health_text(app: GpuTuiApp) -> tuple[str, DataTable[Any]]:
    screen = app.screen
    assert isinstance(screen, HealthScreen)
    table = screen.query_one("#health-table", DataTable)
    status = str(screen.query_one("#health-status", Static).render())
    return status, table


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_health_view_is_chinese_and_its_table_lines_up(
    chinese: None, size: tuple[int, int]
) -> None:
    board = problem_board()
    kinds = {p.finding.code.split("-")[0] for p in board.problems()}
    assert len(kinds) >= 12, kinds  # many kinds of problem, not one
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await app.push_screen(HealthScreen(board, clock=fixed_clock))
        await pilot.pause()
        status, table = _health_text(app)
        assert "严重" in status and "未检查" in status, status
        texts = [status]
        for row in range(table.row_count):  # every problem's full detail, in turn
            table.move_cursor(row=row, animate=False)
            await pilot.pause()
            texts.append(str(app.screen.query_one("#health-detail", Static).render()))
        allowed = ("gpu04", "gpu05", "NV_ERR_TIMEOUT", *COMMAND_WORDS)
        for text in texts:
            assert not untranslated(text, *allowed), text
        # The table: each row's cells start where the header's titles do, in cells.
        words = ("级别", "严重", "警告", "提示")
        lines = [line for line in screen_text(app).splitlines() if line.strip()[:2] in words]
        assert len(lines) > 5, lines
        header = next(line for line in lines if "级别" in line)
        titles = ("级别", "主机", "问题", "首次", "次数", "确认") + (
            ("最近",) if size[0] > 120 else ()
        )
        assert all(f" {title} " in header for title in titles), header  # whole, none cut
        assert "SEV" not in header
        starts = _starts(header)
        for line in lines[1:]:
            if "级别" in line:
                continue
            assert cells(line) == cells(header), (line, header)
            for start in starts[1:]:
                assert line[: _index_at(line, start)].endswith(" "), (line, header)


def region_text(app: GpuTuiApp, region: Any) -> str:
    """What the terminal shows inside ``region`` (a modal's dialog), line by line."""
    out = []
    for line in screen_text(app).splitlines()[region.y : region.bottom]:
        start, end = _index_at(line, region.x), _index_at(line, region.right)
        out.append(line[start:end])
    return "\n".join(out)


def _starts(line: str) -> list[int]:
    """The cell at which each title of a header line starts."""
    out, at, last = [], 0, " "
    for char in line:
        if char != " " and last == " ":
            out.append(at)
        at += cells(char)
        last = char
    return out


def _index_at(line: str, cell: int) -> int:
    """The index of the character at display cell ``cell`` of ``line``."""
    at = 0
    for i, char in enumerate(line):
        if at >= cell:
            return i
        at += cells(char)
    return len(line)


async def test_acknowledging_in_chinese_asks_and_refuses_in_chinese(chinese: None) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = HealthScreen(
            problem_board(), clock=fixed_clock, may_acknowledge=lambda: "只有管理员可以确认问题"
        )
        await app.push_screen(screen)
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        notes = [f"{n.title} {' '.join(n.lines)}" for n in app.notices]
        assert any("无法确认" in note for note in notes), notes
        assert not untranslated("\n".join(notes)), notes
        footer = screen.query_one("TranslatedFooter")
        labels = " ".join(str(key.description) for key in footer.children)  # type: ignore[attr-defined]
        assert "返回" in labels and "确认" in labels and "Back" not in labels


STEPS = [
    {"step": "drain", "ok": True, "outcome": ""},
    {"step": "stop", "ok": True, "outcome": ""},
    {"step": "sigterm", "ok": True, "outcome": ""},
    {"step": "sigkill", "ok": True, "outcome": ""},
    {"step": "memory", "ok": False, "outcome": "20480 MiB"},
    {"step": "holders", "ok": True, "outcome": ""},
    {"step": "reset", "ok": True, "outcome": ""},
]


@pytest.mark.parametrize("end", ["running", "free", "failed", "refused"])
async def test_force_free_steps_and_verdicts_are_chinese(chinese: None, end: str) -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ForceFreeScreen("gpu01 GPU 2", "卡住了")
        await app.push_screen(screen)
        await pilot.pause()
        for step in STEPS[: 3 if end == "running" else len(STEPS)]:
            screen.step(step)
        if end == "free":
            screen.done({"free": True, "steps": STEPS})
        elif end == "failed":
            screen.done({"free": False, "steps": STEPS})
        elif end == "refused":
            screen.done(None, "只有管理员可以强制释放 GPU")
        await pilot.pause()
        text = region_text(app, screen.query_one("#forcefree-dialog").region)
        assert "强制释放 gpu01 GPU 2" in text and "排空此卡" in text, text
        if end == "failed":
            assert "失败于\u201c检查显存是否已回收\u201d" in text, text
        assert not untranslated(text, *COMMAND_WORDS), text


@given(st.text(st.sampled_from("ab 中文\uff0c进程 GPU-"), max_size=60), st.integers(2, 30))
def test_a_wrapped_line_fits_its_cells_and_loses_nothing(text: str, width: int) -> None:
    lines = wrap_cells(text, width)
    assert all(cells(line) <= width for line in lines), lines
    assert "".join("".join(lines).split()) == "".join(text.split())
    if cells(text) == len(text):  # narrow text wraps as it always did
        assert lines == textwrap.wrap(text, width, break_on_hyphens=False)


def test_every_health_template_has_its_translation_and_reads_back(chinese: None) -> None:
    """Each sentence with figures comes back in Chinese with the same figures, each
    figure shown itself (a fence's reason inside ``fenced by the head: ...``)."""
    for template in TEMPLATES:
        fields = {name: f"{i}" for i, (_, name, _, _) in enumerate(_parse(template))}
        english = template.format(**fields)
        said = shown(english)
        assert said != english and not untranslated(said, "SXid", *COMMAND_WORDS), (template, said)
        assert all(value in said for value in fields.values()), (template, said)
    nested = "fenced by the head: Xid 79: GPU has fallen off the bus"
    colon = "\uff1a"  # the fullwidth colon Chinese punctuation uses
    assert shown(nested) == f"被调度主节点隔离{colon}Xid 79{colon}GPU 已从总线上掉线"


def _parse(template: str) -> list[tuple[str, str, str, str]]:
    import string

    return [part for part in string.Formatter().parse(template) if part[1] is not None]  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_shown_never_raises_and_leaves_what_it_does_not_know(text: str) -> None:
    """Whatever a host or the head put in a finding, ``shown`` returns a string, and
    one that matches no entry and no template comes back as it was."""
    said = shown(text)
    assert isinstance(said, str)
    if not any(ch.isalpha() for ch in text):
        assert said == text


async def test_english_is_unchanged_by_the_translated_panes() -> None:
    """Without a Chinese environment the same panes say what they always said."""
    i18n.reset()
    i18n.choose("en")
    try:
        app = make_app()
        async with app.run_test(size=(200, 50)) as pilot:
            await select_alice(pilot)
            text = detail_text(app)
            assert "model" in text and "events" in text and "型号" not in text
    finally:
        i18n.reset()
    assert HealthThresholds()  # the thresholds the fixtures use are the defaults
    assert ClaimPlan(2, (), (("pool", "a100"),)).where_text() == "in pool a100"


def test_health_json_is_the_same_bytes_in_both_languages(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``gputui health --json`` and the head's answer carry: the problems in
    English, whatever the language the console shows them in."""
    from gputui.health.report import problem_json

    def dumped() -> str:
        i18n.reset()
        return json.dumps([problem_json(p) for p in problem_board().problems()], sort_keys=True)

    monkeypatch.setenv("LANG", "en_US.UTF-8")
    english = dumped()
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    chinese = dumped()
    i18n.reset()
    assert chinese == english and "fenced by the head" in english


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_process_table_lines_up_in_chinese(chinese: None, size: tuple[int, int]) -> None:
    """Chinese titles and a Chinese user and command: every line of the table is as
    wide as its header in cells, and each column's values end where its title does."""
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        source = app.source
        snap = source.get("gpu01")  # type: ignore[attr-defined]
        wide = [
            process(5150 + i, user, command, 900 * (i + 1), NOW - 600 * (i + 1))
            for i, (user, command) in enumerate(
                [("张伟", "python 训练模型.py --数据 中文语料"), ("bob", "torchrun 微调.py")]
            )
        ]
        gpus = [dict(g, processes=wide) if g["index"] == 0 else g for g in gpu01_gpus()]
        source.push(snap.with_changes(sample=sample(2, NOW - 1.0, gpus)))  # type: ignore[attr-defined]
        await select_alice(pilot)
        table = app.main.query_one(ProcessTable)
        await until(pilot, lambda: table.row_count == 2, "the two processes")
        await pilot.pause()
        drawn = region_text(app, table.content_region).splitlines()
        header = drawn[0]
        assert "用户" in header and "命令" in header and "USER" not in header, header
        rows = [line for line in drawn[1:3] if line.strip()]
        assert len(rows) == 2 and "张伟" in rows[0], drawn
        width = cells(header)
        assert all(cells(line) == width for line in rows), (header, rows)
        # Right-aligned PID and memory: each value ends where its column does (the
        # title starts the column, which is as wide as in English).
        for title, column_w, values in (
            ("显存", 5, ("900M", "1.8G")),
            ("PID", 7, ("5150", "5151")),
        ):
            end = cells(header[: header.index(title)]) + column_w
            for line, value in zip(rows, values, strict=True):
                assert cells(line[: line.index(value) + len(value)]) == end, (title, line)
        user_at = cells(header[: header.index("用户")])
        assert cells(rows[0][: rows[0].index("张伟")]) == user_at, rows[0]
        assert not untranslated(header + "\n" + str(table.border_title))


_SIGNAL = st.sampled_from([None, "TERM", "KILL"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(["no-allocation", "outside-allocation"]),
    signal_in=st.one_of(st.none(), st.floats(-100, 10_000)),
    next_signal=_SIGNAL,
    signalled=_SIGNAL,
    since=st.one_of(st.none(), st.floats(0, 10_000)),
)
def test_a_flagged_process_is_said_in_chinese_whatever_the_head_does(
    chinese: None,
    kind: str,
    signal_in: float | None,
    next_signal: str | None,
    signalled: str | None,
    since: float | None,
) -> None:
    raw = {
        **ROGUE_FLAG,
        "gpu_uuid": "GPU-1",
        "kind": kind,
        "since": None if since is None else NOW - since,
        "signal_at": None if signal_in is None else NOW + signal_in,
        "next_signal": next_signal,
        "signalled": signalled,
    }
    (flag,) = parse_flags([raw])
    line = flag.line(NOW)
    assert not untranslated(line, "SIGTERM", "SIGKILL"), line
    assert ("越权" if kind == "no-allocation" else "越界") in line


def _plan(picks: int) -> ClaimPlan:
    from gputui.ui.head.claim_plan import Pick
    from gputui.ui.head.view import HeadGpu

    chosen = tuple(
        Pick(HeadGpu(f"GPU-{i}", "gpu01", i, "a100", "ok", None), "A100", i % 2, 0, "A100-80G")
        for i in range(picks)
    )
    return ClaimPlan(max(picks, 2), chosen, (("pool", "a100"),))


@pytest.mark.parametrize("picks", [0, 2, 10])
@pytest.mark.parametrize(
    "args", [{}, {"duration_s": 5400}, {"duration_s": 600, "note": "测试"}, {"wait": False}]
)
def test_the_claim_question_is_chinese(chinese: None, picks: int, args: dict[str, Any]) -> None:
    plan = _plan(picks)
    text = plan.question(args).plain + "\n" + plan.label
    assert not untranslated(text, "A100", "A100-80G", "a100"), text
    assert ("认领" if picks else "排队") in plan.label


@pytest.mark.parametrize("setting", [None, "on", "external", "off"])
@pytest.mark.parametrize("in_tmux", [True, False])
def test_refusals_and_copy_outcomes_are_chinese(
    chinese: None, setting: str | None, in_tmux: bool
) -> None:
    from gputui.ui.clipboard import ENABLE, outcome
    from gputui.ui.direct import OFFER
    from gputui.ui.head.view import Me

    said = [
        outcome(in_tmux, setting).how,
        i18n._(OFFER).format(why="x"),
        Me(1003, "bob", admin=False).refused("force-free a GPU") or "",
        Me(1003, "bob", admin=False).refused("acknowledge problems") or "",
        head_forms(3, 1, 2)[0],
        head_forms(3, 1, 0)[2],
    ]
    text = "\n".join(said)
    assert "只有管理员可以强制释放 GPU" in text, text
    assert not untranslated(text, *ENABLE.split(), "OSC", "x", "direct"), text
