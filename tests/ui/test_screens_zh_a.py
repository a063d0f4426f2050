"""The queue, audit, usage, notices and confirm screens and the ``:`` line's errors in
Chinese (``LANG=zh_CN.UTF-8``): no English is left on them but the test's own data
(user, host and job names, commands, the audit's stored records), and their tables
keep every column in line under its Chinese title at 80 and 200 columns.

The queue is a real head's (its hosts scripted) with an array folded and expanded;
the usage screen asks a head over a real socket (``usage_fakes``); the audit,
notices and confirm screens are shown in an app of their own with rows given to them.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import get_character_cell_size
from rich.text import Text
from test_scheduler import connected, console
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static
from ui_helpers import screen_text, told, until
from usage_fakes import fake_usage_head

from gputui.common import i18n
from gputui.common.i18n import _
from gputui.common.text import cells, fit
from gputui.config.models import Config, HeadConfig
from gputui.scheduler.client.errors import HeadError
from gputui.ui.app import GpuTuiApp
from gputui.ui.commands import Refused, parse
from gputui.ui.head.usage import usage_problem
from gputui.ui.head.usage_view import UsageTotal
from gputui.ui.notices import Notice
from gputui.ui.screens.audit import AuditRow, AuditScreen
from gputui.ui.screens.confirm import ConfirmScreen, ReasonScreen
from gputui.ui.screens.notices import HeadNoticeRow, NoticesScreen
from gputui.ui.screens.queue import _QUESTIONS, QueueScreen, sentence
from gputui.ui.screens.usage import UsageScreen
from gputui.ui.screens.usage import _when as usage_when
from gputui.ui.widgets.usage_charts import (
    LABEL_CELLS,
    NAME_CELLS,
    ChartStyles,
    bar_lines,
    folded,
    hour_columns,
    hourly_lines,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "i18n"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from headkit import running_head
from untranslated import english_words
from usage_fakes import NOW as USAGE_NOW

SIZES = [(80, 24), (200, 50)]
EXPLAIN = re.compile(r" *(class|line|priority|quota|reason|share|starts|why) ")
"""A line of why a job waits, in the queue's detail pane (explain's own words)."""
KEYS = {"esc"}
"""Key names as the footer shows them."""


def cell_slice(line: str, start: int, end: int) -> str:
    """The characters of ``line`` in cells ``start``..``end``; a wide character across
    either edge fails (the columns are out of line)."""
    out, at = [], 0
    for char in line:
        size = get_character_cell_size(char)
        if start <= at and at + size <= end:
            out.append(char)
        else:
            assert at + size <= start or at >= end, (line, start, end, char)
        at += size
    return "".join(out)


def assert_in_line(table: DataTable[Any]) -> None:
    """Every shown line of ``table`` (its header first) has each cell in its column:
    what stands in a column's cells is that row's value (or its start and "…")."""
    width = table.scrollable_content_region.width
    spans, at = [], 0
    for column in table.ordered_columns:
        end = at + column.get_render_width(table)
        if end > width:
            break
        spans.append((at, end))
        at = end
    assert len(spans) >= 3, "too few whole columns to compare"
    shown = min(table.row_count, table.size.height - 1)
    values = [[column.label.plain for column in table.ordered_columns]]
    values += [[str(v) for v in table.get_row_at(i)] for i in range(shown)]
    for y, row in enumerate(values):
        line = table.render_line(y).text
        assert cells(line) >= at, line
        for (start, end), raw in zip(spans, row, strict=False):
            piece, value = cell_slice(line, start, end).strip(), raw.strip()
            whole = piece == value
            cut = piece.endswith("…") and value.startswith(piece[:-1].rstrip())
            assert whole or cut, (y, value, piece, line)


def assert_detail_in_line(text: str) -> None:
    """The queue's detail pane: every value starts in the same cell after its label."""
    found = 0
    for line in text.splitlines():
        start = line.lstrip(" ")
        for label in ("作业", "用户", "状态", "需求", "命令", "工作目录"):
            if start.startswith(label + " "):
                labelled = cell_slice(start, 0, 10)
                value = start[len(labelled) :]
                assert labelled.rstrip() == label and value[:1] not in ("", " "), line
                found += 1
    assert found >= 5, text


