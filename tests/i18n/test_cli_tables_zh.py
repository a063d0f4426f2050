"""The tables and summaries of the verbs in Chinese: column titles translated and the
columns still in line by display cells at 80 and 200 columns (the booking board,
the queue's flags, ``history``, ``check-config``'s hosts); the demo's intro whole in
its 78 cells; the one-line config refusals ``check-config`` prints, in Chinese."""

# ruff: noqa: RUF001 (the Chinese a user reads, its full-width marks included)
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from untranslated import WORD, english_words

from gputui.cli import console
from gputui.cli.bookings import bookings_table
from gputui.cli.demo import WELCOME_W, welcome_text
from gputui.cli.flagged import flags_table
from gputui.cli.history import history_table
from gputui.common import i18n
from gputui.common.text import cells

NOW = 1_764_000_000.0


@pytest.fixture
def chinese(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    i18n.reset()
    yield
    i18n.reset()


def starts(line: str) -> list[int]:
    """The cell each word of ``line`` starts at (words: runs without a space)."""
    out, at, before = [], 0, " "
    for char in line:
        if char != " " and before == " ":
            out.append(at)
        at += cells(char)
        before = char
    return out


def assert_in_line(lines: list[str], width: int | None) -> None:
    """Every row in ``width`` cells; each header title starts where a column does:
    the first row's cells start at the title's cell (left-aligned columns)."""
    assert all(width is None or cells(line) <= width for line in lines), lines
    head, first = starts(lines[0]), starts(lines[1])
    assert head[0] == first[0]
    assert set(head) <= set(first) | {max(head)}, (lines[0], lines[1])


BOOKINGS = [
    {
        "id": 7,
        "user": "alice",
        "state": "booked",
        "gpu_uuids": ["GPU-a", "GPU-b"],
        "host": "gpu01",
        "start": NOW + 3600,
        "end": NOW + 7200,
        "note": "paper deadline",
    },
    {
        "id": 8,
        "user": "bob",
        "state": "cancelled",
        "maint": True,
        "gpu_uuids": ["GPU-c"],
        "host": "gpu02",
        "start": NOW + 86400,
        "end": NOW + 3 * 86400,
        "note": "",
    },
]


@pytest.mark.parametrize("width", [80, 200])
def test_the_booking_board_is_chinese_and_in_line(chinese: None, width: int) -> None:
    lines = bookings_table(BOOKINGS, width)
    assert lines[0].split()[:3] == ["预约", "用户", "状态"]
    assert "已预约" in lines[1] and "已取消 维护" in lines[2] and "月" in lines[1]
    names = {"alice", "bob", "gpu", "paper", "deadline", "dead"}  # gpu01; a cut note
    assert english_words("\n".join(lines), names) == []
    assert_in_line(lines, width)


def test_the_booking_board_is_english_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LC_ALL", "C")
    i18n.reset()
    lines = bookings_table(BOOKINGS, 200)
    assert lines[0].split()[:3] == ["BOOKING", "USER", "STATE"] and " booked " in lines[1]
    assert time.strftime("%a %d %b", time.localtime(NOW + 3600)) in lines[1]


FLAGS = [
    {
        "host": "gpu01",
        "gpu_index": 2,
        "pid": 4242,
        "uid": 1003,
        "user": "bob",
        "name": "python",
        "kind": "no-allocation",
        "since": NOW - 200,
        "signal_at": NOW + 100,
        "next_signal": "TERM",
        "signalled": None,
    },
    {
        "host": "gpu02",
        "gpu_index": 0,
        "pid": 77,
        "user": "carol",
        "name": "jupyter",
        "kind": "outside-allocation",
        "since": NOW - 4000,
        "signalled": "TERM",
        "signal_at": NOW - 1,
        "next_signal": "KILL",
    },
]


@pytest.mark.parametrize("width", [80, 200])
def test_the_queues_flags_are_chinese_and_in_line(chinese: None, width: int) -> None:
    lines = flags_table(FLAGS, NOW, width)
    assert lines[1].startswith("标记：2 个进程")
    table = lines[2:5]
    assert table[0].split() == ["用户", "GPU", "PID", "名称", "类别", "持续", "操作"]
    assert "100s 后发送 SIGTERM" in table[1] or "1m 后发送 SIGTERM" in table[1]
    assert "已发送 SIGTERM, 即将发送 SIGKILL" in table[2] or width < 200
    text = "\n".join(lines)
    names = {"gpu", "bob", "carol", "python", "jupyter"}
    assert english_words(text, names | {"no-allocation", "outside-allocation"}) == []
    assert_in_line(table, width)


JOBS = [
    {
        "id": 41,
        "user": "alice",
        "name": "resnet",
        "state": "completed",
        "exit_code": 0,
        "ended_at": NOW,
        "gpu_h": 3.5,
        "busy_gpu_h": 3.0,
        "busy_share": 0.86,
        "energy_kwh": 1.25,
    },
    {
        "id": 42,
        "user": "bob",
        "name": "bert",
        "state": "timeout",
        "exit_signal": "TERM",
        "ended_at": NOW,
        "gpu_h": 12.0,
    },
]


@pytest.mark.parametrize("width", [80, 200])
def test_history_is_chinese_and_in_line(chinese: None, width: int) -> None:
    lines = history_table(JOBS, width)
    assert lines[0].split()[:4] == ["作业号", "用户", "名称", "状态"]
    assert "已完成" in lines[1] and lines[-1].strip().startswith("合计")
    names = {"alice", "bob", "resnet", "bert", "SIGTERM"}
    assert english_words("\n".join(lines), names) == []
    widths = {cells(line) for line in lines}
    assert max(widths) <= width
    # Right-aligned figures: each row's last column ends where the header's does.
    assert len({cells(line) for line in lines[:-1]}) == 1 or lines[2].endswith("-")


@given(st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), max_size=30))
def test_a_chinese_note_keeps_the_board_in_line(note: str) -> None:
    i18n.choose("zh_CN")
    try:
        rows = [{**BOOKINGS[0], "note": note}, BOOKINGS[1]]
        for width in (80, 200):
            assert_in_line(bookings_table(rows, width), width)
    finally:
        i18n.choose(None)


