"""The head's Unix socket: connections, framing, identity, and bounded everything.

Each connection is read in chunks and split into lines here. A partial line costs
at most ``Limits.line_buffer``; a request longer than that (a submission with a long
command line) needs one of a few large-line slots, at most one per user at a time,
and a line over the request cap is answered with one error and skipped up to its
newline, never buffered whole. A connection must finish each request it begins
(and its first) within ``request_timeout_s``.

What the head sends is bounded per connection too (``Connection``): at most
``max_inflight`` of a connection's requests are worked on at once, and while more
than ``max_unsent`` bytes of its answers are unsent its next request is not read
(backpressure). A client whose unsent bytes do not drain for ``send_stall_s`` is
dropped. A subscriber is pushed the latest state only once what it was sent
before has gone out (``Connection.unsent``): coalesced, never a backlog.

The caller is known from ``SO_PEERCRED`` before the first byte is read; one user
holds at most ``per_user`` connections, and the head at most ``max_connections``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from gputui.common.tasks import cancel_and_wait, within
from gputui.scheduler.server.connection import DEFAULT_LIMITS, MAX_CONNECTIONS, Connection, Limits
from gputui.scheduler.server.peer import caller_for, peer_ids, user_name
from gputui.scheduler.server.wire import MAX_REQUEST_BYTES, encode, error

__all__ = ["MAX_CONNECTIONS", "Connection", "Limits", "LineHandler", "SocketServer"]

log = logging.getLogger(__name__)

_CHUNK = 16384


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
        limits: Limits = DEFAULT_LIMITS,
        mode: int = 0o666,
    ) -> None:
        self.path = path
        self.admin_group = admin_group
        self.on_line = on_line
        self.on_close = on_close
        self.limits = limits
        self.mode = mode
        self.connections: set[Connection] = set()
        self._per_user: Counter[int] = Counter()
        """uid -> its connections, counted from before its caller is looked up."""
        self._names: dict[int, str] = {}
        """uid -> its user's name, while it has a connection served."""
        self._large: dict[int, Connection] = {}
        """uid -> its connection now buffering a line over ``line_buffer``."""
        self._large_freed = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self._numbers = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def accepted(self) -> int:
        """Connections served since the head started (a caller was told apart)."""
        return self._numbers

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
        await cancel_and_wait(list(self._tasks))
        if self._server is not None:
            with contextlib.suppress(Exception):
                await within(self._server.wait_closed(), 2)
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
        limits = self.limits
        if len(self.connections) >= limits.max_connections:
            _refuse(writer, "busy", f"the head serves at most {limits.max_connections} connections")
            await _close(writer)
            return
        try:
            pid, uid, gid = peer_ids(sock)
        except (OSError, ValueError) as exc:
            _refuse(writer, "identity", f"could not tell who is calling: {exc}")
            await _close(writer)
            return
        # The cap is checked, and a place taken, before the caller is looked up (in a
        # thread): connections are counted in the order they came, and one user's
        # flood of connections costs no lookups beyond the cap (a refusal names the
        # user from a connection already served, and looks it up only while none is).
        if self._per_user[uid] >= limits.per_user:
            held = self._per_user[uid]
            name = self._names.get(uid)
            if name is None:
                name = await asyncio.to_thread(user_name, uid)
            _refuse(
                writer,
                "busy",
                f"{name} already holds {held} connections to the head,"
                " the most one user may (head.max_connections_per_user)",
            )
            await _close(writer)
            return
        self._per_user[uid] += 1
        try:
            await self._serve_as(reader, writer, pid, uid, gid)
        finally:
            self._per_user[uid] -= 1
            if self._per_user[uid] <= 0:
                del self._per_user[uid]
                self._names.pop(uid, None)

    async def _serve_as(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pid: int,
        uid: int,
        gid: int,
    ) -> None:
        try:
            caller = await asyncio.to_thread(caller_for, pid, uid, gid, self.admin_group)
        except (OSError, ValueError) as exc:
            _refuse(writer, "identity", f"could not tell who is calling: {exc}")
            await _close(writer)
            return
        self._names[uid] = caller.user
        self._numbers += 1
        conn = Connection(caller, writer, self._numbers, self.limits)
        self.connections.add(conn)
        try:
            await self._read(conn, reader)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            conn.closed = True
            self.connections.discard(conn)
            self._give_large(conn)
            with contextlib.suppress(Exception):
                self.on_close(conn)
            await _close(writer)

    async def _read(self, conn: Connection, reader: asyncio.StreamReader) -> None:
        limits = self.limits
        loop = asyncio.get_running_loop()
        buf = bytearray()
        skipping = False
        due: float | None = loop.time() + limits.request_timeout_s
        """When the request being read (or the connection's first) must be complete."""
        while not conn.closed:
            if due is None:  # between requests: no deadline (and no timer to set up)
                data = await reader.read(_CHUNK)
            else:
                try:
                    async with asyncio.timeout_at(due):
                        data = await reader.read(_CHUNK)
                except TimeoutError:
                    _too_slow(conn, limits)
                    return
            if not data:
                return
            start = 0
            while True:
                end = data.find(b"\n", start)
                if end < 0:
                    if start < len(data) and due is None:
                        due = loop.time() + limits.request_timeout_s
                    if not skipping:
                        if len(buf) + len(data) - start > limits.line_buffer:
                            try:  # a slot, within this request's time
                                async with asyncio.timeout_at(due):
                                    await self._take_large(conn)
                            except TimeoutError:
                                _too_slow(conn, limits)
                                return
                        buf += data[start:]
                        if len(buf) > MAX_REQUEST_BYTES:
                            buf = bytearray()
                            self._give_large(conn)
                            skipping = True
                            conn.send(
                                error(
                                    None,
                                    "too-large",
                                    f"request over {MAX_REQUEST_BYTES // 1024} KiB refused",
                                )
                            )
                    break
                due = None
                if skipping:
                    skipping = False
                    start = end + 1
                    continue
                if buf:
                    buf += data[start:end]
                    line = bytes(buf)
                    buf = bytearray()  # a large line's memory goes with it
                    self._give_large(conn)
                else:
                    line = data[start:end]
                start = end + 1
                if len(line) > MAX_REQUEST_BYTES:
                    conn.send(
                        error(None, "too-large", f"request over {MAX_REQUEST_BYTES // 1024} KiB")
                    )
                    continue
                if line.strip():
                    if conn.inflight >= limits.max_inflight or conn.unsent() > limits.max_unsent:
                        await conn.room()  # backpressure: answers unread, too many at work
                    if conn.closed:
                        return
                    await self.on_line(conn, line)  # waits while the head's inbox is full

    async def _take_large(self, conn: Connection) -> None:
        """A large-line slot for ``conn``: its user's one, when fewer than
        ``large_lines`` are taken (waits; the caller bounds how long)."""
        uid = conn.caller.uid
        while self._large.get(uid) is not conn:
            if uid not in self._large and len(self._large) < self.limits.large_lines:
                self._large[uid] = conn
                return
            await self._large_freed.wait()

    def _give_large(self, conn: Connection) -> None:
        uid = conn.caller.uid
        if self._large.get(uid) is conn:
            del self._large[uid]
            freed, self._large_freed = self._large_freed, asyncio.Event()
            freed.set()


def _too_slow(conn: Connection, limits: Limits) -> None:
    message = f"no complete request within {limits.request_timeout_s:g} s; closing"
    conn.send(error(None, "timeout", message))


def _refuse(writer: asyncio.StreamWriter, code: str, message: str) -> None:
    with contextlib.suppress(Exception):
        writer.write(encode(error(None, code, message)))


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await within(writer.wait_closed(), 1)


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
