"""The layers of DESIGN.md, checked two ways: import-linter's contracts, and what a
fresh interpreter actually loads when it imports one layer."""

from __future__ import annotations

import ast
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


def every_module(package: str) -> list[str]:
    """``package``'s modules, those of its subpackages included."""
    mod = __import__(package, fromlist=["_"])
    return [info.name for info in pkgutil.walk_packages(mod.__path__, f"{package}.")]


def test_helper_loads_nothing_of_gputui_and_no_third_party() -> None:
    helper = every_module("gputui.remote")
    assert "gputui.remote.sim.engine" in helper
    mods = loaded_after(helper)
    gputui_mods = {m for m in mods if m.startswith("gputui.") and not m.startswith("gputui.remote")}
    assert gputui_mods == set()
    assert {"pydantic", "textual", "asyncssh", "yaml", "sqlmodel"} & top_levels(mods) == set()


def remote_imports(path: Path, package: str = "gputui.remote") -> list[tuple[int, str]]:
    """(line, what) for every import in one helper file of ``package``, relative ones
    resolved against it (in ``gputui.remote``, ``..x`` names ``gputui.x``), plus
    ``__import__`` and ``importlib.import_module`` calls on a constant name."""
    parts = package.split(".")
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: max(0, len(parts) + 1 - node.level)]
                if node.module is None:  # from .. import x: x is a module of the base
                    found += [(node.lineno, ".".join([*base, a.name])) for a in node.names]
                else:
                    found.append((node.lineno, ".".join([*base, node.module])))
            else:
                found.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in ("__import__", "import_module") and isinstance(first, ast.Constant):
                found.append((node.lineno, str(first.value)))
    return found


def escapes_the_helper(module: str) -> bool:
    """A gputui module other than the helper's own (the root package included): the
    helper is shipped alone, as ``gputui_remote``, and would not find it on a host."""
    return module == "gputui" or (
        module.startswith("gputui.") and not module.startswith("gputui.remote")
    )


def test_the_helper_source_imports_nothing_of_gputui_outside_itself() -> None:
    """The written rule beside import-linter's contract: every helper file's imports,
    relative ones that climb out and dynamic ones too."""
    remote = REPO / "gputui" / "remote"
    files = sorted(remote.rglob("*.py"))
    assert len(files) >= 8 and remote / "sim" / "engine.py" in files
    bad = [
        f"{path.relative_to(remote)}:{line}: {module}"
        for path in files
        for line, module in remote_imports(path, package_of(path, remote))
        if escapes_the_helper(module)
    ]
    assert bad == []


def package_of(path: Path, remote: Path) -> str:
    """The package a helper file is in: ``gputui.remote``, or a subpackage of it."""
    return ".".join(("gputui", "remote", *path.parent.relative_to(remote).parts))


def test_the_rule_sees_every_way_out(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import gputui.common.text\n"
        "from gputui import config\n"
        "from .. import telemetry\n"
        "from ..fleet import link\n"
        "import importlib\n"
        "importlib.import_module('gputui.ui')\n"
        "__import__('gputui')\n"
        "from . import wire\n"
        "from .sim import SimNvml\n"
    )
    escaping = [m for _, m in remote_imports(probe) if escapes_the_helper(m)]
    assert escaping == [
        "gputui.common.text",
        "gputui",
        "gputui.telemetry",
        "gputui.fleet",
        "gputui.ui",
        "gputui",
    ]
    # One folder down, ``..`` is still the helper and ``...`` climbs out of it.
    nested = tmp_path / "nested.py"
    nested.write_text("from .. import nvml\nfrom ..procs import PROC\nfrom ...fleet import link\n")
    assert package_of(tmp_path / "sim" / "x.py", tmp_path) == "gputui.remote.sim"
    assert [m for _, m in remote_imports(nested, "gputui.remote.sim")] == [
        "gputui.remote.nvml",
        "gputui.remote.procs",
        "gputui.fleet",
    ]


@pytest.mark.parametrize("layer", ["gputui.fleet", "gputui.health"])
def test_headless_layers_load_no_textual_and_no_console(layer: str) -> None:
    """What the head imports: no Textual, nothing of the console, in a fresh interpreter."""
    mods = loaded_after([layer, *submodules(layer)])
    assert "textual" not in top_levels(mods)
    assert not any(m.startswith(("gputui.ui", "gputui.demo")) for m in mods)


def test_view_and_wire_models_load_no_io_libraries() -> None:
    mods = loaded_after(
        [
            "gputui.wire.messages",
            "gputui.wire.decode",
            "gputui.telemetry",
            "gputui.config.models",
            "gputui.config.loader",
            "gputui.common.text",
            "gputui.health",
        ]
    )
    assert {"asyncssh", "textual", "sqlmodel"} & top_levels(mods) == set()


def test_widgets_load_no_ssh_or_database() -> None:
    widgets = submodules("gputui.ui.widgets")
    mods = loaded_after(widgets or ["gputui.ui.widgets"])
    assert {"asyncssh", "sqlmodel", "sqlalchemy", "sqlite3"} & top_levels(mods) == set()
    assert not any(m.startswith(("gputui.fleet", "gputui.scheduler")) for m in mods)
    # The console's I/O: the head link and the app that runs the workers.
    assert not {"gputui.ui.head.link", "gputui.ui.head.console", "gputui.ui.app"} & mods


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
