"""The command line as a user meets it: summaries, one-line errors, exit codes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli.console import main

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
        [sys.executable, "-m", "gputui.cli.console", "demo", "--hosts", "lots"],
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


def test_empty_hosts_is_the_same_one_line_verdict_in_check_config_and_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "hosts.yaml"
    empty.write_text("refresh_interval: 2\nhosts: []\n")
    expected = [
        f"gputui: {empty}:2: hosts: no hosts listed;"
        " add at least one under 'hosts:' (see hosts.example.yaml)"
    ]
    assert main(["check-config", str(empty)]) == 1
    checked = capsys.readouterr()
    assert checked.out == "" and checked.err.splitlines() == expected
    assert main(["--hosts", str(empty)]) == 1
    assert capsys.readouterr().err.splitlines() == expected
    # No hosts key at all: the same verdict, at line 1.
    empty.write_text("theme: gputui-dark\n")
    assert main(["check-config", str(empty)]) == 1
    assert capsys.readouterr().err.startswith(f"gputui: {empty}:1: hosts: no hosts listed;")


def test_check_config_names_missing_key_and_known_hosts_files(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (isolated_home / ".ssh").mkdir()
    (isolated_home / ".ssh/present").write_text("key\n")
    (isolated_home / ".ssh/adir").mkdir()
    cfg = tmp_path / "hosts.yaml"
    cfg.write_text(
        "defaults:\n"
        "  identity_file: ~/.ssh/present\n"
        "  known_hosts: ~/.ssh/nope_kh\n"
        "hosts:\n"
        "  - name: a\n"
        "    identity_file: ~/.ssh/x\n"
        "  - name: b\n"
        "    known_hosts: ~/.ssh/adir\n"
        "  - {name: c, identity_file: ~/.ssh/present}\n"
    )
    assert main(["check-config", str(cfg)]) == 1
    home = isolated_home
    # Missing files are warnings (said first); a directory in their place is an error.
    assert capsys.readouterr().err.splitlines() == [
        f"gputui: {cfg}:3: warning: defaults.known_hosts: ~/.ssh/nope_kh"
        f" ({home}/.ssh/nope_kh): no such file",
        f"gputui: {cfg}:6: warning: hosts[0](a).identity_file: ~/.ssh/x ({home}/.ssh/x):"
        " no such file",
        f"gputui: {cfg}:8: hosts[1](b).known_hosts: ~/.ssh/adir ({home}/.ssh/adir):"
        " is a directory, not a file",
    ]
    assert main(["check-config", "--strict", str(cfg)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"gputui: {cfg}:8: hosts[1](b).known_hosts: ~/.ssh/adir ({home}/.ssh/adir):"
        " is a directory, not a file",
        f"gputui: {cfg}:3: defaults.known_hosts: ~/.ssh/nope_kh ({home}/.ssh/nope_kh):"
        " no such file",
        f"gputui: {cfg}:6: hosts[0](a).identity_file: ~/.ssh/x ({home}/.ssh/x): no such file",
    ]


def test_check_config_of_the_example_on_a_new_machine_warns_and_passes(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example names ~/.ssh files a new machine does not have: as OpenSSH warns of
    a missing identity file and goes on, check-config warns (FILE:LINE) and exits 0;
    --strict makes the same lines errors."""
    example = REPO / "hosts.example.yaml"
    lines = example.read_text(encoding="utf-8").splitlines()
    key_line = 1 + next(i for i, t in enumerate(lines) if "identity_file: ~/.ssh/id_ed25519" in t)
    kh_line = 1 + next(i for i, t in enumerate(lines) if "known_hosts: ~/.ssh/known_hosts_lab" in t)
    home = isolated_home
    assert main(["check-config", str(example)]) == 0
    captured = capsys.readouterr()
    assert "hosts.example.yaml: OK" in captured.out
    assert captured.err.splitlines() == [
        f"gputui: {example}:{key_line}: warning: hosts[0](gpu01).identity_file:"
        f" ~/.ssh/id_ed25519 ({home}/.ssh/id_ed25519): no such file",
        f"gputui: {example}:{kh_line}: warning: hosts[1](gpu02).known_hosts:"
        f" ~/.ssh/known_hosts_lab ({home}/.ssh/known_hosts_lab): no such file",
    ]
    assert main(["check-config", "--strict", str(example)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"gputui: {example}:{key_line}: hosts[0](gpu01).identity_file:"
        f" ~/.ssh/id_ed25519 ({home}/.ssh/id_ed25519): no such file",
        f"gputui: {example}:{kh_line}: hosts[1](gpu02).known_hosts:"
        f" ~/.ssh/known_hosts_lab ({home}/.ssh/known_hosts_lab): no such file",
    ]


def test_check_config_reports_theme_and_file_problems_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "hosts.yaml"
    missing = tmp_path / "key"
    cfg.write_text(f"hosts:\n  - name: a\n    identity_file: {missing}\ntheme: nope\n")
    assert main(["check-config", str(cfg)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0] == f"gputui: {cfg}:3: warning: hosts[0](a).identity_file: {missing}: no such file"
    assert err[1].startswith(f"gputui: {cfg}:4: theme: unknown theme 'nope'")
    assert main(["check-config", "--strict", str(cfg)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].startswith(f"gputui: {cfg}:4: theme: unknown theme 'nope'")
    assert err[1] == f"gputui: {cfg}:3: hosts[0](a).identity_file: {missing}: no such file"


@pytest.mark.parametrize("command", [["check-config"], []], ids=["check-config", "console"])
def test_a_directory_fifo_or_device_as_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for path, kind in [
        (tmp_path, "a directory"),
        (fifo, "a FIFO (named pipe)"),
        (Path("/dev/null"), "a character device"),
    ]:
        argv = [*command, str(path)] if command else ["--hosts", str(path)]
        assert main(argv) == 1
        assert capsys.readouterr().err.splitlines() == [
            f"gputui: {path}: is {kind}, not a config file"
        ]


def test_a_hostile_pool_name_never_reaches_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "hosts.yaml"
    # OSC 0 retitles the terminal, OSC 52 writes the clipboard.
    cfg.write_text(
        'hosts:\n  - name: a\n    pool: "\\e]0;owned\\a\\e]52;c;aGVsbG8=\\a"\n'
        '  - {name: b, labels: {"\\e[2J": x}}\n'
    )
    for argv in (["check-config", str(cfg)], ["--hosts", str(cfg)]):
        assert main(argv) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        err = captured.err.splitlines()
        assert len(err) == 2
        assert err[0].startswith(f"gputui: {cfg}:3: hosts[0](a).pool: the value contains U+001B")
        assert err[1].startswith(f"gputui: {cfg}:4: hosts[1](b).labels: a key contains U+001B")
        for line in err:
            assert not re.search("[\x00-\x1f\x7f-\x9f]", line), ascii(line)


def test_the_summary_of_a_file_with_an_escape_in_its_name_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "evil\x1b]0;owned\x07.yaml"
    cfg.write_text("hosts: [{name: a}]\n")
    assert main(["check-config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "OK" in out.splitlines()[0]
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", out), ascii(out)


def test_port_true_is_refused_not_taken_as_port_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "hosts.yaml"
    cfg.write_text("hosts:\n  - name: a\n    port: true\n")
    assert main(["check-config", str(cfg)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"gputui: {cfg}:3: hosts[0](a).port: must be a number, not true"
    ]
