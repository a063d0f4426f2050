"""The project's own packaging: `make demo` installs gputui alone (no test, lint or
type tools), `make test` the dev extras, and building the package (a wheel, and the
editable install both make targets do) draws no warning from setuptools about how
the project is laid out or described."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WARNING = re.compile(r"Warning\b|warnings\.warn|^\s*!!\s*$", re.MULTILINE)
# pip's own notes about the machine's index configuration are not the project's.
PIP_OWN = re.compile(
    r"^WARNING: (Location '.*' is ignored|The directory .* is not owned).*$\n?", re.MULTILINE
)


def _make_n(target: str) -> str:
    """What ``make TARGET`` would run from scratch (nothing is run)."""
    done = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_make_demo_installs_gputui_alone_and_make_test_the_dev_extras() -> None:
    demo = _make_n("demo")
    assert "pip install --quiet -e .\n" in demo, demo
    assert "[dev]" not in demo, demo
    test = _make_n("test")
    assert "pip install --quiet -e '.[dev]'" in test, test


def _source(tmp_path: Path) -> Path:
    """The files a build reads, copied (a build writes build/ and *.egg-info beside them)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "gputui", src / "gputui", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def _pip(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=240
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    return PIP_OWN.sub("", out)


@pytest.mark.timeout(300)
def test_the_wheel_builds_without_warnings_and_carries_its_data(tmp_path: Path) -> None:
    out = _pip("wheel", "-v", "--no-deps", "-w", str(tmp_path / "wheel"), str(_source(tmp_path)))
    warnings = [m.group(0) for m in WARNING.finditer(out)]
    assert not warnings, out[-6000:]
    (wheel,) = (tmp_path / "wheel").glob("gputui-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "gputui/py.typed",
        "gputui/ui/gputui.tcss",
        "gputui/themes/gputui-dark.yaml",
        "gputui/scheduler/units/gputui-head.service",
        "gputui/scheduler/units/gputui.tmpfiles",
        "gputui/scheduler/store/migrations/alembic.ini",
        "gputui/scheduler/store/migrations/script.py.mako",
        "gputui/locale/zh_CN/LC_MESSAGES/gputui.mo",
    ):
        assert data in names, data


@pytest.mark.timeout(300)
def test_the_editable_install_draws_no_warning(tmp_path: Path) -> None:
    out = _pip(
        "install",
        "-v",
        "--no-deps",
        "--ignore-installed",
        "-e",
        str(_source(tmp_path)),
        "--prefix",
        str(tmp_path / "p"),
    )
    warnings = [m.group(0) for m in WARNING.finditer(out)]
    assert not warnings, out[-6000:]
