"""One helper process, over SSH or local: start it, split its output, shake hands.

The helper is started with a fixed command; everything else (its code and
arguments) goes over stdin as the first line. Its stdout is split into lines here
with a size cap, so a helper that floods or prints binary junk is a protocol error
for that host, never a crash. Its stderr is kept (the first few KiB) because the
first line there is usually the reason a helper did not start.

The bytes come through a ``HelperTransport`` (``transport``: an SSH channel, or a
local child's pipes), which hands each chunk to this session in the event loop's
own callback; once streaming, every complete line goes straight to the link's
handler in that same call. No stream reader, future or task switch per sample;
that is most of what a sample costs the console besides SSH itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Callable, Sequence
from typing import NoReturn

import asyncssh

from gputui.common.tasks import within
from gputui.common.text import clean
from gputui.fleet.failures import HelperFailure
from gputui.fleet.transport import HelperTransport, LocalTransport, SshTransport
from gputui.remote import HELPER_VERSION
from gputui.remote.bundle import helper_payload
from gputui.telemetry import HostStatus
from gputui.wire.decode import ProtocolError, decode_helper_line
from gputui.wire.messages import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    Hello,
    HelperError,
    Result,
    UnknownMessage,
)

_STDERR_KEEP = 4096
STDERR_GRACE_S = 0.5
"""How long a helper that printed junk gets to say why on stderr (or to exit): the
wait ends as soon as either happens, so this only costs time when it does neither."""

# Ciphers in the order the console offers them. AES-GCM first: one AEAD call per
# packet in asyncssh (ChaCha20-Poly1305 costs three cipher set-ups per packet), and
# AES-NI makes it cheap on both ends. Every other default stays allowed, so any
# server still negotiates something it supports.
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")

LineHandler = Callable[[bytes], None]


def encryption_preference() -> list[str]:
    """asyncssh's default ciphers, AES-GCM moved to the front."""
    from asyncssh.encryption import get_default_encryption_algs

    defaults = [alg.decode("ascii") for alg in get_default_encryption_algs()]
    first = [alg for alg in PREFERRED_CIPHERS if alg in defaults]
    return first + [alg for alg in defaults if alg not in first]


class LineSplitter:
    """Splits a byte stream into lines for ``sink``, refusing a line over ``limit`` bytes
    (whole or partial, however it arrives: nothing over the cap reaches ``sink``).

    Work is linear in the bytes fed, however the stream is chunked; the common case
    (one whole line per chunk) is one ``find``, one comparison and one slice.
    """

    def __init__(self, sink: LineHandler, limit: int = MAX_LINE_BYTES) -> None:
        self.sink = sink
        self._limit = limit
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        """Hand every line completed by ``data`` (without its newline) to ``sink``."""
        start = 0
        buf = self._buf
        if buf:
            end = data.find(b"\n")
            if end < 0:
                buf += data
                self._check(len(buf))
                return
            self._check(len(buf) + end)
            buf += data[:end]
            line = bytes(buf)
            buf.clear()
            start = end + 1
            self.sink(line)
        sink, limit = self.sink, self._limit
        end = data.find(b"\n", start)
        while end >= 0:
            if end - start > limit:
                self._check(end - start)
            sink(data[start:end])
            start = end + 1
            end = data.find(b"\n", start)
        if start < len(data):
            self._check(len(data) - start)
            buf += data[start:]

    def end(self) -> bytes | None:
        """At end of stream: the unterminated last line, if any."""
        if not self._buf:
            return None
        line = bytes(self._buf)
        self._buf.clear()
        return line

    def _check(self, size: int) -> None:
        if size > self._limit:
            self._buf.clear()
            raise HelperFailure(
                HostStatus.HELPER_ERROR,
                f"helper sent a line over {self._limit} bytes; dropping the session",
            )


