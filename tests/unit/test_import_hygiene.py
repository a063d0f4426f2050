"""The layers of DESIGN.md, checked two ways: import-linter's contracts, and what a
fresh interpreter actually loads when it imports one layer."""

from __future__ import annotations

import json
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gputui

REPO = Path(__file__).resolve().parents[2]


def loaded_after(imports: list[str]) -> set[str]:
    code = (
        "import json, sys\n"
        + "".join(f"import {name}\n" for name in imports)
        + "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def top_levels(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def submodules(package: str) -> list[str]:
    mod = __import__(package, fromlist=["_"])
    return [f"{package}.{info.name}" for info in pkgutil.iter_modules(mod.__path__)]


def test_helper_loads_nothing_of_gputui_and_no_third_party() -> None:
    mods = loaded_after(submodules("gputui.remote"))
    gputui_mods = {m for m in mods if m.startswith("gputui.") and not m.startswith("gputui.remote")}
    assert gputui_mods == set()
    assert {"pydantic", "textual", "asyncssh", "yaml", "sqlmodel"} & top_levels(mods) == set()


def test_view_and_wire_models_load_no_io_libraries() -> None:
    mods = loaded_after(["gputui.protocol", "gputui.telemetry", "gputui.config", "gputui.text"])
    assert {"asyncssh", "textual", "sqlmodel"} & top_levels(mods) == set()


def test_widgets_load_no_ssh_or_database() -> None:
    widgets = submodules("gputui.ui.widgets")
    mods = loaded_after(widgets or ["gputui.ui.widgets"])
    assert {"asyncssh", "sqlmodel"} & top_levels(mods) == set()
    assert not any(m.startswith(("gputui.fleet", "gputui.scheduler")) for m in mods)


def test_import_linter_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("import-linter is not installed in this environment")
    result = subprocess.run([lint], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "broken" not in result.stdout.lower().replace("0 broken", "")


def test_package_version_is_single_sourced() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert f'version = "{gputui.__version__}"' in text
