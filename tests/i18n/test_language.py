"""Which language is shown: ``--lang``, then hosts.yaml's ``ui.lang``, then
``LC_ALL``, ``LC_MESSAGES``, ``LANG``, else English; a language gputui does not ship
is one clear line, never a traceback; nothing is read before the first lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui import entry
from gputui.common import i18n
from gputui.config.loader import ConfigError, load_config

ENV = ("LC_ALL", "LC_MESSAGES", "LANG")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    i18n.reset()
    return monkeypatch


@pytest.mark.parametrize(
    ("values", "wanted"),
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh_CN"),
        ({"LANG": "zh_CN.UTF-8", "LC_MESSAGES": "en_US.UTF-8"}, "en"),
        ({"LANG": "en_GB.UTF-8", "LC_MESSAGES": "zh_CN.GB18030"}, "zh_CN"),
        ({"LC_MESSAGES": "zh_CN", "LC_ALL": "C"}, "en"),  # LC_ALL set: it decides
        ({"LC_ALL": "zh_SG.UTF-8", "LANG": "en_US"}, "zh_CN"),
        ({"LANG": "de_DE.UTF-8"}, "en"),  # not shipped: the source strings
        ({"LANG": "C.UTF-8"}, "en"),
    ],
)
def test_the_environment_in_posix_order(
    env: pytest.MonkeyPatch, values: dict[str, str], wanted: str
) -> None:
    for name, value in values.items():
        env.setenv(name, value)
    assert i18n.language() == wanted


def test_lang_beats_the_config_which_beats_the_environment(env: pytest.MonkeyPatch) -> None:
    env.setenv("LANG", "zh_CN.UTF-8")
    i18n.configure("en")
    assert i18n.language() == "en" and i18n._("MODEL") == "MODEL"
    i18n.choose("zh")
    assert i18n.language() == "zh_CN" and i18n._("MODEL") == "型号"
    i18n.configure(None)
    i18n.choose(None)
    assert i18n._("STATE") == "状态"  # the environment's again


def test_a_verbs_config_is_read_on_the_first_lookup_only(env: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def reader() -> str:
        asked.append(1)
        return "zh_CN"

    i18n.configure_later(reader)
    assert asked == []  # machine output never looks anything up: the config is not read
    assert i18n._("USER") == "用户" and i18n._("NAME") == "名称"
    assert asked == [1]


def test_a_reader_that_fails_leaves_the_environment(env: pytest.MonkeyPatch) -> None:
    env.setenv("LANG", "zh_CN.UTF-8")

    def broken() -> str:
        raise OSError("unreadable")

    i18n.configure_later(broken)
    assert i18n.language() == "zh_CN"


@pytest.mark.parametrize("argv", [["--lang", "klingon", "queue"], ["--lang=", "gpus"], ["--lang"]])
def test_an_unknown_lang_is_one_line_and_exit_2(
    env: pytest.MonkeyPatch, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert entry.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui: --lang: unknown language") and err.count("\n") == 1
    assert "known: en, zh_CN" in err and "Traceback" not in err


def test_ui_lang_in_hosts_yaml_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("hosts: [{name: gpu01, local: true}]\nui: {lang: zh}\n")
    assert load_config(good).ui.lang == "zh_CN"
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [{name: gpu01, local: true}]\nui: {lang: xx_YY}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    assert any("unknown language" in line and "ui" in line for line in caught.value.lines)


@given(st.text(max_size=80))
def test_any_value_names_a_shipped_language_or_none(value: str) -> None:
    assert i18n.language_of(value) in (None, *i18n.LANGUAGES)
    try:
        i18n.choose(value)
    except ValueError as exc:
        line = str(exc)
        assert line.startswith("--lang: unknown language") and "\n" not in line
        assert line.isprintable() and len(line) < 120
    finally:
        i18n.reset()


def test_job_words_cover_the_heads_states_reasons_and_card_states() -> None:
    from gputui.common import job_words
    from gputui.scheduler.head.gpu_table import STATES as CARD_STATES
    from gputui.scheduler.policy import model
    from gputui.scheduler.policy.rows import FINAL_JOB_STATES, LIVE_JOB_STATES, PENDING_JOB_STATES

    assert job_words.STATES == LIVE_JOB_STATES | PENDING_JOB_STATES | FINAL_JOB_STATES
    codes = {
        v
        for k, v in vars(model).items()
        if k.isupper() and isinstance(v, str) and v[:1].isupper()  # not DEFAULT_VENDOR
    }
    assert codes == job_words.REASONS
    assert set(CARD_STATES) == job_words.GPU_STATES


def test_a_reason_shows_its_code_translated_and_its_detail_as_it_is(
    env: pytest.MonkeyPatch,
) -> None:
    from gputui.common.job_words import reason_text, state_text

    i18n.choose("zh_CN")
    assert reason_text("Resources: 8 GPUs on one host") == "资源不足: 8 GPUs on one host"
    assert reason_text("Resourceful") == "Resourceful" and reason_text("-") == "-"
    assert state_text("queued") == "排队中" and state_text("PENDING") == "PENDING"
    i18n.choose("en")
    assert reason_text("QuotaExceeded") == "QuotaExceeded" and state_text("queued") == "queued"


class _Stop(Exception):
    pass


def test_the_console_takes_ui_lang_from_hosts_yaml_below_lang(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gputui.cli import console, console_app

    seen: list[str] = []

    def app(*_args: object, **_kw: object) -> None:
        seen.append(i18n._("MODEL"))
        raise _Stop

    env.setattr(console_app, "console_app", app)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts: [{name: gpu01, local: true}]\nui: {lang: zh}\n")
    hosts.chmod(0o644)
    with pytest.raises(_Stop):
        console.run_console(str(hosts), None)
    i18n.choose("en")
    with pytest.raises(_Stop):
        console.run_console(str(hosts), None)
    assert seen == ["型号", "MODEL"]


def test_words_made_per_language_follow_every_change_of_it(env: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    @i18n.per_language
    def words() -> tuple[str, str]:
        made.append(i18n.language())
        return i18n._("MODEL"), i18n.pgettext("notice", "started")

    assert words() == words() == ("MODEL", "started")
    assert made == ["en"]  # looked up once, however often asked
    i18n.choose("zh_CN")
    assert words() == words() == ("型号", "开始")
    i18n.configure("en")  # below --lang: the words stay Chinese, made again all the same
    assert words() == ("型号", "开始")
    i18n.choose(None)
    assert words() == ("MODEL", "started")
    i18n.reset()
    env.setenv("LANG", "zh_CN.UTF-8")
    assert words() == ("型号", "开始")
    i18n.configure_later(lambda: "en")
    assert words() == ("MODEL", "started")
    assert made == ["en", "zh_CN", "zh_CN", "en", "zh_CN", "en"]
