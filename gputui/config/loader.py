"""hosts.yaml read and validated: the one loader, and its errors as ``FILE:LINE`` lines.

Errors come back as one line each, ``FILE:LINE: field: problem``, so a person can
jump straight to the mistake (:mod:`gputui.config.where` builds those lines). The
models the text is validated against are :mod:`gputui.config.models`'s.

The file is untrusted input as far as the terminal is concerned, and it is read
with bounds, so no file can hang, exhaust or take over the console:

* only a regular file of at most ``MAX_FILE_BYTES`` is read (a FIFO, device or
  directory is named as such, never opened for a blocking read);
* the YAML is composed once, under the limits of :mod:`gputui.config.yamlbounds`
  (``MAX_ENTRIES``, ``MAX_HOSTS``, ``MAX_DEPTH``, ``MAX_VALUES``, ``MAX_STRING``):
  alias bombs, deep nesting, huge lists and hostile strings are refused there;
* every error line goes through :func:`gputui.common.text.clean`, so even an error about
  a hostile value cannot write an escape sequence to the terminal.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import yaml
from pydantic import ValidationError

from gputui.common.i18n import N_, _
from gputui.common.locations import LocationError, find_hosts
from gputui.common.locations import hosts_search as search_paths
from gputui.config.errors import ConfigError
from gputui.config.models import Config, HostConfig, SshDefaults
from gputui.config.where import capped, error_lines, key_lines, line_number, problem_line
from gputui.config.yamlbounds import Abort, Composer, Constructor, codepoint, yaml_error_line

__all__ = [
    "MAX_FILE_BYTES",
    "ConfigError",
    "file_findings",
    "file_problems",
    "find_config",
    "load_config",
    "parse_config",
    "require_hosts",
]

MAX_FILE_BYTES = 1024 * 1024
"""hosts.yaml is read only up to 1 MiB: ample for ``MAX_HOSTS`` hosts."""


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The config file to use: the one :func:`gputui.common.locations.find_hosts` finds (the
    one search order, trusted files only), or ``ConfigError`` saying where it looked."""
    try:
        path = find_hosts(explicit)
    except LocationError as exc:
        raise ConfigError([exc.line]) from None
    if path is None:
        looked = ", ".join(str(p) for p in search_paths())
        raise ConfigError(
            [_("no hosts.yaml found (looked in: {looked}); try --hosts FILE").format(looked=looked)]
        )
    return path


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (the language chosen); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return _("a directory")
    if stat.S_ISFIFO(mode):
        return _("a FIFO (named pipe)")
    if stat.S_ISCHR(mode):
        return _("a character device")
    if stat.S_ISBLK(mode):
        return _("a block device")
    if stat.S_ISSOCK(mode):
        return _("a socket")
    return _("not a regular file")


def _reason(exc: OSError | ValueError) -> str:
    if isinstance(exc, OSError):
        if exc.errno in (errno.EACCES, errno.EPERM):
            return _("permission denied")
        return exc.strerror or exc.__class__.__name__
    return str(exc) or exc.__class__.__name__


def _too_big(size: int) -> str:
    return _("too big: {size} bytes; the limit for a config file is 1 MiB ({limit} bytes)").format(
        size=size, limit=MAX_FILE_BYTES
    )


def _cannot_read(exc: OSError | ValueError) -> str:
    return _("cannot read: {why}").format(why=_reason(exc))


def _not_config(kind: str) -> str:
    return _("is {kind}, not a config file").format(kind=kind)