# -- the queue ------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_the_queue_in_chinese_folded_and_expanded(
    tmp_path: Path, chinese: None, size: tuple[int, int]
) -> None:
    async with running_head(tmp_path, {"gpu01": 4}) as (_head, _hosts, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None
            await link.ask("submit", lambda b: b.submit(argv=["train"], gpus=1, name="微调模型"))
            await link.ask("submit", lambda b: b.submit(argv=["sweep"], gpus=1, array="0-5%1"))
            await pilot.press("Q")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen), "the queue screen")
            queue = app.screen
            assert isinstance(queue, QueueScreen)
            table = queue.query_one("#jobs", DataTable)

            def ids() -> list[str]:
                return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]

            await until(pilot, lambda: ids() == ["1", "2_0", "2_[1-5]"], "the array folded")
            await until(pilot, lambda: "作业 1 的输出" in screen_text(app), "the first job's log")
            data = {"root", "gpu", "GPU-gpu", "train", "sweep", "esc", "normal"}  # normal: a class

            def shown() -> str:
                """The screen less the job's own output (the scripted host's words) and
                why a waiting job waits: ``gputui.scheduler.client.explain_text``'s
                lines (its labels are looked up; that file marks them, not this task)."""
                text = screen_text(app).replace("hello from the job", "")
                return "\n".join(line for line in text.splitlines() if not EXPLAIN.match(line))

            text = shown()
            assert "作业号" in text and "运行中" in text and "排队中" in text, text
            assert english_words(text, data) == [], text
            assert_in_line(table)
            assert_detail_in_line(text)

            table.move_cursor(row=2)
            await pilot.press("e")
            want = ["1", "2_0", *(f"2_{t}" for t in range(1, 6))]
            await until(pilot, lambda: ids() == want, "the array's tasks one a row")
            await until(pilot, lambda: "作业 1 的输出" not in screen_text(app), "the task's log")
            text = shown()
            assert english_words(text, data) == [], text
            assert_in_line(table)

            await pilot.press("x")  # on a task of its own row: that task alone
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
            text = shown()
            assert "取消 2_1" in text and "(y)" in text, text
            assert english_words(text, data) == [], text
            await pilot.press("n")
            await until(pilot, lambda: app.screen is queue, "the question closed")

            table.move_cursor(row=0)
            await pilot.press("K")  # the running job: asked, its work is lost
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the kill question")
            text = shown()
            assert "终止作业 1" in text and "已完成的工作将会丢失" in text, text
            assert english_words(text, data) == [], text
            await pilot.press("n")
            await until(pilot, lambda: app.screen is queue, "the kill question closed")

            await pilot.press("e")  # not an array's task: said in Chinese
            not_array = [("", "不是作业数组中的任务。")]
            await until(pilot, lambda: told(app)[-1:] == not_array, "why not")
            await pilot.press("a")  # not an interactive job: why not, in Chinese
            await until(pilot, lambda: len(told(app)) >= 2, "why it cannot attach")
            title, said = told(app)[-1]
            assert title == "无法连接作业 1" and "它没有终端" in said, (title, said)
            assert english_words(f"{title} {said}", data | {"run", "pty"}) == [], said


# -- audit ------------------------------------------------------------------------------

NOW = 1_700_000_000.0
AUDIT = [
    AuditRow(NOW - 60, "root", "cancel", "job 7", "节点需要重启", "ok", "王小明"),
    AuditRow(NOW - 30, "gputui-head", "preempt", "job 5", "为紧急作业 9 让出 GPU", "sent", "bob"),
    AuditRow(NOW - 10, "root", "drain", "gpu03:2", "Xid 79 两次", "ok"),
]
AUDIT_DATA = {"esc", "root", "gpu", "gputui-he", "gputui-head", "bob"}
AUDIT_DATA |= {"cancel", "preempt", "drain", "job", "ok", "sent"}  # the records as stored


class Host(App[None]):
    """An app that shows one screen (the audit screen's rows are handed to it)."""

    ENABLE_COMMAND_PALETTE = False  # as gputui's: its key is not in the footer

    def __init__(self, rows: list[AuditRow] | None = None) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield Static("")

    def on_audit_screen_wanted(self, message: AuditScreen.Wanted) -> None:
        if self.rows is None:
            message.screen.show_problem(message.token, "连接被拒绝")
        else:
            message.screen.show_rows(message.token, self.rows)


