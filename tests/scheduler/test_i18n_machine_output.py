"""Machine output is the same in every language: ``--json`` and ``--csv`` of the
verbs a script reads, from a real head, byte for byte under ``LANG=zh_CN.UTF-8`` and
under English, while the tables a person reads change language."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import ThreadedHead

from gputui import entry
from gputui.common import i18n

MACHINE = (
    ("queue", "--all", "--json"),
    ("claims", "--all", "--json"),
    ("gpus", "--json"),
    ("usage", "--since", "2026-01-01", "--until", "2026-01-07", "--json"),
    ("usage", "--since", "2026-01-01", "--until", "2026-01-07", "--daily", "--csv"),
    ("show", "1", "--json"),
)


@pytest.fixture
def th(tmp_path: Path) -> Iterator[ThreadedHead]:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as head:
        yield head
        assert head.problems == []


def said(th: ThreadedHead, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert entry.main(["--socket", str(th.sock), *argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def in_language(
    monkeypatch: pytest.MonkeyPatch, lang: str, th: ThreadedHead, capsys: pytest.CaptureFixture[str]
) -> dict[tuple[str, ...], str]:
    i18n.reset()
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", lang)
    out = {argv: said(th, capsys, *argv) for argv in MACHINE}
    out[("queue",)] = said(th, capsys, "queue")
    out[("gpus",)] = said(th, capsys, "gpus")
    return out


def test_json_and_csv_are_byte_identical_in_chinese_and_english(
    th: ThreadedHead, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A claim and a job that waits for the claimed card (Resources): states, a reason
    # code and a card state in every listing.
    said(th, capsys, "claim", "gpu01:0", "--note", "mine")
    said(th, capsys, "submit", "-g", "2", "--name", "big", "--", "true")
    english = in_language(monkeypatch, "en_US.UTF-8", th, capsys)
    chinese = in_language(monkeypatch, "zh_CN.UTF-8", th, capsys)
    for argv in MACHINE:
        assert chinese[argv] == english[argv], argv
    assert '"Resources"' in english[("queue", "--all", "--json")]
    # The tables a person reads did change language (so the above is no accident).
    assert english[("queue",)].split()[:2] == ["JOBID", "USER"]
    assert chinese[("queue",)].split()[:2] == ["作业号", "用户"]
    assert "资源不足" in chinese[("queue",)] and "排队中" in chinese[("queue",)]
    assert "已认领" in chinese[("gpus",)] and "claimed" in english[("gpus",)]


def test_lang_before_the_verb_beats_the_environment(
    th: ThreadedHead, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    i18n.reset()
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    assert entry.main(["--lang", "en", "--socket", str(th.sock), "queue"]) == 0
    assert capsys.readouterr().out.split()[0] == "JOBID"
    i18n.reset()
    monkeypatch.setenv("LC_ALL", "C")
    assert entry.main(["--lang=zh", "--socket", str(th.sock), "queue"]) == 0
    assert capsys.readouterr().out.split()[0] == "作业号"
    i18n.reset()


def test_ui_lang_in_hosts_yaml_chooses_the_verbs_language(
    th: ThreadedHead,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts: [{name: gpu01, local: true}]\nui: {lang: zh_CN}\n")
    hosts.chmod(0o644)
    i18n.reset()
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    argv = ["--hosts", str(hosts), "--socket", str(th.sock), "queue"]
    assert entry.main(argv) == 0
    assert capsys.readouterr().out.split()[0] == "作业号"
    i18n.reset()
    assert entry.main(["--lang", "en", *argv]) == 0  # --lang first
    assert capsys.readouterr().out.split()[0] == "JOBID"
    i18n.reset()
