"""An unknown theme is one line naming it and the themes there are, exit 2, for the
console and for the demo alike; the demo says so before it starts anything."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.cli.console import main
from gputui.ui.themes import theme_names

KNOWN = set(theme_names())


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.text(min_size=1, max_size=20).filter(lambda n: n not in KNOWN and not n.startswith("-"))
)
def test_an_unknown_theme_is_one_line_for_console_and_demo(
    isolated_home: Path, tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    hosts = tmp_path_factory.mktemp("theme") / "hosts.yaml"
    hosts.write_text("hosts: [{name: a}]\n")
    for argv in (["--hosts", str(hosts), f"--theme={name}"], ["demo", f"--theme={name}"]):
        code, out, err = _run(argv)
        assert code == 2, argv
        assert out == ""  # the demo started nothing
        (line,) = err.splitlines()
        assert line.startswith("gputui: unknown theme ") and "; known themes: gputui-dark" in line
        assert "\x1b" not in line
