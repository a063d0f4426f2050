"""A helper start on a real host imports only what it needs (it runs on every connect)."""

from __future__ import annotations

import shlex
import subprocess
import sys

from gputui.remote.bundle import helper_command, helper_payload

# Never needed by a real (non --sim) helper start: the simulator, and stdlib modules
# that cost milliseconds each (argparse pulls in gettext and shutil; importlib.abc
# pulls in importlib.resources, pathlib and tempfile).
NOT_AT_START = {
    "gputui_remote.sim",
    "gputui_remote.sim.engine",
    "gputui_remote.sim.spec",
    "gputui_remote.sim.env",
    "gputui_remote.sim.health",
    "gputui_remote.sim.device",
    "argparse",
    "importlib.abc",
    "importlib.resources",
    "datetime",
}


def imported_through_bundle(argv: list[str]) -> set[str]:
    """Module names ``python -X importtime`` reports for a helper started as over SSH."""
    command = shlex.split(helper_command(sys.executable))
    command.insert(1, "-X")
    command.insert(2, "importtime")
    done = subprocess.run(
        command, input=helper_payload(argv), capture_output=True, timeout=30, check=False
    )
    assert done.stdout.startswith(b'{"type":"hello"'), done.stderr[-500:]
    names = set()
    for line in done.stderr.decode(errors="replace").splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "gputui_remote.wire" in names  # the helper's own imports are listed
    return names


def test_real_mode_start_skips_the_simulator_and_heavy_modules() -> None:
    names = imported_through_bundle(["--once"])
    assert not NOT_AT_START & names, sorted(NOT_AT_START & names)


def test_sim_mode_still_loads_the_simulator() -> None:
    names = imported_through_bundle(["--sim", "1xa10", "--once"])
    simulator = {"gputui_remote.sim", "gputui_remote.sim.engine", "gputui_remote.sim.spec"}
    assert simulator | {"gputui_remote.sim.health", "gputui_remote.sim.device"} <= names


def test_bad_arguments_are_one_fatal_error_line() -> None:
    import io
    import json

    from gputui.remote.helper import run

    for argv in (["--bogus"], ["--interval"], ["--interval", "soon"], ["--interval=nan"]):
        out = io.BytesIO()
        assert run(argv, io.BytesIO(), out) == 2
        (message,) = [json.loads(line) for line in out.getvalue().splitlines()]
        assert message["type"] == "error" and message["fatal"] is True
        assert message["message"].startswith("bad helper arguments")
    out = io.BytesIO()
    assert run(["--sim=1xa10", "--interval=0.5", "--once"], io.BytesIO(), out) == 0
    assert [json.loads(line)["type"] for line in out.getvalue().splitlines()] == [
        "hello",
        "sample",
    ]
