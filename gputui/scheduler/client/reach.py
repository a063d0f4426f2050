"""Reaching the head: one rule for the console, its parts and the CLI.

The head's socket on this machine when it is here (``ssh.is_local``), else through
SSH to each head ``head.host`` lists, in order, until one serves its socket (a
standby serves none: the next is tried). When none can be reached, one ``HeadError``
line says what failed for each: the socket here (``why (PATH)``), then ``ssh
ADDRESS: why`` or ``no head socket …`` per head.

``open_head`` gives the console's asyncio connection; ``head_socket`` a blocking
socket for a CLI verb (through a pump thread when it goes over SSH).
"""

from __future__ import annotations

import socket
from pathlib import Path

from gputui.config.models import Config
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.errors import HeadError, unreachable
from gputui.scheduler.client.ssh import is_local, open_head_ssh, ssh_socket


def _no_config() -> HeadError:
    return HeadError("config", "hosts.yaml has no head: section")


def _here(path: Path, exc: HeadError) -> str:
    """``head unreachable at PATH: why`` -> ``why (PATH)``: the reason before a long
    path that a status line may cut."""
    return f"{exc.message.removeprefix(f'head unreachable at {path}: ')} ({path})"


async def open_head(config: Config) -> AsyncHeadClient:
    """A started connection to the head (``client.local`` says which way it went);
    ``HeadError`` naming what failed, each way tried, when none answers."""
    head = config.head
    if head is None:
        raise _no_config()
    problems: list[str] = []
    if is_local(head):
        path = Path(head.socket).expanduser()  # noqa: ASYNC240 (no I/O: the user's home)
        try:
            return await AsyncHeadClient.open_local(path)
        except HeadError as exc:
            if len(head.hosts) == 1:
                raise HeadError(exc.code, _here(path, exc)) from None
            problems.append(_here(path, exc))  # a leader gone from here: the other head
    try:
        reader, writer, closer = await open_head_ssh(config)
    except HeadError as exc:
        raise HeadError(exc.code, "; ".join([*problems, exc.message])) from None
    client = AsyncHeadClient(reader, writer, closer=closer, local=False)
    client.start()
    return client


def head_socket(config: Config, path: Path) -> socket.socket:
    """A blocking socket to the head (a CLI verb's), by the same rule: the socket at
    ``path`` when it answers here, else over SSH (``ssh.ssh_socket``)."""
    head = config.head
    if head is None:
        raise _no_config()
    problems: list[str] = []
    if path.exists():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
        except OSError as exc:
            sock.close()  # a socket left by a head that is gone: the next head
            problems.append(_here(path, unreachable(path, exc)))
        else:
            return sock
    try:
        return ssh_socket(config)
    except HeadError as exc:
        raise HeadError(exc.code, "; ".join([*problems, exc.message])) from None
