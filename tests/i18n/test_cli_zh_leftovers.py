# ruff: noqa: RUF001 (the Chinese lines asserted on use fullwidth punctuation)
"""The command line's last English lines in Chinese: ``gputui``'s own refusals (an
unknown command, ``--theme`` before a verb, a bad ``--lang``), a ``--hosts`` that
names no file, the demo's refusals and start lines, ``health``'s findings.
Each shows no English but the test's own data."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli_zh import language
from untranslated import WORD, english_words

from gputui import entry
from gputui.cli.args import VERBS

COMMANDS = (
    frozenset({*entry.CONSOLE_COMMANDS, "head", *VERBS})
    | {w for v in VERBS for w in v.split("-")}
    | {"check", "config", "force", "free", "release", "hold"}
)
"""What the unknown-command line lists: the commands, as they are typed."""


@pytest.fixture(autouse=True)
def chinese() -> None:
    language("zh")


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = entry.main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(word=st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=12))
def test_an_unknown_command_is_said_in_chinese(
    capsys: pytest.CaptureFixture[str], word: str
) -> None:
    known = {*entry.CONSOLE_COMMANDS, "head", *VERBS}
    if word in known:
        return
    code, text = _main(capsys, word)
    assert code == 2
    assert text.startswith(f"gputui: 未知命令 '{word}'")
    assert "控制台命令：" in text and "调度命令：" in text
    assert english_words(text, COMMANDS | {word}) == []


def test_a_near_command_is_offered_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _main(capsys, "quee")
    assert code == 2
    assert text.splitlines()[0] == "gputui: 未知命令 'quee'；您是不是要用：queue, requeue？"
    assert english_words(text, COMMANDS | {"quee"}) == []


def test_theme_before_a_verb_and_a_bad_lang_in_chinese(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _main(capsys, "--theme", "dark", "queue")
    assert code == 2 and "--theme 只用于控制台" in text
    assert english_words(text, {"theme", "NAME", "queue", "dark"}) == []
    code, text = _main(capsys, "--lang", "klingon", "queue")
    assert code == 2 and "未知语言 'klingon'" in text
    assert english_words(text, {"lang", "klingon", "zh_CN"}) == []


@pytest.mark.parametrize("verb", ["queue", "health", "console"])
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_hosts_that_names_no_file_in_chinese(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    verb: str,
    how: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = tmp_path / "nothere" / "cluster.yaml"
    if how == "flag":
        argv = ["--hosts", str(missing), verb]
    else:
        monkeypatch.setenv("GPUTUI_HOSTS", str(missing))
        argv = [verb]
    code, text = _main(capsys, *argv)
    assert code != 0
    assert f"{missing}：没有这个文件" in text
    assert english_words(text, set(WORD.findall(str(missing))) | {verb, "GPUTUI_HOSTS"}) == []


def test_english_lines_are_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    language("en")
    code, text = _main(capsys, "quee")
    assert code == 2
    assert text.splitlines()[0] == "gputui: unknown command 'quee'; did you mean: queue, requeue?"
    assert text.splitlines()[1].startswith("  console commands: console, check-config")
    code, text = _main(capsys, "--lang", "xx", "queue")
    assert code == 2
    assert text == "gputui: --lang: unknown language 'xx'; known: en, zh_CN\n"
