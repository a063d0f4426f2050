"""Where hosts.yaml and the head's socket are found, and which hosts.yaml may be trusted.

One definition for every caller: the console, ``check-config``, ``gputui head``, the
scheduler verbs (``env``, ``run``, ``submit``, …), ``health`` and ``incident`` all
find their hosts.yaml and the head's socket here, so they never disagree.

hosts.yaml decides what runs as the user who reads it (a ``local: true`` host's
``python:``, the SSH settings, the head a ``submit`` is sent to), so a file found by
search is used only when nobody else could have written it: it is owned by the caller
or root, and neither it nor any directory above it can be written by another user
(group or other write, or a directory owned by someone else), the way OpenSSH's
StrictModes and git's ``safe.directory`` decide. A directory with the sticky bit
(``/tmp``) does not let others replace a file in it, so it is no objection. A file
that fails is skipped with one line naming it, its owner and why, and the search goes
on. A file the user names (``--hosts FILE``) may belong to someone else, but it is
still refused when anyone besides its owner can write it or replace it.

Imports nothing heavy: a scheduler verb reads this on every call.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from gputui.common.i18n import _
from gputui.common.printable import shown

__all__ = [
    "DEFAULT_SOCKET",
    "HOSTS_ENV",
    "SOCKET_ENV",
    "HostsMissing",
    "LocationError",
    "find_hosts",
    "hosts_search",
    "named_hosts",
    "socket_dir_problem",
    "untrusted",
]

HOSTS_ENV = "GPUTUI_HOSTS"
"""Names the hosts.yaml to use ahead of the usual places (still checked like them)."""
SOCKET_ENV = "GPUTUI_HEAD_SOCKET"
"""Names the head's socket ahead of hosts.yaml's ``head.socket``."""
DEFAULT_SOCKET = "/run/gputui/head.sock"
"""The head's socket when neither ``--socket``, ``$GPUTUI_HEAD_SOCKET`` nor hosts.yaml names one."""

_warned: set[str] = set()


class LocationError(ValueError):
    """A hosts.yaml that was asked for cannot be used: ``line`` says which and why
    (made printable here: a path may hold escape sequences)."""

    def __init__(self, line: str) -> None:
        safe = shown(line, 1024)
        super().__init__(safe)
        self.line = safe


class HostsMissing(LocationError):
    """A hosts.yaml named by ``--hosts`` or ``$GPUTUI_HOSTS`` that is not there: a usage
    error for every verb (exit 2), never a fall back to the search or the default socket."""


def hosts_search() -> list[Path]:
    """Where hosts.yaml is looked for when no ``--hosts`` is given, in order."""
    paths: list[Path] = []
    env = os.environ.get(HOSTS_ENV)
    if env:
        paths.append(_expand(env))
    paths.append(Path("hosts.yaml"))
    paths.append(_expand("~/.config/gputui/hosts.yaml"))
    paths.append(Path("/etc/gputui/hosts.yaml"))
    return paths


def _expand(path: str | os.PathLike[str]) -> Path:
    """``~`` expanded where it can be; ``~nosuchuser`` stays as written (never raises)."""
    return Path(os.path.expanduser(os.fspath(path)))


