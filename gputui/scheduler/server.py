"""The head's Unix socket: connections, framing, identity, and bounded everything.

Each connection is read in chunks and split into lines here, so a line over the
request cap is answered with one error and skipped up to its newline, never
buffered whole. The caller is known from ``SO_PEERCRED`` before the first byte is
read. Connections beyond ``max_connections`` are answered and closed; a client
that says nothing costs one idle coroutine and a socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .identity import Caller, caller_for, peer_ids
from .wire import MAX_REQUEST_BYTES, encode, error

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 4096
_LIFETIME = secrets.token_hex(4)
_CHUNK = 65536


class Connection:
    """One client: its identity, its writer, and whether it subscribed."""

    def __init__(self, caller: Caller, writer: asyncio.StreamWriter, number: int) -> None:
        self.caller = caller
        self.writer = writer
        self.number = number
        self.session = f"c{os.getpid()}-{_LIFETIME}-{number}"
        """Unique across head lifetimes (a restarted head may get the same pid)."""
        self.subscribed = False
        self.closed = False
        self.last_notice = 0

    def send(self, obj: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self.writer.write(encode(obj))
        except (OSError, RuntimeError):
            self.closed = True

    async def drain(self) -> None:
        if self.closed:
            return
        try:
            await self.writer.drain()
        except (OSError, RuntimeError, ConnectionError):
            self.closed = True


LineHandler = Callable[[Connection, bytes], Awaitable[None]]


class SocketServer:
    """Serves ``path``; hands each complete line to ``on_line``."""

    def __init__(
        self,
        path: Path,
        admin_group: str | None,
        on_line: LineHandler,
        on_close: Callable[[Connection], None],
        *,
        max_connections: int = MAX_CONNECTIONS,
        mode: int = 0o666,
    ) -> None:
        self.path = path
        self.admin_group = admin_group
        self.on_line = on_line
        self.on_close = on_close
        self.max_connections = max_connections
        self.mode = mode
        self.connections: set[Connection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._numbers = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        _clear_stale_socket(self.path)
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(self.path), limit=_CHUNK
        )
        # Anyone may connect: who they are comes from the kernel, and every
        # request is checked against that. The directory's mode is the gate.
        os.chmod(self.path, self.mode)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.closed = True
            with contextlib.suppress(Exception):
                conn.writer.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve_one(reader, writer)
        except asyncio.CancelledError:
            pass  # the head is closing: end this connection quietly
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if len(self.connections) >= self.max_connections:
            _refuse(writer, "busy", f"the head serves at most {self.max_connections} connections")
            await _close(writer)
            return
        try:
            pid, uid, gid = peer_ids(sock)
            caller = await asyncio.to_thread(caller_for, pid, uid, gid, self.admin_group)
        except (OSError, ValueError) as exc:
            _refuse(writer, "identity", f"could not tell who is calling: {exc}")
            await _close(writer)
            return
        self._numbers += 1
        conn = Connection(caller, writer, self._numbers)
        self.connections.add(conn)
        try:
            await self._read(conn, reader)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            conn.closed = True
            self.connections.discard(conn)
            with contextlib.suppress(Exception):
                self.on_close(conn)
            await _close(writer)

    async def _read(self, conn: Connection, reader: asyncio.StreamReader) -> None:
        buf = bytearray()
        skipping = False
        while not conn.closed:
            data = await reader.read(_CHUNK)
            if not data:
                return
            start = 0
            while True:
                end = data.find(b"\n", start)
                if end < 0:
                    if not skipping:
                        buf += data[start:]
                        if len(buf) > MAX_REQUEST_BYTES:
                            buf.clear()
                            skipping = True
                            conn.send(
                                error(
                                    None,
                                    "too-large",
                                    f"request over {MAX_REQUEST_BYTES // 1024} KiB refused",
                                )
                            )
                            await conn.drain()
                    break
                if skipping:
                    skipping = False
                    start = end + 1
                    continue
                if buf:
                    buf += data[start:end]
                    line = bytes(buf)
                    buf.clear()
                else:
                    line = data[start:end]
                start = end + 1
                if len(line) > MAX_REQUEST_BYTES:
                    conn.send(
                        error(None, "too-large", f"request over {MAX_REQUEST_BYTES // 1024} KiB")
                    )
                    continue
                if line.strip():
                    await self.on_line(conn, line)  # waits while the head's inbox is full


def _refuse(writer: asyncio.StreamWriter, code: str, message: str) -> None:
    with contextlib.suppress(Exception):
        writer.write(encode(error(None, code, message)))


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 1)


def _clear_stale_socket(path: Path) -> None:
    """Remove a socket left by a head that died, refusing to start beside a live one."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise OSError(f"{path} exists and is not a socket; not touching it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1)
        probe.connect(str(path))
    except OSError:
        os.unlink(path)  # nobody listens: a stale socket
        return
    finally:
        probe.close()
    raise OSError(f"another head is already serving {path}")
