"""Run ``gputui`` as a user does: a subprocess on a hosts.yaml written for the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gputui(tmp_path: Path, hosts_yaml: str, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``gputui --hosts FILE ARGS...``."""
    config = tmp_path / "hosts.yaml"
    config.write_text(hosts_yaml, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "gputui.entry", "--hosts", str(config), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr
