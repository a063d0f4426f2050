"""Reaching the head from another machine: its socket through SSH.

On the head's machine consoles and CLIs connect to the socket directly. From
anywhere else they open an SSH connection to ``head.host`` (with a standby, each
head listed there in turn until one serves its socket) with the fleet's SSH
settings (ssh_config, verified known_hosts, identity file, bastions) and ask it for
the socket (asyncssh ``open_unix_connection``; OpenSSH serves it as
direct-streamlocal), so the head's ``SO_PEERCRED`` names the SSH login user.

The console uses ``open_head_ssh`` on its own loop. A CLI, which is blocking, gets a
plain socket from ``ssh_socket``: one end of a socket pair whose other end a thread
pumps to and from the SSH channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import socket
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gputui.common.text import clean
from gputui.config.models import Config, HeadConfig, HostConfig, ResolvedHost
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.place import is_local_name

_CHUNK = 65536


def is_local(head: HeadConfig) -> bool:
    """Whether the head's socket is reached directly (it is on this machine). With
    a standby (``head.host`` lists both heads), only while the socket is here: on
    the standby's machine there is none, and the leader is reached over SSH."""
    if os.path.exists(Path(head.socket).expanduser()):
        return True
    return len(head.hosts) == 1 and is_local_name(head.hosts[0])


def remote_heads(head: HeadConfig) -> tuple[str, ...]:
    """The heads reached over SSH, in the order ``head.host`` lists them: every one
    not this machine (a single head: that one, whatever it names)."""
    if len(head.hosts) == 1:
        return head.hosts
    return tuple(h for h in head.hosts if not is_local_name(h))


def head_host(config: Config, name: str | None = None) -> ResolvedHost:
    """How to SSH to the head on ``name`` (default: the first listed): its entry in
    ``hosts`` when it has one, else the defaults."""
    assert config.head is not None
    name = config.head.hosts[0] if name is None else name
    for host in config.resolved():
        if host.name == name:
            return host
    return ResolvedHost.merge(config.defaults, HostConfig(name="head", address=name, pool="head"))


Closer = Callable[[], Awaitable[None]]


async def open_head_ssh(config: Config) -> tuple[Any, Any, Closer]:
    """(reader, writer, close) for the head's socket over SSH, trying each head of
    ``remote_heads`` in order (a standby serves no socket: the next is tried);
    ``HeadError`` with one line (``ssh ADDRESS: why`` or ``no head socket …``, each
    head's) when none can be had."""
    assert config.head is not None
    problems = []
    for name in remote_heads(config.head):
        try:
            return await _open_one(config, name)
        except HeadError as exc:
            problems.append(exc.message)
    raise HeadError("unreachable", "; ".join(problems))


async def _open_one(config: Config, name: str) -> tuple[Any, Any, Closer]:
    from gputui.fleet.connector import HostConnector
    from gputui.fleet.failures import classify
    from gputui.fleet.hostkeys import KnownHostsCache, VerifyingClient
    from gputui.fleet.jumps import JumpPool

    assert config.head is not None
    host = head_host(config, name)
    jumps = JumpPool()
    connector = HostConnector(
        host, gate=asyncio.Semaphore(1), known_hosts=KnownHostsCache(), jumps=jumps
    )
    box: list[VerifyingClient] = []
    try:
        conn, lease = await connector.open(box)
    except Exception as exc:
        await jumps.close()
        verdict = box[-1].verdict if box else None
        failure = classify(
            exc,
            user=connector.user or getpass.getuser(),
            address=host.address,
            timeout=host.connect_timeout,
            verdict=verdict,
        )
        raise HeadError("unreachable", f"ssh {host.address}: {failure.message}") from None

    async def closer() -> None:
        conn.close()
        with contextlib.suppress(Exception):
            await conn.wait_closed()
        if lease is not None:
            lease.release()
        await jumps.close()

    try:
        reader, writer = await conn.open_unix_connection(config.head.socket)
    except Exception as exc:
        await closer()
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        raise HeadError(
            "unreachable",
            f"no head socket {config.head.socket} on {host.address}: {clean(reason, 200)}",
        ) from None
    return reader, writer, closer


def ssh_socket(config: Config) -> socket.socket:
    """A blocking socket that speaks to the head over SSH (for the CLI).

    A daemon thread holds the SSH connection and pumps bytes between it and the
    other end of a socket pair; closing the returned socket ends the thread and the
    connection. ``HeadError`` when the connection cannot be made.
    """
    ours, theirs = socket.socketpair()
    ready = threading.Event()
    failed: list[HeadError] = []

    def run() -> None:
        try:
            asyncio.run(_pump(config, theirs, ready, failed))
        except Exception as exc:  # never a traceback from a CLI's helper thread
            failed.append(HeadError("unreachable", f"ssh to the head: {clean(str(exc), 200)}"))
        finally:
            ready.set()
            with contextlib.suppress(OSError):
                theirs.close()

    threading.Thread(target=run, name="gputui-head-ssh", daemon=True).start()
    wait = _connect_timeout(config) + 5
    if not ready.wait(wait):
        ours.close()
        raise HeadError("timeout", f"ssh to the head took over {wait:.0f} s")
    if failed:
        ours.close()
        raise failed[0]
    return ours


def _connect_timeout(config: Config) -> float:
    assert config.head is not None
    heads = remote_heads(config.head)
    return sum(float(head_host(config, name).connect_timeout or 10) for name in heads)


async def _pump(
    config: Config, theirs: socket.socket, ready: threading.Event, failed: list[HeadError]
) -> None:
    try:
        reader, writer, closer = await open_head_ssh(config)
    except HeadError as exc:
        failed.append(exc)
        return
    try:
        local_reader, local_writer = await asyncio.open_unix_connection(sock=theirs)
        ready.set()

        async def copy(source: Any, sink: Any) -> None:
            with contextlib.suppress(Exception):
                while data := await source.read(_CHUNK):
                    sink.write(data)
                    await sink.drain()
            with contextlib.suppress(Exception):
                sink.write_eof()

        # Either direction ending (the CLI closed its end, or the head its socket)
        # ends the session.
        tasks = [
            asyncio.ensure_future(copy(local_reader, writer)),
            asyncio.ensure_future(copy(reader, local_writer)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            local_writer.close()
    finally:
        await closer()
