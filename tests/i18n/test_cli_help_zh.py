"""``gputui --help`` and every command's and verb's ``--help`` in Simplified Chinese:
no English left but the flags, metavars, verb names and the syntax a user types;
argparse's own words (``usage:``, ``options``, its errors) and the argument types'
errors in Chinese; the hand-laid blocks (how the head is found, the verbs) lined up
by display cells. English is what it was."""

# ruff: noqa: RUF001, RUF003 (the Chinese a user reads, its full-width marks included)
from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from untranslated import WORD, english_words

from gputui import entry
from gputui.cli import args, console
from gputui.common import i18n
from gputui.common.jobscript import add_job_options
from gputui.common.text import cells

SYNTAX = frozenset(
    """
    now mon tomorrow completed failed timeout killed cancelled
    user group project pool start end fail preempt claim fence quota idle admin
    free claimed job rogue stray drained fenced unhealthy off report lock
    urgent normal low night NONE ALL python train.py train.sh sacct squeue eval
    export socket host head hello apprise webhook uuid pid cron
    Slack Feishu Lark DingTalk WeCom a100 rtx3090 ARRAY_TASK CLK-LOW requeued
    GPUTUI GPUTUI_HEAD_SOCKET GPUTUI_HOSTS SBATCH gres LC_ALL LC_MESSAGES LANG
    ui.lang jobs.runtime jobs.interactive_time head.allow_gpu_reset head.socket
    private_data power.mode identity_file known_hosts root config
    gputui-dark gputui-light gputui-high-contrast run.sh backup Unix URL
    /run/gputui/head.sock ~/.config/gputui/hosts.yaml /etc/gputui/hosts.yaml 4xrtx3090
    YYYY-MM-DD HOST:INDEX CMD JOB ARGS zh_CN --gres=gpu:N --job-name --dependency
    --print-unit --check
    """.split()  # noqa: SIM905 (a list of words reads better as words)
)
"""What a user types, and names, that the help quotes as they are: option values
(``--state completed``, ``--by pool``, ``--from "mon 09:00"``), commands, config
keys, environment variables, chat services, the demo's card states."""


def _parsers() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(the words before --help, its parser) for gputui, its commands and verbs."""
    top = console.parser()
    yield (), top
    for name, sub in zip(_names(top), args.verbs_of(top), strict=True):
        yield (name,), sub
    verbs = args.parser()
    for name, sub in zip(_names(verbs), args.verbs_of(verbs), strict=True):
        yield (name,), sub
        for action, inner in zip(_names(sub), args.verbs_of(sub), strict=True):
            yield (name, action), inner


def _names(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def _allowed(parser: argparse.ArgumentParser) -> set[str]:
    """gputui's flags, metavars, positionals, choices and verbs (a help names other
    commands' too), and ``SYNTAX``."""
    words = {w for text in SYNTAX for w in WORD.findall(text)}
    words |= set(args.VERBS) | set(entry.CONSOLE_COMMANDS)
    for _words, p in [*_parsers(), ((), args.parser()), ((), parser)]:
        words |= set(_names(p))
        for action in p._actions:
            found = [*action.option_strings, action.dest or "", (action.dest or "").upper()]
            metavar = action.metavar
            found += list(metavar) if isinstance(metavar, tuple) else [metavar or ""]
            found += [str(c) for c in action.choices or ()]
            for text in found:
                words.update(WORD.findall(text))
    return words


COMMANDS = [words for words, _ in _parsers()]


