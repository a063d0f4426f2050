"""The helper stays shippable: Python 3.8 syntax, stdlib + pynvml only, bundle intact."""

from __future__ import annotations

import ast
import base64
import json
import subprocess
import sys
import zlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import gputui.remote
import gputui.wire.messages
from gputui.remote import bundle

REMOTE = Path(gputui.remote.__file__).parent


def test_protocol_versions_agree() -> None:
    assert gputui.remote.PROTOCOL_VERSION == gputui.wire.messages.PROTOCOL_VERSION


def test_python38_syntax_and_no_gputui_imports() -> None:
    files = sorted(REMOTE.rglob("*.py"))
    assert len(files) >= 8 and REMOTE / "sim" / "engine.py" in files
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("gputui") for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith("gputui"), (path, node.module)
    ast.parse(bundle.BOOT, feature_version=(3, 8))


def test_helper_import_pulls_in_nothing_of_gputui() -> None:
    code = (
        "import sys, gputui.remote.helper, gputui.remote.sim.engine;"
        "print(sorted(m for m in sys.modules if m.startswith('gputui') "
        "and not m.startswith('gputui.remote')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['gputui']"  # the parent package only, empty of I/O


def test_command_is_fixed_and_payload_carries_data() -> None:
    cmd = bundle.helper_command("/opt/py 3/bin/python3")
    assert cmd.startswith("'/opt/py 3/bin/python3' -u -c '")
    assert cmd == bundle.helper_command("/opt/py 3/bin/python3")
    line = bundle.helper_payload(["--sim", "2xh100,name=x';reboot"])
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    assert "reboot" not in cmd
    data = json.loads(zlib.decompress(base64.b64decode(line)))
    assert data["argv"] == ["--sim", "2xh100,name=x';reboot"]
    assert data["entry"] == "gputui_remote.helper"
    assert "gputui_remote.bundle" not in data["modules"]
    assert {"gputui_remote", "gputui_remote.nvml", "gputui_remote.sim"} <= set(data["modules"])
    assert {"gputui_remote.sim.engine", "gputui_remote.sim.spec"} <= set(data["modules"])
    assert data["sha256"] == bundle.modules_digest(data["modules"])
    assert data["version"] == gputui.remote.HELPER_VERSION


def test_tampered_payload_is_refused() -> None:
    line = bundle.helper_payload(["--once", "--sim", "h100"])
    data = json.loads(zlib.decompress(base64.b64decode(line)))
    data["modules"]["gputui_remote.helper"] += "\nraise SystemExit(99)\n"
    bad = base64.b64encode(zlib.compress(json.dumps(data).encode())) + b"\n"
    cmd = bundle.helper_command(sys.executable)
    proc = subprocess.run(
        ["/bin/sh", "-c", cmd], input=bad, capture_output=True, timeout=20, check=False
    )
    assert proc.returncode == 3 and b"checksum mismatch" in proc.stderr
    ok = subprocess.run(
        ["/bin/sh", "-c", cmd], input=line, capture_output=True, timeout=20, check=True
    )
    assert ok.returncode == 0
    kinds = [json.loads(x)["type"] for x in ok.stdout.splitlines()]
    assert kinds == ["hello", "sample"]


def test_subfolders_ship_as_subpackages_and_loose_folders_stay_behind(tmp_path: Path) -> None:
    for name in ("__init__.py", "a.py", "bundle.py", "sub/__init__.py", "sub/b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n")
    for name in ("loose/c.py", "sub/deep/d.py"):  # no __init__.py: not a package
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("raise SystemExit(9)\n")
    sources = bundle.module_sources(tmp_path)
    assert sorted(sources) == [
        "gputui_remote",
        "gputui_remote.a",
        "gputui_remote.sub",
        "gputui_remote.sub.b",
    ]
    assert sources["gputui_remote.sub"] == "# sub/__init__.py\n"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=8))
def test_every_payload_is_one_zlib_stream_with_its_own_argv(argv: list[str]) -> None:
    """The modules are compressed once and each host's argv after them: whatever the
    argv (any text, quotes and newlines too), the line is one line, and the boot's own
    decoding (``zlib.decompress`` of ``base64``, a checked Adler-32) gives the modules
    and exactly that argv."""
    line = bundle.helper_payload(argv)
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    data = json.loads(zlib.decompress(base64.b64decode(line)).decode("utf-8"))
    assert data["argv"] == argv
    assert data["sha256"] == bundle.modules_digest(data["modules"])