def _read(path: Path) -> str:
    """The text of ``path``, refusing anything but a regular file of sane size.

    ``stat`` comes first so a FIFO or device is never opened for reading; the open
    is non-blocking anyway (the path could be swapped after the ``stat``), the
    opened file is checked again, and no more than the limit is ever read.
    """
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError([f"{path}: {_(_MISSING)}"]) from None
    except (OSError, ValueError) as exc:
        raise ConfigError([f"{path}: {_cannot_read(exc)}"]) from None
    kind = _kind(info.st_mode)
    if kind is not None:
        raise ConfigError([f"{path}: {_not_config(kind)}"])
    if info.st_size > MAX_FILE_BYTES:
        raise ConfigError([f"{path}: {_too_big(info.st_size)}"])
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
        with open(fd, "rb", closefd=True) as file:
            kind = _kind(os.fstat(file.fileno()).st_mode)
            if kind is not None:
                raise ConfigError([f"{path}: {_not_config(kind)}"])
            data = file.read(MAX_FILE_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise ConfigError([f"{path}: {_cannot_read(exc)}"]) from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError([f"{path}: {_too_big(len(data))}"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}:{_not_utf8(data, exc.start)}"]) from None


def _not_utf8(data: bytes, offset: int) -> str:
    """``LINE:COLUMN: ...`` of the first byte that is not UTF-8 (both from 1, the
    column in characters, as an editor counts them)."""
    before = data[:offset]
    line = before.count(b"\n") + 1
    start = before.rfind(b"\n") + 1
    column = len(before[start:].decode("utf-8", errors="replace")) + 1
    said = _("not UTF-8 (byte {byte}); save the file as UTF-8").format(byte=f"0x{data[offset]:02x}")
    return f"{line}:{column}: {said}"


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate ``path``; raise ``ConfigError`` with one line per problem."""
    path = Path(path)
    return parse_config(_read(path), str(path))


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate hosts.yaml ``text``; raise ``ConfigError`` with one line per problem.

    One pass over the YAML: compose the node graph under the limits (checking every
    string on the way), construct the data from that graph, validate it.
    """
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError([f"{source}: {_too_big(len(text))}"])
    try:
        data_bytes = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        said = _("not valid Unicode text ({codepoint})").format(
            codepoint=codepoint(text[exc.start])
        )
        raise ConfigError([f"{source}:{line}: yaml: {said}"]) from None
    if len(data_bytes) > MAX_FILE_BYTES:
        raise ConfigError([f"{source}: {_too_big(len(data_bytes))}"])
    try:
        composer = Composer(data_bytes, source)  # PyYAML's reader checks on creation
        root = composer.compose()
    except Abort as abort:
        raise ConfigError([problem_line(abort.problem, source, None)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_error_line(exc, data_bytes, source)]) from None
    if composer.problems:
        raise ConfigError(capped(problem_line(p, source, root) for p in composer.problems))
    try:
        data = Constructor().construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_error_line(exc, data_bytes, source)]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        said = _("(top level): must be a mapping of settings")
        raise ConfigError([f"{source}:1: {said}"])
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        lines = sorted(error_lines(exc, root, source), key=line_number)
        raise ConfigError(capped(lines)) from None
    config.remember_origin(source, key_lines(root))
    return config


def require_hosts(config: Config) -> None:
    """A config that lists no hosts gives the console nothing to show: the one verdict
    both ``check-config`` and the console give, so they never disagree."""
    if not config.hosts:
        said = _("no hosts listed; add at least one under 'hosts:' (see hosts.example.yaml)")
        raise ConfigError([f"{config.source}:{config.line_of('hosts')}: hosts: {said}"])


def file_problems(config: Config) -> list[str]:
    """``identity_file`` and ``known_hosts`` files the config names that cannot be read,
    one line each, naming the field and the path as written and as expanded.

    Not part of loading: a key missing on this machine is for ``check-config`` to
    report, while the console still shows the hosts that do not need it.
    """
    return [line for _, line in _findings(config, "")]


def file_findings(config: Config, warn: str = "") -> tuple[list[str], list[str]]:
    """``file_problems``' lines in two lists: files that do not exist, then those that
    exist but cannot be used (a directory, unreadable). ``warn`` goes after the
    ``FILE:LINE:`` of each missing one (``check-config`` says "warning: ")."""
    found = _findings(config, warn)
    return [line for gone, line in found if gone], [line for gone, line in found if not gone]


def _findings(config: Config, warn: str) -> list[tuple[bool, str]]:
    """Each problem file, in the order of the config: (whether it is missing, its line)."""
    sections: list[tuple[str, str, SshDefaults | HostConfig]] = [
        ("defaults", "defaults", config.defaults)
    ]
    sections += [(f"hosts[{i}]", f"hosts[{i}]({h.name})", h) for i, h in enumerate(config.hosts)]
    verdicts: dict[str, str | None] = {}
    found: list[tuple[bool, str]] = []
    for where, label, section in sections:
        for name in ("identity_file", "known_hosts"):
            value = getattr(section, name)
            if value is None:
                continue
            if value not in verdicts:
                verdicts[value] = _file_problem(value)
            problem = verdicts[value]
            if problem is None:
                continue
            expanded = os.path.expanduser(value)
            shown = value if expanded == value else f"{value} ({expanded})"
            line = config.line_of(f"{where}.{name}")
            gone = problem == _MISSING
            note = warn if gone else ""
            said = _(problem) if gone else problem
            found.append((gone, f"{config.source}:{line}: {note}{label}.{name}: {shown}: {said}"))
    return found


_MISSING = N_("no such file")


def _file_problem(value: str) -> str | None:
    """Why the file named ``value`` cannot be used as a key or known_hosts, or None."""
    path = os.path.expanduser(value)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return _MISSING
    except (OSError, ValueError) as exc:
        return _("cannot be read ({why})").format(why=_reason(exc))
    kind = _kind(info.st_mode)
    if kind is not None:
        return _("is {kind}, not a file").format(kind=kind)
    if not os.access(path, os.R_OK):
        return _("cannot be read ({why})").format(why=_("permission denied"))
    return None