@pytest.mark.parametrize("size", SIZES)
async def test_the_audit_screen_in_chinese_keeps_its_columns(
    chinese: None, size: tuple[int, int]
) -> None:
    app = Host(AUDIT)
    async with app.run_test(size=size) as pilot:
        screen = AuditScreen(clock=lambda: NOW)
        await app.push_screen(screen)
        await until(pilot, lambda: screen.answered, "the rows")
        await pilot.pause()
        text = screen_text(app)  # type: ignore[arg-type]
        assert "审计" in text and "操作者" in text and "3 行中显示 3 行" in text, text
        assert "原因" in text and "结果" in text and "属于 王小明" in text, text
        assert english_words(text, AUDIT_DATA) == [], text
        assert_in_line(screen.query_one("#audit-table", DataTable))
        await pilot.press("slash")
        await pilot.pause()
        assert english_words(screen_text(app), AUDIT_DATA) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("rows", [[], None])
async def test_the_audit_screens_empty_and_failed_lines_in_chinese(
    chinese: None, rows: list[AuditRow] | None
) -> None:
    app = Host(rows)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = AuditScreen(clock=lambda: NOW)
        await app.push_screen(screen)
        await until(pilot, lambda: screen.answered or screen.problem, "the answer")
        await pilot.pause()
        text = screen_text(app)  # type: ignore[arg-type]
        assert ("还没有审计记录" in text) == (rows == []), text
        assert english_words(text, KEYS) == [], text


# -- usage ------------------------------------------------------------------------------


def usage_console(sock: Path) -> GpuTuiApp:
    from ui_fakes import FakeSource, fixed_clock

    return GpuTuiApp(FakeSource(), Config(head=HeadConfig(socket=str(sock))), clock=fixed_clock)


USERS = {"alice", "bob", "carol", "ml", "vision", "EUR", "esc"}


@pytest.mark.parametrize("size", SIZES)
async def test_the_usage_screen_in_chinese_at_each_period(
    tmp_path: Path, chinese: None, size: tuple[int, int]
) -> None:
    with fake_usage_head(tmp_path / "head.sock"):
        app = usage_console(tmp_path / "head.sock")
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.head.link and app.head.link.view, "the head")
            await pilot.press("U")
            await until(pilot, lambda: isinstance(app.screen, UsageScreen), "the usage screen")
            screen = app.screen
            assert isinstance(screen, UsageScreen)
            for key, said in (("d", "过去一天"), ("w", "过去一周"), ("m", "过去四周")):
                asked = screen.requests
                await pilot.press(key)
                await until(
                    pilot,
                    lambda asked=asked: screen.requests > asked and not screen.asking,
                    f"the {key} answer",
                )
                await pilot.pause()
                text = screen_text(app)
                assert said in text and "gputui 用量" in text, text
                assert "已分配" in text and "按用户" in text and "忙碌" in text, text
                assert english_words(text, USERS) == [], (key, text)
            assert "周" in screen_text(app)  # the x axis's days


async def test_the_usage_screens_refusal_in_chinese(tmp_path: Path, chinese: None) -> None:
    app = usage_console(tmp_path / "no-head.sock")  # nothing listens there
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("U")
        await until(pilot, lambda: isinstance(app.screen, UsageScreen), "the usage screen")
        screen = app.screen
        assert isinstance(screen, UsageScreen)
        await until(pilot, lambda: screen.problem is not None, "why there is nothing")
        await pilot.pause()
        text = screen_text(app)
        assert "没有可显示的用量" in text, text
        status, *rest = text.splitlines()
        # The link's own reason, in its own file's words, follows this.
        assert status.startswith(" gputui 用量   !! 调度主节点不可达"), status
        said = "\n".join(rest)
        assert english_words(said, KEYS) == [], said


def chinese_totals(n: int) -> tuple[UsageTotal, ...]:
    names = ["王小明", "alice", "李雷雷雷雷雷雷雷雷", "韩梅梅", "bob", "机器学习组"]
    return tuple(
        UsageTotal(names[i % len(names)] + str(i), 500.0 / (i + 1), 250.0 / (i + 1))
        for i in range(n)
    )