def _present(path: Path) -> bool:
    """Whether something is at ``path``; anything there, even unreadable, is for the
    loader to name rather than silently skipped."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError):
        return True
    return True


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return f"uid {uid}"


def _file_owner(path: Path) -> str:
    try:
        return _owner(os.stat(path).st_uid)
    except (OSError, ValueError):
        return _("unknown")


class _Unsafe(NamedTuple):
    """A directory above a path that another user could change it through: owned by
    ``owner`` (a uid not trusted), else writable by group or others (``mode``)."""

    directory: Path
    owner: int | None
    mode: int


def untrusted(path: Path, *, searched: bool, uid: int | None = None) -> str | None:
    """Why ``path`` may not be trusted by ``uid`` (default: this process's), or None.

    ``searched``: found by search, so it must be owned by ``uid`` or root. Named
    (``--hosts``): its owner is the one the user chose to trust, whoever it is. Every
    directory above it (as named and as resolved through links) must be owned by one
    of those (or root), and no one else may write it, unless it is sticky; the file
    itself may not be writable by group or others. Said in the reader's language.
    """
    me = os.geteuid() if uid is None else uid
    trusted = {0, me}
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None  # not there or unreadable: the loader names that
    if not stat.S_ISREG(info.st_mode):
        return None  # a directory, FIFO or device: the loader names it and never reads it
    if searched and info.st_uid not in trusted:
        return _("not owned by you or root")
    trusted.add(info.st_uid)  # searched: already in; named: the owner the user chose
    mode = _mode(info.st_mode)
    if info.st_mode & stat.S_IWOTH:
        return _("writable by others (mode {mode})").format(mode=mode)
    if info.st_mode & stat.S_IWGRP:
        return _("writable by its group (mode {mode})").format(mode=mode)
    unsafe = _unsafe_directory(path, trusted)
    if unsafe is None:
        return None
    if unsafe.owner is not None:
        return _("its directory {directory} is owned by {owner}").format(
            directory=unsafe.directory, owner=_owner(unsafe.owner)
        )
    said = (
        _("its directory {directory} is writable by others (mode {mode})")
        if unsafe.mode & stat.S_IWOTH
        else _("its directory {directory} is writable by its group (mode {mode})")
    )
    return said.format(directory=unsafe.directory, mode=_mode(unsafe.mode))


def _unsafe_directory(path: Path, trusted: set[int]) -> _Unsafe | None:
    """The directory above ``path`` another user could replace it through, or None:
    each one (as named and as resolved through links) must be owned by a ``trusted``
    uid and writable by nobody else, unless it is sticky (others may add entries to
    it, never rename or remove ours)."""
    named = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    seen: set[Path] = set()
    for directory in [*named.parents, *real.parents]:
        if directory in seen:
            continue
        seen.add(directory)
        try:
            info = os.stat(directory)
        except (OSError, ValueError):
            continue
        if info.st_mode & stat.S_ISVTX:
            continue
        if info.st_uid not in trusted:
            return _Unsafe(directory, info.st_uid, info.st_mode)
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return _Unsafe(directory, None, info.st_mode)
    return None


def _mode(mode: int) -> str:
    return f"{stat.S_IMODE(mode):04o}"


def socket_dir_problem(socket_path: Path) -> str | None:
    """Why the head may not serve ``socket_path``, in one line, or None.

    Clients trust whatever answers on the socket, so nobody but the head's user (or
    root) may be able to put a socket of their own there: its directory must be
    theirs and writable by no one else, sticky or not (in a sticky ``/tmp`` anyone
    could bind the path while the head is down), and the directories above it safe
    as for hosts.yaml. The same rule as the database's directory.
    """
    directory = Path(os.path.abspath(socket_path)).parent
    trusted = {0, os.geteuid()}
    try:
        info = os.stat(directory)
    except (OSError, ValueError) as exc:
        return _("socket directory {directory}: {error}").format(
            directory=directory, error=getattr(exc, "strerror", None) or exc
        )
    if not stat.S_ISDIR(info.st_mode):
        return _("socket directory {directory} is not a directory").format(directory=directory)
    if info.st_uid not in trusted:
        return _(
            "socket directory {directory} belongs to {owner}, not to this user or root:"
            " they could put their own socket there; choose another --socket"
        ).format(directory=directory, owner=_owner(info.st_uid))
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        said = (
            _(
                "socket directory {directory} is writable by others (mode {mode}): another"
                " user could put their own socket there; run chmod 755 {directory}"
            )
            if info.st_mode & stat.S_IWOTH
            else _(
                "socket directory {directory} is writable by its group (mode {mode}): another"
                " user could put their own socket there; run chmod 755 {directory}"
            )
        )
        return said.format(directory=directory, mode=_mode(info.st_mode))
    unsafe = _unsafe_directory(directory, trusted)
    if unsafe is None:
        return None
    if unsafe.owner is not None:
        return _("socket directory {directory}: directory {above} is owned by {owner}").format(
            directory=directory, above=unsafe.directory, owner=_owner(unsafe.owner)
        )
    said = (
        _("socket directory {directory}: directory {above} is writable by others (mode {mode})")
        if unsafe.mode & stat.S_IWOTH
        else _(
            "socket directory {directory}: directory {above} is writable by its group (mode {mode})"
        )
    )
    return said.format(directory=directory, above=unsafe.directory, mode=_mode(unsafe.mode))


def _say(line: str) -> None:
    """One line on stderr, once per process (the client and the loader both search)."""
    if line not in _warned:
        _warned.add(line)
        print(f"gputui: {shown(line, 1024)}", file=sys.stderr)


def _given(explicit: str | os.PathLike[str] | None) -> bool:
    return explicit is not None and os.fspath(explicit) != ""


def named_hosts(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The hosts.yaml the user named: ``explicit`` (``--hosts``), else ``$GPUTUI_HOSTS``;
    None when neither names one. Raises ``HostsMissing`` when the named file is not
    there: every caller (the console, the scheduler verbs even with ``--socket``,
    ``health``, ``incident``) checks this first, so a typo is never silently replaced
    by another file or by the default socket."""
    if _given(explicit):
        assert explicit is not None
        path = _expand(explicit)
        if not _present(path):
            raise HostsMissing(_("{path}: no such file").format(path=path))
        return path
    env = os.environ.get(HOSTS_ENV)
    if env:
        path = _expand(env)
        if not _present(path):
            raise HostsMissing(
                _("{path}: no such file (named by {variable})").format(
                    path=path, variable="$" + HOSTS_ENV
                )
            )
        return path
    return None


def find_hosts(
    explicit: str | os.PathLike[str] | None = None,
    *,
    warn: Callable[[str], None] | None = None,
) -> Path | None:
    """The hosts.yaml to use: ``explicit`` (``--hosts``) if given, else the first
    trusted file of :func:`hosts_search`; None when there is none.

    A searched file that may not be trusted is skipped with one line to ``warn``
    (default: stderr, once per process). Raises
    ``LocationError`` for a named file that is missing or writable by others, and for
    a ``$GPUTUI_HOSTS`` that names nothing (a typo should not silently fall through).
    """
    named = named_hosts(explicit)
    if _given(explicit) and named is not None:
        why = untrusted(named, searched=False)
        if why is not None:
            raise LocationError(
                _("{path} (owner {owner}): refused: {why}").format(
                    path=named, owner=_file_owner(named), why=why
                )
            )
        return named
    for path in hosts_search():
        if not _present(path):
            continue
        why = untrusted(path, searched=True)
        if why is None:
            return path
        (warn or _say)(
            _("skipped {path} (owner {owner}): {why}").format(
                path=path, owner=_file_owner(path), why=why
            )
        )
    return None
