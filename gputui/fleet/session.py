"""One helper process on one SSH connection: start it, split its output, shake hands.

The helper is started with a fixed command; everything else (its code and
arguments) goes over stdin as the first line. Its stdout is split into lines here
with a size cap, so a helper that floods or prints binary junk is a protocol error
for that host, never a crash. Its stderr is kept (the first few KiB) because the
first line there is usually the reason a helper did not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence

import asyncssh

from gputui.protocol import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    Hello,
    HelperError,
    ProtocolError,
    Result,
    decode_helper_line,
)
from gputui.remote import HELPER_VERSION
from gputui.remote.bundle import helper_command, helper_payload
from gputui.telemetry import HostStatus
from gputui.text import clean

from .failures import HelperFailure

_READ_CHUNK = 65536
_STDERR_KEEP = 4096


class LineReader:
    """Splits a byte stream into lines, refusing any line longer than ``limit``."""

    def __init__(self, stream: asyncssh.SSHReader[bytes], limit: int = MAX_LINE_BYTES) -> None:
        self._stream = stream
        self._limit = limit
        self._buf = bytearray()
        self._scanned = 0

    async def readline(self) -> bytes | None:
        """The next line without its newline, or None at end of stream."""
        buf = self._buf
        while True:
            end = buf.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(buf[:end])
                del buf[: end + 1]
                self._scanned = 0
                return line
            if len(buf) > self._limit:
                raise HelperFailure(
                    HostStatus.HELPER_ERROR,
                    f"helper sent a line over {self._limit} bytes; dropping the session",
                )
            self._scanned = len(buf)
            chunk = await self._stream.read(_READ_CHUNK)
            if not chunk:
                if buf:
                    line = bytes(buf)
                    buf.clear()
                    self._scanned = 0
                    return line
                return None
            buf += chunk


class HelperSession:
    """The running helper: its line reader, its stderr, and requests waiting for results."""

    def __init__(self, process: asyncssh.SSHClientProcess[bytes]) -> None:
        self.process = process
        self.lines = LineReader(process.stdout)
        self.pending: dict[int, asyncio.Future[Result | None]] = {}
        self._ids = itertools.count(1)
        self._stderr = bytearray()
        self._stderr_task = asyncio.get_running_loop().create_task(self._collect_stderr())

    @classmethod
    async def start(
        cls, conn: asyncssh.SSHClientConnection, python: str, argv: Sequence[str]
    ) -> HelperSession:
        process = await conn.create_process(helper_command(python), encoding=None)
        session = cls(process)
        process.stdin.write(helper_payload(list(argv)))
        return session

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, line: str) -> None:
        self.process.stdin.write(line.encode())

    async def _collect_stderr(self) -> None:
        # Keep reading to the end so a chatty helper never blocks on a full window.
        with contextlib.suppress(Exception):
            while True:
                chunk = await self.process.stderr.read(_READ_CHUNK)
                if not chunk:
                    return
                room = _STDERR_KEEP - len(self._stderr)
                if room > 0:
                    self._stderr += chunk[:room]

    def first_stderr_line(self) -> str:
        for raw in bytes(self._stderr).splitlines():
            text = clean(raw, 200).strip()
            if text:
                return text
        return ""

    async def exit_details(self, wait: float = 2.0) -> tuple[bool, str]:
        """Whether the helper exited, and ``exited with status N: <first stderr line>``."""
        with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
            await asyncio.wait_for(self.process.wait_closed(), wait)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 0.5)
        status = self.process.exit_status
        signal = self.process.exit_signal
        if status is not None and status >= 0:
            text = f"exited with status {status}"
            if status == 127:
                text += " (command not found)"
        elif signal is not None:
            text = f"killed by signal {clean(signal[0], 20)}"
        else:
            return False, "connection lost"
        stderr = self.first_stderr_line()
        return True, f"{text}: {stderr}" if stderr else text

    async def handshake(self, timeout: float) -> Hello:
        """Read up to the ``hello`` and check that both sides speak the same versions."""
        try:
            return await asyncio.wait_for(self._read_hello(), timeout)
        except asyncio.TimeoutError:
            stderr = self.first_stderr_line()
            detail = f": {stderr}" if stderr else ""
            raise HelperFailure(
                HostStatus.HELPER_ERROR, f"helper said nothing in {timeout:g} s{detail}"
            ) from None

    async def _read_hello(self) -> Hello:
        while True:
            line = await self.lines.readline()
            if line is None:
                exited, details = await self.exit_details()
                if not exited:
                    raise asyncssh.ConnectionLost(details)
                raise HelperFailure(HostStatus.HELPER_ERROR, f"helper {details}")
            if not line.strip():
                continue
            try:
                message = decode_helper_line(line)
            except ProtocolError:
                await asyncio.sleep(0)  # let stderr catch up when there is some
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
            if isinstance(message, Hello):
                check_versions(message)
                return message
            raise HelperFailure(
                HostStatus.HELPER_ERROR, f"helper sent {message.type!r} before hello"
            )

    def fail_pending(self) -> None:
        """Wake every request still waiting: the session is gone."""
        for future in self.pending.values():
            if not future.done():
                future.set_result(None)
        self.pending.clear()

    async def close(self, timeout: float) -> None:
        self.fail_pending()
        with contextlib.suppress(Exception):
            self.process.stdin.write_eof()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.process.wait_closed(), timeout)
        self.process.close()
        self._stderr_task.cancel()
        with contextlib.suppress(BaseException):
            await self._stderr_task


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
