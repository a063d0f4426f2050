"""What ships for operators and newcomers: the systemd unit and tmpfiles rule as
printed, and `gputui --help` naming the scheduler's verbs."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

GPUTUI = [sys.executable, "-m", "gputui"]


def _printed(*flags: str, path: str = "/usr/bin:/bin") -> str:
    env = dict(os.environ, PATH=path)  # no gputui on PATH: a venv that is not activated
    done = subprocess.run(
        [*GPUTUI, "head", *flags], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_unit_starts_this_installations_gputui() -> None:
    unit = _printed("--print-unit")
    (exec_line,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    argv = shlex.split(exec_line.removeprefix("ExecStart="))
    at = argv.index("head")
    assert argv[at:] == ["head", "--hosts", "/etc/gputui/hosts.yaml"]
    program = argv[:at]
    assert Path(program[0]).is_absolute() and os.access(program[0], os.X_OK), program
    # What the unit would run starts, and is this gputui.
    again = subprocess.run(
        [*program, "head", "--print-tmpfiles"], capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == _printed("--print-tmpfiles")
    for hardening in ("NoNewPrivileges=yes", "UMask=0077", "RuntimeDirectory=gputui"):
        assert hardening in unit


@pytest.mark.parametrize("flag", ["--print-unit", "--print-tmpfiles"])
def test_python_dash_m_gputui_is_the_gputui_command(flag: str) -> None:
    assert _printed(flag, path=os.environ.get("PATH", "")).strip()


def test_gputui_help_names_every_scheduler_verb() -> None:
    from gputui.cli.args import VERBS

    done = subprocess.run([*GPUTUI, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    words = set(done.stdout.replace(",", " ").split())
    assert {"head", *VERBS} <= words, sorted({"head", *VERBS} - words)