@pytest.mark.parametrize("width", [80, 200])
@given(st.integers(min_value=1, max_value=12), st.integers(min_value=2, max_value=8))
@settings(max_examples=30, deadline=None)
def test_the_usage_bars_keep_their_columns_with_chinese_names(
    width: int, count: int, rows: int
) -> None:
    totals = chinese_totals(count)
    i18n.choose("zh_CN")
    try:
        lines = [line.plain for line in bar_lines(totals, width, rows, ChartStyles.plain())]
        shown = folded(totals, rows)
    finally:
        i18n.reset()
    assert len(lines) == len(shown) and all(cells(line) == width for line in lines), lines
    names = min(NAME_CELLS, max(4, width // 4), max(cells(t.key) for t in shown))
    for line, total in zip(lines, shown, strict=True):
        assert cell_slice(line, 0, names) == fit(total.key, names), line  # the names' column
        assert cell_slice(line, names, names + 1) == " ", line  # then every bar starts
        numbers = cell_slice(line, width - LABEL_CELLS, width)  # " 1234.5h 100%"
        assert numbers.rstrip() == numbers and "h " in numbers, line
    if count > rows:
        assert "其他" in lines[-1] and english_words(lines[-1]) == [], lines[-1]


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("days", [1, 7, 28])
def test_the_hourly_axis_in_chinese_is_as_wide_as_the_chart(width: int, days: int) -> None:
    i18n.choose("zh_CN")
    try:
        until_ = USAGE_NOW
        columns, _per = hour_columns((), until_ - days * 86_400, until_, width - 5)
        lines = [t.plain for t in hourly_lines(columns, width, 6, ChartStyles.plain())]
    finally:
        i18n.reset()
    assert all(cells(line) == width for line in lines), lines
    axis = lines[-1]
    if days > 1:
        assert "周" in axis and "日" in axis, axis
    assert english_words(axis) == [], axis


# -- notices and confirmations ------------------------------------------------------------


class Shown(App[None]):
    ENABLE_COMMAND_PALETTE = False

    def compose(self) -> ComposeResult:
        yield Static("")

    def on_notices_screen_wanted(self, message: NoticesScreen.Wanted) -> None:
        rows = [HeadNoticeRow(NOW - 100, "job-end", "作业 7 已完成", True)]
        message.screen.show_history(message.token, rows)


@pytest.mark.parametrize("notices", [0, 2])
async def test_the_notices_screen_in_chinese(chinese: None, notices: int) -> None:
    app = Shown()
    told = [
        Notice(NOW - 5, "warning", "认领", ("gpu01 上没有空闲 GPU",)),
        Notice(NOW, "information", "", ("CUDA_VISIBLE_DEVICES=0,1",)),
    ][:notices]
    async with app.run_test(size=(80, 24)) as pilot:
        screen = NoticesScreen(told)
        await app.push_screen(screen)
        await pilot.pause()
        text = screen_text(app)  # type: ignore[arg-type]
        assert "通知" in text and ("本次会话还没有通知" in text) == (notices == 0), text
        if notices:
            assert "警告" in text and "信息" in text, text
        assert english_words(text, KEYS | {"gpu"}) == [], text
        await pilot.press("h")
        await until(pilot, lambda: "最新 1 条" in screen_text(app), "the head's history")  # type: ignore[arg-type]
        text = screen_text(app)  # type: ignore[arg-type]
        assert english_words(text, KEYS | {"job-end"}) == [], text


@pytest.mark.parametrize("asking", ["confirm", "reason", "reason-empty"])
async def test_the_confirm_dialogs_in_chinese(chinese: None, asking: str) -> None:
    app = Shown()
    async with app.run_test(size=(80, 24)) as pilot:
        question = Text("终止作业 3")
        if asking == "confirm":
            await app.push_screen(ConfirmScreen(question))
        else:
            await app.push_screen(ReasonScreen(question))
        await pilot.pause()
        if asking == "reason-empty":
            await pilot.press("enter")  # no reason given: the line that says one is needed
            await until(pilot, lambda: "必须填写原因" in screen_text(app), "the refusal")  # type: ignore[arg-type]
        text = screen_text(app)  # type: ignore[arg-type]
        assert ("是 (y)" in text) == (asking == "confirm"), text
        assert "取消" in text, text
        assert english_words(text) == [], text


# -- the : line's errors ----------------------------------------------------------------

LINES = [
    "x" * 600,
    ":'unclosed",
    ":queue \\",
    ":",
    ":queu",
    ":zzzz",
    ":queue now",
    ":sort",
    ":sort speed",
    ":theme a b",
    ":claim --json",
    ":claim gpu01:0 -g 2",
    ":claim --for 400d",
    ":claim --pool 'a\x1bb'",
    ":claim " + " ".join(f"g{i}:0" for i in range(70)),
    ":claim -h",
    ":claim --bogus",
    ":claim --pool",
]
KEPT = {"queue", "queu", "zzzz", "sort", "speed", "theme", "claim", "util", "mem", "temp"}
KEPT |= {"power", "host", "free", "dark", "light", "json", "pool", "for", "bogus", "gpu01"}
KEPT |= {"help", "no-wait", "mig", "note", "project", "model", "HOST:INDEX", "now", "soon"}


@pytest.mark.parametrize("line", LINES)
def test_the_command_lines_refusals_in_chinese(chinese: None, line: str) -> None:
    refused = parse(line, ["util", "mem", "temp", "power", "host", "free"], ["dark", "light"])
    assert isinstance(refused, Refused), line
    assert "\n" not in refused.line
    words = english_words(refused.line, KEPT | {f"g{i}" for i in range(70)})
    assert words == [], (line, refused.line)


@given(st.text(max_size=80))
@settings(max_examples=200, deadline=None)
def test_any_refused_line_in_chinese_is_one_line(text: str) -> None:
    i18n.choose("zh_CN")
    try:
        result = parse(text, ["util"], ["dark"])
    finally:
        i18n.reset()
    if isinstance(result, Refused):
        assert result.line and "\n" not in result.line and len(result.line) < 400


# -- whole sentences ------------------------------------------------------------------

NAMES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20)


@given(NAMES, NAMES, st.booleans())
@settings(max_examples=100, deadline=None)
def test_a_question_keeps_names_as_given_in_either_language(
    user: str, name: str, chinese_: bool
) -> None:
    """Names go into the question as they are (braces too), whatever the language;
    in English the words are the ones the screen always said."""
    i18n.choose("zh_CN" if chinese_ else "en")
    try:
        question = sentence(
            _(_QUESTIONS["kill"]), job="12", user=user, name=name, state="running", host="gpu01"
        ).plain
    finally:
        i18n.reset()
    assert f"{user}: {name}" in question
    if not chinese_:
        assert question == f"Kill job 12 ({user}: {name}), running on gpu01?"
    else:
        assert question.startswith("终止作业 12") and question.endswith("位于 gpu01\uff1f")


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@given(st.floats(min_value=0, max_value=4e9))
@settings(max_examples=100, deadline=None)
def test_the_usage_ranges_dates_read_whole_in_either_language(epoch: float) -> None:
    local = time.localtime(epoch)
    i18n.choose("en")
    try:
        english = usage_when(epoch)
        i18n.choose("zh_CN")
        chinese = usage_when(epoch)
    finally:
        i18n.reset()
    month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][
        local.tm_mon - 1
    ]
    assert english == f"{local.tm_mday:02d} {month} {time.strftime('%H:%M', local)}"
    assert chinese == f"{local.tm_mon}月{local.tm_mday:02d}日 {time.strftime('%H:%M', local)}"


def test_why_usage_has_no_answer_is_one_chinese_line(chinese: None) -> None:
    """The head's own words stay as they are; a line the link already said whole is
    not wrapped again."""
    old = usage_problem(HeadError("unknown-op", "unknown op usage"))
    assert old.startswith("调度主节点版本过旧") and english_words(old) == [], old
    gone = usage_problem(HeadError("unreachable", "连接被重置"))
    assert gone == _("head unreachable ({reason})").format(reason="连接被重置")
    assert gone.startswith("调度主节点不可达") and gone.endswith("连接被重置\uff09"), gone
    said = _("head unreachable ({reason})").format(reason="无人监听")
    assert usage_problem(HeadError("unavailable", said)) == said  # once, not twice
    refused = usage_problem(HeadError("forbidden", "只有管理员可以查看"))
    assert refused.startswith("调度主节点拒绝了用量请求") and refused.endswith("只有管理员可以查看")