class HelperSession:
    """The running helper: its lines, its stderr, and requests waiting for results."""

    def __init__(self) -> None:
        self.transport: HelperTransport | None = None
        self.pending: dict[int, asyncio.Future[Result | None]] = {}
        self._ids = itertools.count(1)
        self._stderr = bytearray()
        self._stderr_told = asyncio.Event()
        """Set once stderr holds a whole line (or is full), or the channel has ended."""
        self._splitter = LineSplitter(self._queue_line)
        self._queued: deque[bytes] = deque()
        self._handler: LineHandler | None = None
        self._ended = False
        self._failure: BaseException | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._closed = asyncio.get_running_loop().create_future()

    @classmethod
    async def over_ssh(
        cls, conn: asyncssh.SSHClientConnection, python: str, argv: Sequence[str]
    ) -> HelperSession:
        """The helper on a new session channel of ``conn``, its payload sent."""
        session = cls()
        session.transport = await SshTransport.open(conn, python, session)
        session.transport.write(helper_payload(list(argv)))
        return session

    @classmethod
    async def local(cls, python: str, argv: Sequence[str]) -> HelperSession:
        """The helper as a child process of this one, its payload sent.

        ``OSError`` when ``python`` cannot be started at all (not found, not executable).
        """
        session = cls()
        session.transport = await LocalTransport.open(python, session)
        # Gone before reading it (a python that fails at once): not a failure to
        # start; the handshake reports how it ended (its status, its stderr).
        with contextlib.suppress(BrokenPipeError):
            session.transport.write(helper_payload(list(argv)))
        return session

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, line: str) -> None:
        assert self.transport is not None
        self.transport.write(line.encode())

    def abort(self) -> None:
        """End the helper now (it hung): the channel closed, or the process killed."""
        if self.transport is not None:
            self.transport.close()

    # -- transport callbacks (``transport.HelperOutput``) --------------------------

    def on_stdout(self, data: bytes) -> None:
        if self._failure is not None:
            return  # the session is being dropped: ignore the rest
        try:
            self._splitter.feed(data)
        except Exception as exc:  # a bad line or a failing handler ends this session
            self._fail(exc)

    def on_stderr(self, data: bytes) -> None:
        # Always consumed, so a chatty helper never blocks on a full window.
        room = _STDERR_KEEP - len(self._stderr)
        if room > 0:
            self._stderr += data[:room]
        if not self._stderr_told.is_set() and (
            len(self._stderr) >= _STDERR_KEEP or b"\n" in self._stderr.lstrip()
        ):
            self._stderr_told.set()

    def on_end(self, exc: Exception | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._stderr_told.set()  # end of channel: no more stderr will come
        if exc is not None and self._failure is None:
            self._failure = exc  # the connection dropped: raised to the reader
        if self._failure is None:
            try:
                last = self._splitter.end()
                if last is not None:
                    self._queue_line(last)
            except Exception as error:
                self._fail(error)
        self._wake()
        if not self._closed.done():
            self._closed.set_result(None)

    def _queue_line(self, line: bytes) -> None:
        handler = self._handler
        if handler is not None:
            handler(line)
        else:
            self._queued.append(line)
            self._wake()

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
        self._wake()
        if not self._closed.done():
            self._closed.set_result(None)

    def _wake(self) -> None:
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading ------------------------------------------------------------------

    async def readline(self) -> bytes | None:
        """The next line without its newline, or None at end of stream."""
        while True:
            if self._queued:
                return self._queued.popleft()
            if self._failure is not None:
                raise self._failure
            if self._ended:
                return None
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None

    async def stream(self, handler: LineHandler) -> None:
        """Call ``handler`` with every line, as it arrives, until the stream ends.

        Lines already read are handed over first. An exception from ``handler`` (or an
        over-long line) stops the stream and is raised here.
        """
        while self._queued and self._failure is None:
            try:
                handler(self._queued.popleft())
            except Exception as exc:
                self._fail(exc)
        self._handler = handler
        try:
            if self._failure is None and not self._ended:
                await asyncio.shield(self._closed)
        finally:
            self._handler = None
        if self._failure is not None:
            raise self._failure

    # -- the end ------------------------------------------------------------------

    def first_stderr_line(self) -> str:
        for raw in bytes(self._stderr).splitlines():
            text = clean(raw, 200).strip()
            if text:
                return text
        return ""

    async def exit_details(self, wait: float = 2.0) -> tuple[bool, str]:
        """Whether the helper exited, and ``exited with status N: <first stderr line>``."""
        transport = self.transport
        if transport is None:
            return False, "connection lost"
        with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
            await within(transport.wait_closed(), wait)
        status = transport.exit_status()
        signal = transport.exit_signal()
        if status is not None:
            text = f"exited with status {status}"
            if status == 127:
                text += " (command not found)"
        elif signal is not None:
            text = f"killed by signal {clean(signal, 20)}"
        else:
            return False, "connection lost"
        stderr = self.first_stderr_line()
        return True, f"{text}: {stderr}" if stderr else text

    async def handshake(self, timeout: float) -> Hello:
        """Read up to the ``hello`` and check that both sides speak the same versions."""
        try:
            return await within(self._read_hello(), timeout)
        except asyncio.TimeoutError:
            stderr = self.first_stderr_line()
            detail = f": {stderr}" if stderr else ""
            raise HelperFailure(
                HostStatus.HELPER_ERROR, f"helper said nothing in {timeout:g} s{detail}"
            ) from None

    async def raise_ended(self, wait: float = 2.0, *, slow: bool = True) -> NoReturn:
        """The helper's output ended: say whether it exited (and how) or the link died."""
        exited, details = await self.exit_details(wait)
        if not exited:
            raise asyncssh.ConnectionLost(details)
        raise HelperFailure(HostStatus.HELPER_ERROR, f"helper {details}", slow=slow)

    async def _read_hello(self) -> Hello:
        while True:
            line = await self.readline()
            if line is None:
                await self.raise_ended()
            if not line.strip():
                continue
            try:
                message = decode_helper_line(line)
            except ProtocolError:
                await self._stderr_or_end(STDERR_GRACE_S)
                stderr = self.first_stderr_line()
                extra = f"; stderr: {stderr}" if stderr else ""
                raise HelperFailure(
                    HostStatus.HELPER_ERROR,
                    f"helper output is not the gputui protocol: {_shown(line)}{extra}",
                ) from None
            if isinstance(message, HelperError):
                if message.fatal:
                    raise HelperFailure(HostStatus.NVML_ERROR, message.message)
                continue
            if isinstance(message, UnknownMessage):
                continue  # a newer helper's: the link notes the ones after hello
            if isinstance(message, Hello):
                check_versions(message)
                return message
            raise HelperFailure(
                HostStatus.HELPER_ERROR, f"helper sent {message.type!r} before hello"
            )

    async def _stderr_or_end(self, timeout: float) -> None:
        """Wait, up to ``timeout`` s, for stderr's first line or the channel's end:
        the reason for junk on stdout usually follows it on stderr."""
        with contextlib.suppress(asyncio.TimeoutError):
            await within(self._stderr_told.wait(), timeout)

    def fail_pending(self) -> None:
        """Wake every request still waiting: the session is gone."""
        for future in self.pending.values():
            if not future.done():
                future.set_result(None)
        self.pending.clear()

    async def close(self, timeout: float) -> None:
        """Ask the helper to end (input closed), wait up to ``timeout`` s, then end it."""
        self.fail_pending()
        transport = self.transport
        if transport is None:
            return
        with contextlib.suppress(Exception):
            transport.write_eof()
        with contextlib.suppress(Exception):
            await within(transport.wait_closed(), timeout)
        transport.close()


def _shown(line: bytes) -> str:
    """A short, display-safe rendering of a bad line (bytes repr when mostly binary)."""
    text = clean(line, 80).strip()
    if len(text) * 2 < min(len(line), 40):
        return repr(line[:24])
    return repr(text)


def check_versions(hello: Hello) -> None:
    if hello.protocol != PROTOCOL_VERSION or hello.helper_version != HELPER_VERSION:
        raise HelperFailure(
            HostStatus.HELPER_ERROR,
            f"helper speaks protocol {hello.protocol} (helper {hello.helper_version}); "
            f"this console needs protocol {PROTOCOL_VERSION} (helper {HELPER_VERSION})",
        )