@pytest.fixture
def chinese(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("COLUMNS", "80")
    i18n.reset()
    yield
    i18n.reset()


def _help(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        entry.main([*words, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "gputui")
def test_every_help_is_chinese(
    words: tuple[str, ...], chinese: None, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = dict(_parsers())[words]
    out = _help(words, capsys)
    assert english_words(out, _allowed(parser)) == []
    assert out.startswith("用法:") and "显示此帮助信息并退出" in out


@pytest.mark.parametrize("words", [(), ("claim",), ("notify", "set"), ("health",)])
def test_english_help_is_still_english(
    words: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LC_ALL", "C")
    i18n.reset()
    out = _help(words, capsys)
    assert out.startswith("usage: gputui") and "show this help message and exit" in out
    assert "options:" in out and not re.search(r"[\u4e00-\u9fff]", out)


def test_the_hand_laid_blocks_line_up_by_cells(
    chinese: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """How the head is found and the scheduler's verbs: every line in 80 cells, each
    text in its column (34 and 16 cells in), wide characters counted two."""
    out = _help((), capsys)
    epilog = out[out.index("调度器（") :].splitlines()
    assert all(cells(line) <= args.HELP_WIDTH for line in epilog), epilog
    steps = epilog[epilog.index("查找调度主节点（按以下顺序，取第一个适用的）：") + 1 :]
    for line in steps[:-2]:
        lead = line[: len(line) - len(line.lstrip())]
        if re.match(r"  \d\. ", line):  # a step: its text starts at cell 34
            _term, text = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            assert cells(line[: line.index(text)]) == 34, line
        else:
            assert len(lead) == 34, line
    verbs = epilog[1 : epilog.index("查找调度主节点（按以下顺序，取第一个适用的）：") - 1]
    for line in verbs:
        if line.startswith("    "):
            assert len(line) - len(line.lstrip()) == 16, line
    assert any(line.startswith("  head          运行") for line in verbs)


def test_the_usage_lines_after_the_first_line_up_under_the_chinese_prefix(
    chinese: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _help(("submit",), capsys).splitlines()
    assert out[0].startswith("用法: gputui submit [-h]")
    column = cells("用法: gputui submit ")
    assert out[1][:column].strip() == "" and out[1][column] == "["
    assert all(cells(line) <= 80 for line in out[:8])


def test_the_job_options_help_is_all_in_the_catalogue() -> None:
    """``submit``'s job options come from ``gputui.common.jobscript``; ``args`` marks
    their help for the catalogue (``JOB_OPTION_WORDS``): the two must agree."""
    p = argparse.ArgumentParser()
    add_job_options(p)
    helps = {a.help for a in p._actions if a.help and a.dest != "help"}
    assert helps <= set(args.JOB_OPTION_WORDS), helps - set(args.JOB_OPTION_WORDS)


USAGE_ERRORS = [
    (["claim", "--bogus"], "无法识别的参数"),
    (["book", "-g", "1"], "缺少以下必需参数：--for"),
    (["notify"], "缺少以下必需参数：ACTION"),
    (["demo", "--power", "high"], "无效的选项值"),
    (["claim", "--for"], "需要一个参数值"),
    (["claim", "-g", "many"], "不是 GPU 数量"),
    (["claim", "-g", "0"], "GPU 数量应为 1 到"),
    (["claim", "--for", "soon"], "不是时长"),
    (["claim", "--for", "-2h"], "需要一个参数值"),
    (["claim", "--mig", "huge"], "不是 MIG 配置"),
    (["show", "twelve"], "不是作业号"),
    (["cancel", "12_x"], "不是作业号（或 ARRAY_TASK"),
    (["submit", "--after", "a,b"], "不是作业号"),
    (["unbook", "bx"], "不是预约编号"),
    (["force-free", "nogpu", "--reason", "r"], "不是 HOST:GPU"),
    (["demo", "--hosts", "0"], "必须至少为 1"),
    (["demo", "--hosts", "two"], "不是整数"),
    (["queue", "--socket", "/nowhere"], "须写在动词之前"),
    (["--bogus"], "无法识别的参数"),
]


@pytest.mark.parametrize(("argv", "wanted"), USAGE_ERRORS, ids=" ".join)
def test_usage_errors_are_chinese(
    argv: list[str], wanted: str, chinese: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        entry.main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0].startswith("用法: gputui") and all(r.startswith(" ") for r in lines[1:-1])
    last = lines[-1]
    assert "：错误：" in last and wanted in last, err
    typed = {w for a in argv for w in WORD.findall(a)}
    assert english_words(last, typed | _allowed(args.parser()) | {"ACTION"}) == []


@given(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12))
def test_any_bad_gpu_count_or_duration_is_one_chinese_line(text: str) -> None:
    """What argparse says of a value an argument type refuses, whatever was typed:
    gputui's own types say it in Chinese, those of gputui.common are translated."""
    i18n.choose("zh_CN")
    try:
        for make in (args.gpu_count, args.parse_duration, args._job_ref, args.target):
            try:
                make(text)
            except argparse.ArgumentTypeError as exc:
                said = args.argparse_said(f"argument X: {exc}")
                assert said.startswith("参数 X：") and "\n" not in said
                allowed = set(WORD.findall(text)) | {"HOST", "GPU", "ARRAY_TASK", "uuid"}
                assert english_words(said, allowed) == [], said
    finally:
        i18n.choose(None)


@given(
    st.text(
        st.one_of(
            st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
            st.sampled_from(list("abc xyz,.\uff0c\u3002\uff08\uff09\u3001(:")),
        ),
        max_size=200,
    ),
    st.integers(min_value=8, max_value=120),
)
def test_wrapping_by_cells_keeps_every_word_and_every_line_in_its_width(
    text: str, width: int
) -> None:
    lines = args.wrap_cells(text, width)
    assert "".join("".join(lines).split()) == "".join(text.split())
    for n, line in enumerate(lines):
        assert cells(line) <= width or len(args.token().findall(line)) == 1, line
        if n and line[0] in "\uff0c\u3002\uff09\u3001":  # ， 。 ） 、
            # a line starts with a closing mark only where the text had a space before it
            assert " " + line[0] in " ".join(text.split()), (text, lines)
        if n < len(lines) - 1 and line[-1] == "\uff08":  # nor ends with an opening one
            assert line[-1] + " " in " ".join(text.split()), (text, lines)


def test_a_verbs_help_follows_hosts_yamls_ui_lang_below_lang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts: [{name: gpu01, local: true}]\nui: {lang: zh_CN}\n")
    hosts.chmod(0o600)
    monkeypatch.setenv("LC_ALL", "C")
    i18n.reset()
    assert _help(("--hosts", str(hosts), "claim"), capsys).startswith("用法: gputui claim")
    i18n.reset()
    with pytest.raises(SystemExit):
        entry.main(["--hosts", f"{hosts}", "book", "-g", "1"])
    assert "缺少以下必需参数：--for" in capsys.readouterr().err
    i18n.reset()
    out = _help(("--lang", "en", "--hosts", str(hosts), "claim"), capsys)
    assert out.startswith("usage: gputui claim")


@pytest.mark.parametrize(
    ("text", "width", "wanted"),
    [
        ("一二三四五六七，八", 14, ["一二三四五六", "七，八"]),
        ("命令行（:usage、:health）", 18, ["命令行（:usage、", ":health）"]),
        ("its socket: here, or over", 12, ["its socket:", "here, or", "over"]),
        ("打开命令行（:usage、:health）", 14, ["打开命令行", "（:usage、", ":health）"]),
    ],
)
def test_a_closing_mark_stays_on_the_line_of_what_it_closes(
    text: str, width: int, wanted: list[str]
) -> None:
    assert args.wrap_cells(text, width) == wanted