def test_the_demos_intro_is_chinese_and_whole_in_its_width(chinese: None) -> None:
    export = "export GPUTUI_HEAD_SOCKET=/tmp/gputui-demo-abcdefgh/head/head.sock"
    text = welcome_text("job 6 (quick-test) of yours ends in ~20 s", export)
    lines = text.splitlines()
    assert all(cells(line) <= WELCOME_W for line in lines), lines
    assert lines[-1] == export and lines[-2] == "命令行，在另一个 shell 中："
    assert any(line.startswith("请留意 job 6") for line in lines)
    keys = {"Ctrl", "usage", "health", "audit", "claim", "shell", "export", "quick-test"}
    keys |= {"job", "yours", "ends", "GPUTUI_HEAD_SOCKET", "tmp", "gputui-demo-abcdefgh"}
    assert english_words(text, keys | {"head", "head.sock"}) == []


HOSTS = """\
hosts:
  - {name: gpu01, address: 10.0.0.1, user: alice, pool: 训练, sim: 4xrtx3090}
  - {name: gpu02, address: 10.0.0.2, pool: a100, sim: 2xrtx4090}
"""


def _check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(text, encoding="utf-8")
    hosts.chmod(0o600)
    code = console.main(["check-config", str(hosts)])
    said = capsys.readouterr()
    return code, said.out + said.err


def test_check_config_summarises_in_chinese_in_line(
    chinese: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check(tmp_path, HOSTS, capsys)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].endswith("：正常") and lines[1].split() == [
        "主机",
        "2（其中",
        "2",
        "台为模拟）",
    ]
    assert len({starts(line)[1] for line in lines[1:8]}) == 1, lines[1:8]  # values in line
    data = {"gpu", "alice", "xrtx", "ssh", "gputui-dark", "tmp", "yaml", "hosts"}
    assert english_words(out, data | set(WORD.findall(str(tmp_path)))) == [], out
    table = lines[lines.index("") + 1 :]
    assert table[0].split() == ["名称", "地址", "用户", "跳板", "资源池", "GPU数"]
    assert_in_line(table, None)
    assert starts(table[0]) == starts(table[1])  # a Chinese pool name keeps the grid


