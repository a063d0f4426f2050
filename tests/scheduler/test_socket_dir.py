"""The head refuses to serve a socket in a directory someone else could write.

Clients believe whatever answers on the socket, so a directory where another user
could put a socket of their own (writable by group or others, sticky or not, or
owned by another user) stops ``gputui head`` with one line, before it serves; the
same rule the database's directory has. The real ``gputui head`` process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from realusers import User, made_users

from gputui.common.locations import socket_dir_problem


@pytest.fixture(scope="module")
def stranger() -> Iterator[User]:
    with made_users(1, "gts") as (user,):
        yield user


def _head(tmp: Path, sock: Path) -> subprocess.CompletedProcess[str]:
    config = tmp / "hosts.yaml"
    config.write_text(
        f"head:\n  socket: {sock}\n  database: {tmp / 'state' / 'gputui.db'}\n"
        "defaults:\n  ssh_config: null\n"
        "hosts:\n  - name: gone\n    address: 127.0.0.1\n    port: 1\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "gputui.entry", "head", "--hosts", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        (0o777, "writable by others (mode 0777)"),
        (0o1777, "writable by others (mode 1777)"),
        (0o775, "writable by its group (mode 0775)"),
    ],
)
def test_a_socket_directory_others_can_write_stops_the_head(
    tmp_path: Path, mode: int, why: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(mode)
    done = _head(tmp_path, run / "head.sock")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"gputui head: socket directory {run} is {why}: another user could put their own"
        f" socket there; run chmod 755 {run}"
    ]
    assert not (run / "head.sock").exists()


@pytest.mark.root
def test_a_socket_directory_of_another_user_stops_the_head(tmp_path: Path, stranger: User) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o755)
    os.chown(run, stranger.uid, stranger.gid)
    done = _head(tmp_path, run / "head.sock")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"gputui head: socket directory {run} belongs to {stranger.name}, not to this user"
        " or root: they could put their own socket there; choose another --socket"
    ]


def test_a_directory_above_that_others_can_write_is_named(tmp_path: Path) -> None:
    above = tmp_path / "open"
    (above / "run").mkdir(parents=True)
    above.chmod(0o777)
    (above / "run").chmod(0o755)
    assert socket_dir_problem(above / "run" / "head.sock") == (
        f"socket directory {above / 'run'}: directory {above} is writable by others (mode 0777)"
    )
    above.chmod(0o755)
    assert socket_dir_problem(above / "run" / "head.sock") is None


def test_the_head_itself_refuses_before_it_binds(tmp_path: Path) -> None:
    """Not only ``gputui head``: any Head, before it serves."""
    from headthread import ThreadedHead

    tmp_path.chmod(0o777)
    with pytest.raises(OSError, match="is writable by others"), ThreadedHead(tmp_path, {"g": 1}):
        pass
    assert not (tmp_path / "head.sock").exists()
