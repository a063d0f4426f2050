"""Where the head is: its socket on this machine, or the hosts.yaml to reach it with
over SSH (``--socket``, ``$GPUTUI_HEAD_SOCKET``, hosts.yaml's ``head:``, the default).

hosts.yaml is read with the bounded YAML reader only: a verb that reaches the head
here never loads the configuration's models.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from gputui.common.locations import (
    DEFAULT_SOCKET,
    SOCKET_ENV,
    HostsMissing,
    LocationError,
    find_hosts,
    named_hosts,
)
from gputui.config import doccache
from gputui.scheduler.client.errors import HeadError

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_local_name(host: str) -> bool:
    """Whether ``head.host`` names this machine (short name or FQDN)."""
    import socket  # here only: a Slurm verb never asks where the head is

    name = host.lower()
    here = socket.gethostname().lower()
    return name in LOCAL_NAMES or name == here or name.split(".")[0] == here.split(".")[0]


def socket_path(explicit: str | None = None, config_file: str | None = None) -> Path:
    """Where the head's socket is: ``--socket``, ``$GPUTUI_HEAD_SOCKET``, hosts.yaml's
    ``head.socket`` (read with the bounded YAML reader only), then the default."""
    return head_place(explicit, config_file)[0]


def head_place(
    explicit: str | None = None, config_file: str | None = None
) -> tuple[Path, Path | None]:
    """(the head's socket, the hosts.yaml to reach it over SSH with, or None when it
    is reached directly). Over SSH when ``head.host`` is another machine and the
    socket is not here; ``--socket`` or ``$GPUTUI_HEAD_SOCKET`` always mean here.
    When ``head.host`` lists a leader and its standby, the hosts.yaml always comes
    back: the socket here is tried first, then each head over SSH.

    A hosts.yaml named by ``--hosts`` or ``$GPUTUI_HOSTS`` must be there even when the
    socket is given (a usage error otherwise): a typo never reaches another head."""
    try:
        named_hosts(config_file)
    except HostsMissing as exc:
        raise HeadError("usage", exc.line) from None
    if explicit:
        return Path(explicit).expanduser(), None
    env = os.environ.get(SOCKET_ENV)
    if env:
        return Path(env).expanduser(), None
    found = _config_head(config_file)
    if found is None:
        return Path(DEFAULT_SOCKET), None
    head, source = found
    sock = head.get("socket")
    path = Path(sock).expanduser() if isinstance(sock, str) and sock else Path(DEFAULT_SOCKET)
    host = head.get("host")
    if isinstance(host, list) and len(host) > 1:  # a standby: the socket here, else SSH
        return path, source
    if isinstance(host, list):
        host = host[0] if host else None
    if not isinstance(host, str) or not host or is_local_name(host) or os.path.exists(path):
        return path, None
    return path, source


def _config_head(config_file: str | None) -> tuple[dict[str, Any], Path] | None:
    """hosts.yaml's ``head:`` section and the file it is in: the file
    :func:`gputui.common.locations.find_hosts` finds (the one search order, trusted files only)."""
    return config_section(config_file, "head")


@functools.lru_cache(maxsize=4)
def _document(path: str, mtime_ns: int, size: int) -> Any:
    """hosts.yaml's document, read once a process for each version of the file (a verb
    asks for its ``slurm:`` and its ``head:`` sections: one parse)."""
    raw = Path(path).read_bytes()
    kept = doccache.lookup(path, raw)  # these very bytes read before: no YAML to load
    if kept is not doccache.MISSING:
        return kept
    try:
        from gputui.config.yamlbounds import Composer, Constructor

        composer = Composer(raw, path)
        root = composer.compose()
        if root is None:
            return None  # empty: no section there
        if composer.problems:
            raise ValueError
        doc = Constructor().construct_document(root)
    except Exception:  # said in one line; the full loader says what is wrong, and where
        raise HeadError(
            "config", f"{path} is not a valid hosts file; `gputui check-config {path}` says why"
        ) from None
    doccache.store(path, raw, doc)
    return doc


def config_section(config_file: str | None, name: str) -> tuple[dict[str, Any], Path] | None:
    """hosts.yaml's section ``name`` (a mapping) and the file it is in, read with the
    bounded YAML reader only; None where there is no such file or section."""
    try:
        path = find_hosts(config_file)
    except LocationError as exc:
        raise HeadError("config", exc.line) from None
    if path is None:
        return None
    try:
        st = path.stat()
        if st.st_size > (1 << 20):
            raise HeadError("config", f"{path} is over 1 MiB; not a hosts file")
        data = _document(str(path), st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise HeadError("config", f"{path}: cannot read: {exc.strerror or exc}") from None
    section = data.get(name) if isinstance(data, dict) else None
    return (section, path) if isinstance(section, dict) else None
