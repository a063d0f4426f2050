"""One hosts.yaml search order: the console's loader and the scheduler client agree.

Generated situations ($GPUTUI_HOSTS set or not, naming a file or nothing; a file in
the current directory and in ~/.config/gputui, each absent, fine or writable by its
group): the file the loader (``find_config``) picks is the one whose ``head.socket``
the client (``socket_path``) uses, the same files are skipped with the same lines,
and where the loader refuses the client refuses with the same line.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.common import locations
from gputui.common.locations import DEFAULT_SOCKET, HOSTS_ENV, SOCKET_ENV
from gputui.config.loader import ConfigError, find_config
from gputui.scheduler.client import HeadError, socket_path

STATES = st.sampled_from(["absent", "ok", "group-writable"])


@contextlib.contextmanager
def situation(env: str, here: str, home: str) -> Iterator[Path]:
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        places = {
            "env": root / "named" / "hosts.yaml",
            "here": root / "cwd" / "hosts.yaml",
            "home": root / "home" / ".config" / "gputui" / "hosts.yaml",
        }
        for name, state in (("env", env), ("here", here), ("home", home)):
            path = places[name]
            path.parent.mkdir(parents=True, exist_ok=True)
            if state in ("ok", "group-writable"):
                path.write_text(f"head:\n  socket: /nonexistent/{name}.sock\n")
                path.chmod(0o664 if state == "group-writable" else 0o644)
        os.environ.pop(SOCKET_ENV, None)
        os.environ["HOME"] = str(root / "home")
        if env == "unset":
            os.environ.pop(HOSTS_ENV, None)
        else:
            os.environ[HOSTS_ENV] = str(places["env"])
        os.chdir(places["here"].parent)
        try:
            yield root
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)


@pytest.mark.skipif(os.path.exists("/etc/gputui/hosts.yaml"), reason="this machine has one")
@settings(max_examples=60, deadline=None)
@given(env=st.one_of(st.just("unset"), STATES), here=STATES, home=STATES)
def test_the_loader_and_the_client_pick_the_same_file(env: str, here: str, home: str) -> None:
    with situation(env, here, home):
        warned: list[list[str]] = []
        verdicts: list[str] = []
        for ask in (_loader, _client):
            lines: list[str] = []
            locations._warned.clear()
            original = locations._say
            locations._say = lines.append  # type: ignore[assignment]
            try:
                verdicts.append(ask())
            finally:
                locations._say = original  # type: ignore[assignment]
            warned.append(lines)
    loader, client = verdicts
    assert warned[0] == warned[1]
    assert client == loader, (env, here, home)


def _loader() -> str:
    try:
        found = find_config()
    except ConfigError as exc:
        line = exc.lines[0]
        return DEFAULT_SOCKET if line.startswith("no hosts.yaml found") else f"refused: {line}"
    name = found.read_text().split("/nonexistent/", 1)[1].split(".sock", 1)[0]
    return f"/nonexistent/{name}.sock"


def _client() -> str:
    try:
        return str(socket_path())
    except HeadError as exc:
        return f"refused: {exc.message}"
