"""How a helper's bytes travel: an SSH channel, or the pipes of a local child process.

Both hand every chunk of stdout and stderr straight to the ``HelperSession``'s
callbacks in the event loop's own callback (asyncssh's ``data_received``, asyncio's
``pipe_data_received``): no stream reader, future or task switch per line. Above
this, the session (lines, handshake, requests) and the link (streaming, watchdog,
reconnects) are the same code for both.

A local helper is started as ``python -u -c BOOT`` with the same payload on stdin as
over SSH (``gputui.remote.bundle``), in its own session so a signal meant for the
console's terminal does not reach it; its input closing ends it, as over SSH.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal as signals
import subprocess
from typing import Protocol, cast

import asyncssh

from gputui.remote.bundle import BOOT, helper_command


class HelperOutput(Protocol):
    """Who a transport hands the helper's output to (a ``HelperSession``)."""

    def on_stdout(self, data: bytes) -> None: ...

    def on_stderr(self, data: bytes) -> None: ...

    def on_end(self, exc: Exception | None) -> None:
        """Its output ended (end of stdout, or the channel or process is gone)."""
        ...


class HelperTransport(Protocol):
    """The byte pipe to one running helper, however it was started."""

    def write(self, data: bytes) -> None: ...

    def write_eof(self) -> None: ...

    def close(self) -> None:
        """End it now: the channel closed, or the process killed."""
        ...

    async def wait_closed(self) -> None:
        """Until the helper has exited (or the channel is gone) and its output ended."""
        ...

    def exit_status(self) -> int | None:
        """The helper's exit status once it exited normally, else None."""
        ...

    def exit_signal(self) -> str | None:
        """The signal that killed the helper (``KILL``), else None."""
        ...


# -- SSH ------------------------------------------------------------------------------


class _Channel(asyncssh.SSHClientSession[bytes]):
    """asyncssh's callbacks for the helper's channel, forwarded to its ``HelperOutput``."""

    def __init__(self, owner: HelperOutput) -> None:
        self._owner = owner

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype is None:
            self._owner.on_stdout(data)
        else:
            self._owner.on_stderr(data)

    def eof_received(self) -> bool:
        self._owner.on_end(None)
        return True  # stay half-open for the exit status, as asyncssh's own streams do

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.on_end(exc)


class SshTransport:
    """The helper on an SSH session channel of an open connection."""

    def __init__(self, channel: asyncssh.SSHClientChannel[bytes]) -> None:
        self.channel = channel

    @classmethod
    async def open(
        cls, conn: asyncssh.SSHClientConnection, python: str, owner: HelperOutput
    ) -> SshTransport:
        try:
            channel, _ = await conn.create_session(
                lambda: _Channel(owner), helper_command(python), encoding=None
            )
        except AttributeError:
            # asyncssh (2.24) trips over its own cleanup when the connection drops
            # while the channel is opening: that is a lost connection, not a bug here.
            raise asyncssh.ConnectionLost("connection lost while starting the helper") from None
        return cls(channel)

    def write(self, data: bytes) -> None:
        self.channel.write(data)

    def write_eof(self) -> None:
        self.channel.write_eof()

    def close(self) -> None:
        self.channel.close()

    async def wait_closed(self) -> None:
        await self.channel.wait_closed()

    def exit_status(self) -> int | None:
        status = self.channel.get_exit_status()
        return status if status is not None and status >= 0 else None

    def exit_signal(self) -> str | None:
        signal = self.channel.get_exit_signal()
        return str(signal[0]) if signal is not None else None


# -- a local child process --------------------------------------------------------------


class _Pipes(asyncio.SubprocessProtocol):
    """asyncio's callbacks for the child's pipes, forwarded to its ``HelperOutput``."""

    def __init__(self, owner: HelperOutput) -> None:
        self._owner = owner
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data if isinstance(data, bytes) else data.encode()
        if fd == 1:
            self._owner.on_stdout(chunk)
        elif fd == 2:
            self._owner.on_stderr(chunk)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._owner.on_end(None)  # end of stdout: the helper said all it will

    def connection_lost(self, exc: Exception | None) -> None:
        # The process exited and every pipe closed.
        self._owner.on_end(None)
        if not self.closed.done():
            self.closed.set_result(None)


class LocalTransport:
    """The helper as a child process of this one: the same protocol, no SSH."""

    def __init__(self, transport: asyncio.SubprocessTransport, pipes: _Pipes) -> None:
        self._transport = transport
        self._pipes = pipes

    @classmethod
    async def open(cls, python: str, owner: HelperOutput) -> LocalTransport:
        """Start ``python -u -c BOOT``; ``OSError`` when it cannot be started at all."""
        loop = asyncio.get_running_loop()
        transport, pipes = await loop.subprocess_exec(
            lambda: _Pipes(owner),
            python,
            "-u",
            "-c",
            BOOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        return cls(transport, pipes)

    @property
    def pid(self) -> int:
        return self._transport.get_pid()

    def _stdin(self) -> asyncio.WriteTransport | None:
        # Duck-typed: uvloop's pipe transports do not derive from asyncio's classes.
        pipe = self._transport.get_pipe_transport(0)
        return cast(asyncio.WriteTransport, pipe) if hasattr(pipe, "write_eof") else None

    def write(self, data: bytes) -> None:
        stdin = self._stdin()
        if stdin is None or stdin.is_closing():
            raise BrokenPipeError("the local helper's input is closed")
        stdin.write(data)

    def write_eof(self) -> None:
        stdin = self._stdin()
        if stdin is not None and not stdin.is_closing():
            stdin.write_eof()

    def close(self) -> None:
        """Kill the helper if it still runs (asyncio does) and close its pipes."""
        self._transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._pipes.closed)

    def exit_status(self) -> int | None:
        code = self._transport.get_returncode()
        return code if code is not None and code >= 0 else None

    def exit_signal(self) -> str | None:
        code = self._transport.get_returncode()
        if code is None or code >= 0:
            return None
        with contextlib.suppress(ValueError):
            return signals.Signals(-code).name.removeprefix("SIG")
        return str(-code)
