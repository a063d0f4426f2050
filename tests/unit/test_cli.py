"""The command line as a user meets it: summaries, one-line errors, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_check_config_example_ok(isolated_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The key and known_hosts files the example names exist (check-config looks).
    (isolated_home / ".ssh").mkdir()
    (isolated_home / ".ssh/id_ed25519").write_text("key\n")
    (isolated_home / ".ssh/known_hosts_lab").write_text("")
    assert main(["check-config", str(REPO / "hosts.example.yaml")]) == 0
    out = capsys.readouterr().out
    assert "hosts.example.yaml: OK" in out
    assert "gpu01" in out and "sim01" in out and "head01" in out
    assert len(out.splitlines()) <= 24


def test_check_config_errors_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "hosts.yaml"
    bad.write_text("hosts:\n  - name: a\n    colour: red\n  - name: b\n    port: 0\n")
    assert main(["check-config", str(bad)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"gputui: {bad}:3: hosts[0](a).colour: unknown key",
        f"gputui: {bad}:5: hosts[1](b).port: Input should be greater than or equal to 1",
    ]


def test_check_config_uses_search_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "env.yaml"
    cfg.write_text("hosts: [{name: x}]\n")
    monkeypatch.setenv("GPUTUI_HOSTS", str(cfg))
    assert main(["check-config"]) == 0
    assert f"{cfg}: OK" in capsys.readouterr().out


def test_console_without_config_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no hosts.yaml found" in err[0]


def test_demo_rejects_impossible_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--hosts", "4", "--gpus", "2"]) == 2
    assert "fewer than --hosts" in capsys.readouterr().err


def test_no_traceback_for_bad_arguments() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gputui.cli", "demo", "--hosts", "lots"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "'lots' is not a whole number" in result.stderr


def test_check_config_rejects_an_unknown_theme(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "hosts.yaml"
    cfg.write_text("hosts: [{name: a}]\ntheme: gputui-drak\n")
    assert main(["check-config", str(cfg)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"gputui: {cfg}:2: theme: unknown theme 'gputui-drak'; known themes: ")
    assert "gputui-dark" in err[0]


def test_unknown_theme_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "hosts.yaml"
    cfg.write_text("hosts: [{name: a}]\n")
    assert main(["--hosts", str(cfg), "--theme", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gputui: unknown theme 'nope'; known themes: ")


def test_demo_takes_no_hosts_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--hosts", "x.yaml", "demo"]) == 2
    assert "the demo makes its own hosts" in capsys.readouterr().err


def test_a_broken_user_theme_is_refused_with_its_reason(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    themes = isolated_home / ".config/gputui/themes"
    themes.mkdir(parents=True)
    (themes / "ugly.yaml").write_text("name: ugly\ndark: true\nprimary: not-a-colour\n")
    cfg = tmp_path / "hosts.yaml"
    cfg.write_text("hosts: [{name: a}]\n")
    assert main(["--hosts", str(cfg), "--theme", "ugly"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("gputui: theme 'ugly' cannot be used: ") and "primary" in err[0]
