"""Which hosts.yaml is trusted, with real Unix users in a shared directory.

A hosts.yaml decides what runs as the user who reads it, so one found by search is
used only when it is that user's or root's and nobody else can write it or the
directories above it; otherwise one line names it, its owner and why, and the search
goes on. ``--hosts FILE`` may be someone else's but not one others can write. Every
case runs the real ``gputui`` entry point (or the one search) as a real user in a
forked child dropped to that user's uid and groups.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from realusers import User, as_user, made_users

from gputui.cli import jobs, verbs  # noqa: F401

# Loaded here, before any fork: the users may not read this interpreter's files.
from gputui.common import locations
from gputui.config.loader import ConfigError, find_config, load_config
from gputui.entry import main

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def people() -> Iterator[list[User]]:
    with made_users(2, "gtc") as users:
        yield users


@pytest.fixture(autouse=True)
def no_own_config(people: list[User]) -> None:
    for user in people:
        shutil.rmtree(user.home / ".config", ignore_errors=True)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A shared directory like /tmp: root's, world-writable, sticky."""
    path = Path(tempfile.mkdtemp(prefix="gputui-shared-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _hosts_file(path: Path, owner: User | None, mode: int, socket: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"head:\n  socket: {socket}\nhosts:\n  - name: gpu01\n    address: 127.0.0.1\n")
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
    path.chmod(mode)
    return path


def _own_config(user: User) -> Path:
    """``~/.config/gputui/hosts.yaml`` of ``user``, their own and private."""
    config = user.home / ".config" / "gputui"
    config.mkdir(parents=True, exist_ok=True)
    for part in (user.home / ".config", config):
        os.chown(part, user.uid, user.gid)
    return _hosts_file(config / "hosts.yaml", user, 0o600, f"/nonexistent/{user.name}.sock")


def _search() -> tuple[str | None, list[str]]:
    locations._warned.clear()  # this child's own lines
    lines: list[str] = []
    found = locations.find_hosts(warn=lines.append)
    return (str(found) if found else None), lines


def _cli(*argv: str) -> int:
    locations._warned.clear()
    return main(list(argv))


def _console_config(explicit: str | None = None) -> str:
    """What the console and ``check-config`` load (their one loader), or its refusal."""
    locations._warned.clear()
    try:
        return load_config(find_config(explicit)).source
    except ConfigError as exc:
        return "\n".join(exc.lines)


def test_a_strangers_hosts_yaml_in_the_current_directory_is_skipped_with_one_line(
    people: list[User], shared: Path
) -> None:
    alice, bob = people
    _hosts_file(shared / "hosts.yaml", alice, 0o644, "/nonexistent/alice.sock")
    own = _own_config(bob)
    line = f"skipped hosts.yaml (owner {alice.name}): not owned by you or root"
    ran = as_user(bob, _search, cwd=shared)
    assert ran.value == (str(own), [line])
    skipped = f"gputui: {line}"
    # The console's loader: one line on stderr, then bob's own file.
    ran = as_user(bob, _console_config, cwd=shared)
    assert (ran.value, ran.err.splitlines()) == (str(own), [skipped])
    # A real verb: one line, then bob's own head (not there), never alice's socket.
    ran = as_user(bob, _cli, "queue", cwd=shared)
    assert (ran.value, ran.err.splitlines()) == (
        3,
        [
            skipped,
            f"gputui queue: head unreachable at /nonexistent/{bob.name}.sock:"
            " no socket there; is `gputui head` running?",
        ],
    )


def test_a_strangers_file_named_by_gputui_hosts_is_skipped_too(
    people: list[User], shared: Path
) -> None:
    alice, bob = people
    theirs = _hosts_file(shared / "a" / "hosts.yaml", alice, 0o644, "/nonexistent/alice.sock")
    own = _own_config(bob)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(bob.home), "GPUTUI_HOSTS": str(theirs)}
    ran = as_user(bob, _search, cwd="/", env=env)
    assert ran.value == (
        str(own),
        [f"skipped {theirs} (owner {alice.name}): not owned by you or root"],
    )


def test_a_group_writable_hosts_yaml_of_your_own_is_skipped(
    people: list[User], shared: Path
) -> None:
    _, bob = people
    mine = shared / "bob"
    mine.mkdir()
    os.chown(mine, bob.uid, bob.gid)
    _hosts_file(mine / "hosts.yaml", bob, 0o664, "/nonexistent/x.sock")
    ran = as_user(bob, _search, cwd=mine)
    assert ran.value == (
        None,
        [f"skipped hosts.yaml (owner {bob.name}): writable by its group (mode 0664)"],
    )


def test_a_hosts_yaml_in_a_directory_others_can_write_is_skipped(
    people: list[User], shared: Path
) -> None:
    """Not sticky: anyone could replace the file with their own."""
    _, bob = people
    open_dir = shared / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    _hosts_file(open_dir / "hosts.yaml", bob, 0o644, "/nonexistent/x.sock")
    ran = as_user(bob, _search, cwd=open_dir)
    assert ran.value == (
        None,
        [
            f"skipped hosts.yaml (owner {bob.name}): its directory {open_dir}"
            " is writable by others (mode 0777)"
        ],
    )


def test_a_root_owned_read_only_hosts_yaml_is_used(people: list[User], shared: Path) -> None:
    _, bob = people
    _own_config(bob)
    _hosts_file(shared / "hosts.yaml", None, 0o644, "/nonexistent/x.sock")
    ran = as_user(bob, _search, cwd=shared)
    assert ran.value == ("hosts.yaml", [])


def test_hosts_naming_a_file_others_can_write_is_refused(people: list[User], shared: Path) -> None:
    alice, bob = people
    writable = _hosts_file(shared / "w" / "hosts.yaml", alice, 0o666, "/nonexistent/a.sock")
    line = f"{writable} (owner {alice.name}): refused: writable by others (mode 0666)"
    ran = as_user(bob, _console_config, str(writable))
    assert (ran.value, ran.err) == (line, "")
    ran = as_user(bob, _cli, "--hosts", str(writable), "queue")
    assert (ran.value, ran.err.splitlines()) == (3, [f"gputui queue: {line}"])
    # Someone else's file, named on purpose and written by nobody else: used.
    writable.chmod(0o644)
    ran = as_user(bob, _console_config, str(writable))
    assert (ran.value, ran.err) == (str(writable), "")


def test_hosts_may_name_a_file_in_its_owners_own_directory(
    people: list[User], shared: Path
) -> None:
    """Named on purpose: its owner is trusted, whoever it is; nobody else may write."""
    alice, bob = people
    theirs = shared / "alice"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, alice.uid, alice.gid)
    named = _hosts_file(theirs / "hosts.yaml", alice, 0o644, "/nonexistent/a.sock")
    ran = as_user(bob, _console_config, str(named))
    assert (ran.value, ran.err) == (str(named), "")
    theirs.chmod(0o775)
    ran = as_user(bob, _console_config, str(named))
    assert ran.value == (
        f"{named} (owner {alice.name}): refused: its directory {theirs}"
        " is writable by its group (mode 0775)"
    )