def test_check_config_refuses_an_unknown_theme_in_chinese(
    chinese: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check(tmp_path, HOSTS + "theme: neon\n", capsys)
    assert code == 1 and len(out.splitlines()) == 1, out
    assert ":4: theme: 未知主题 'neon'；已知主题：gputui-dark" in out


CONFIG_REFUSALS = [
    (b"hosts: []\n", ":1: hosts: 没有列出主机；请在 'hosts:' 下至少添加一台"),
    (b"- a\n", ":1: （顶层）：必须是设置项的映射"),
    (b"hosts: [\xff]\n", ":1:9: 不是 UTF-8（字节 0xff）；请以 UTF-8 保存此文件"),
    (b"#" * (1024 * 1024 + 1), ": 太大：1048577 字节；配置文件的上限是 1 MiB"),
    (None, ": 是一个目录，不是配置文件"),
    (
        b"hosts:\n  - {name: g1, address: 10.0.0.1, identity_file: /nonexistent/key}\n",
        ":2: 警告： hosts[0](g1).identity_file: /nonexistent/key: 没有此文件",
    ),
]


@pytest.mark.parametrize(("content", "wanted"), CONFIG_REFUSALS, ids=range(len(CONFIG_REFUSALS)))
def test_config_problems_are_one_chinese_line_naming_where(
    content: bytes | None,
    wanted: str,
    chinese: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hosts = tmp_path / "hosts.yaml"
    if content is None:
        hosts.mkdir()
    else:
        hosts.write_bytes(content)
    hosts.chmod(0o700 if content is None else 0o600)
    code = console.main(["check-config", str(hosts)])
    said = capsys.readouterr()
    line = said.err.splitlines()[0]
    assert line == f"gputui: {hosts}{wanted}" or line.startswith(f"gputui: {hosts}{wanted}"), line
    assert code == (0 if "警告" in wanted else 1) and len(said.err.splitlines()) == 1
    data = set(WORD.findall(str(tmp_path))) | {"hosts", "yaml", "identity_file", "nonexistent"}
    assert english_words(said.err, data | {"key", "hosts.example.yaml", "UTF", "xff"}) == [], (
        said.err
    )


def test_a_fields_problems_are_chinese_lines_naming_where(
    chinese: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = HOSTS + "refresh_interval: yes\nbogus: 1\ndefaults: {connect_timeout: 1e5}\n"
    code, out = _check(tmp_path, text, capsys)
    where = f"gputui: {tmp_path / 'hosts.yaml'}"
    assert code == 1 and out.splitlines() == [
        f"{where}:4: refresh_interval: 必须是数字，而不是 true",
        f"{where}:5: bogus: 未知的键",
        f"{where}:6: defaults.connect_timeout: 必须是数字："
        "YAML 把 '1e5' 读作文本（请写作 100000.0）",
    ], out


def test_pydantics_and_the_models_refusals_are_chinese(
    chinese: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "refresh_interval: -1\ntheme: 5\nui: {lang: fr}\n"
        "health: {temp_warn_c: 95, temp_crit_c: 90}\nhosts:\n"
        '  - {name: "bad name", address: 10.0.0.1}\n  - {address: 10.0.0.2}\n'
        "  - {name: g1, address: 10.0.0.3, port: 70000, local: maybe}\n"
    )
    code, out = _check(tmp_path, text, capsys)
    where = f"gputui: {tmp_path / 'hosts.yaml'}"
    assert code == 1 and out.splitlines() == [
        f"{where}:1: refresh_interval: 应大于或等于 0.1",
        f"{where}:2: theme: 应为字符串：如果指的是文本，请加引号",
        f"{where}:3: ui.lang: 未知语言；已知：en, zh_CN",
        f"{where}:4: health: temp_warn_c 不能高于 temp_crit_c",
        f"{where}:6: hosts[0].name: 必须是 1-63 个字母、数字、'.'、'_' 或 '-'",
        f"{where}:7: hosts[1].name: 必须给出",
        f"{where}:8: hosts[2](g1).port: 应小于或等于 65535",
        f"{where}:8: hosts[2](g1).local: 应为布尔值（true 或 false）",
    ], out


@given(st.sampled_from(["0", "-5", "1e400", "[1]", "{a: 1}", "yes", "'x'", "0.5"]))
def test_any_bad_refresh_or_port_is_a_chinese_line(value: str) -> None:
    from gputui.config.loader import ConfigError, parse_config

    i18n.choose("zh_CN")
    try:
        for key in ("refresh_interval", "defaults: {port"):
            closing = "}" if "{" in key else ""
            text = f"{key}: {value}{closing}\nhosts: [{{name: g1, local: true}}]\n"
            try:
                parse_config(text, "h.yaml")
            except ConfigError as exc:
                for line in exc.lines:
                    words = {"refresh_interval", "defaults.port", "port", "YAML", "yes", "true"}
                    assert english_words(line, words | {"false", "h.yaml", "e400"}) == [], line
    finally:
        i18n.choose(None)


def test_the_scheduler_sections_refusals_are_chinese(
    chinese: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = HOSTS + (
        "scheduler:\n  default_class: gold\n  off_hours: {start: '25:00', end: '07:00'}\n"
        "  quotas:\n    - {group: ml, pool: a100, gpu_hours_per_week: 10}\n"
        "    - {group: ml, pool: a100, gpu_hours_per_week: 5}\n"
    )
    code, out = _check(tmp_path, text, capsys)
    assert code == 1, out
    names = {"default_class", "gold", "urgent", "normal", "low", "night", "off_hours", "start"}
    names |= {"quotas", "scheduler", "ml", "a100", "HH", "MM"} | set(WORD.findall(str(tmp_path)))
    keys = {"scheduler.off_hours.start", "scheduler.quotas"}
    assert english_words(out, names | keys | {"hosts", "yaml", "gputui"}) == [], out
    assert "'25:00' 不是 HH:MM 形式的时刻" in out
