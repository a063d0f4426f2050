"""``HostLink``: one host's SSH connection, its helper, and what the console shows of it.

A link runs forever (until closed): connect, start the helper, stream samples,
and on any failure show why and reconnect with jittered backoff. Every change is a
new immutable ``HostSnapshot`` handed to ``publish``. The per-sample path is one
decode, one snapshot replace and the publish call, nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from gputui.config import ResolvedHost
from gputui.protocol import (
    Event,
    Hello,
    HelperError,
    ProcessSample,
    ProtocolError,
    Result,
    Sample,
    Signal,
    decode_helper_line,
    interval_request,
    signal_request,
)
from gputui.telemetry import HostSnapshot, HostStatus, SignalOutcome
from gputui.text import clean

from .backoff import Backoff, LinkTiming
from .failures import EDGE_ERRORS, Failure, HelperFailure, classify, result_message
from .hostkeys import KnownHostsCache, VerifyingClient
from .session import HelperSession, check_versions, encryption_preference

log = logging.getLogger(__name__)

EVENTS_KEPT = 200
_DEFAULT_CIPHERS = list(get_default_encryption_algs())
_PREFERRED_CIPHERS = encryption_preference()


def parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (``[v6addr]:port`` too) -> (user, host, port)."""
    user, _, rest = spec.rpartition("@")
    port: int | None = None
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        if tail.startswith(":") and tail[1:].isdigit():
            port = int(tail[1:])
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
        if not port_text.isdigit():
            raise ValueError(f"proxy_jump {spec!r}: port must be a number")
        port = int(port_text)
    else:
        host = rest
    if not host:
        raise ValueError(f"proxy_jump {spec!r}: no host")
    return user or None, host, port


class HostLink:
    """Keeps one host connected and its snapshot current."""

    def __init__(
        self,
        host: ResolvedHost,
        *,
        argv: Sequence[str],
        stale_after: float,
        publish: Callable[[HostSnapshot], None],
        gate: asyncio.Semaphore,
        known_hosts: KnownHostsCache | None = None,
        timing: LinkTiming | None = None,
        connect_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.name = host.name
        self._argv = list(argv)
        self._stale_after = stale_after
        self._publish = publish
        self._gate = gate
        self._known_hosts = known_hosts or KnownHostsCache()
        self.timing = timing or LinkTiming()
        self._hung_after = self.timing.hung_after or max(30.0, 6 * stale_after)
        self._extra = dict(connect_options or {})
        self.snapshot = HostSnapshot(
            name=host.name, address=host.address, pool=host.pool, labels=dict(host.labels)
        )
        self.samples_received = 0
        self._session: HelperSession | None = None
        self._conn: asyncssh.SSHClientConnection | None = None
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self._last_rx = 0.0
        self._abort: Failure | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._user = host.user or getpass.getuser()
        self._backoff = Backoff(self.timing.backoff_base, self.timing.backoff_cap)
        self._identity = str(Path(host.identity_file).expanduser()) if host.identity_file else None

    # -- snapshot ---------------------------------------------------------------------

    def _set(self, **changes: Any) -> None:
        self.snapshot = new = replace(self.snapshot, **changes)
        self._publish(new)

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, stream, and reconnect until ``close``; never raises."""
        while not self._closing:
            self._set(status=HostStatus.CONNECTING, message="connecting", next_retry_at=None)
            started = time.monotonic()
            self._abort = None
            verdict_box: list[VerifyingClient] = []
            try:
                await self._connect_and_stream(verdict_box)
                failure = self._abort or Failure(HostStatus.UNREACHABLE, "connection closed")
            except asyncio.CancelledError:
                raise
            except (*EDGE_ERRORS, HelperFailure, ProtocolError, ValueError) as exc:
                failure = self._failure(exc, verdict_box)
            except Exception as exc:  # a bug here must not take down the other hosts
                log.exception("host %s: unexpected error", self.name)
                failure = Failure(
                    HostStatus.HELPER_ERROR, clean(f"internal error: {exc!r}", 200), True
                )
            if self._closing:
                break
            if time.monotonic() - started >= self.timing.stable_after:
                self._backoff.reset()
            if failure.slow_retry:
                delay = self._backoff.slow(self.timing.slow_retry)
            else:
                delay = self._backoff.next_delay()
            self._set(
                status=failure.status,
                message=failure.message,
                next_retry_at=time.time() + delay,
            )
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    def _failure(self, exc: BaseException, verdict_box: list[VerifyingClient]) -> Failure:
        if self._abort is not None:
            return self._abort
        if isinstance(exc, ProtocolError):
            # A bad line mid-stream: the session is dropped, but retried at normal pace.
            return Failure(HostStatus.HELPER_ERROR, f"helper sent a bad line: {clean(exc, 200)}")
        if isinstance(exc, ValueError) and not isinstance(exc, asyncssh.Error):
            # asyncssh reports unusable keys and ssh_config files as ValueError.
            return Failure(
                HostStatus.AUTH_FAILED, f"cannot set up SSH: {clean(exc, 200)}", slow_retry=True
            )
        verdict = next((c.verdict for c in verdict_box if c.verdict is not None), None)
        timeout = self.host.connect_timeout
        return classify(
            exc, user=self._user, address=self.host.address, timeout=timeout, verdict=verdict
        )

    def retry_now(self) -> None:
        """Skip the rest of the backoff wait (e.g. after the user fixed known_hosts)."""
        self._wake.set()

    async def close(self) -> None:
        """Stop reconnecting; end the helper (stdin EOF) and the connection."""
        self._closing = True
        self._wake.set()
        session, conn = self._session, self._conn
        if session is not None:
            await session.close(self.timing.close_timeout)
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), self.timing.close_timeout)

    def mark_stopped(self) -> None:
        self._set(status=HostStatus.STOPPED, message="stopped", next_retry_at=None)

    # -- connecting -------------------------------------------------------------------

    async def _options(
        self, host: str, port: int | None, user: str | None, box: list[VerifyingClient]
    ) -> asyncssh.SSHClientConnectionOptions:
        path, entries = self._known_hosts.load(self.host.known_hosts)
        client = VerifyingClient(entries, path)
        box.append(client)
        kwargs: dict[str, Any] = {
            "config": self._ssh_configs(),
            "host": host,
            "known_hosts": entries,
            "client_factory": lambda: client,
            "agent_forwarding": False,
            "x11_forwarding": False,
            "keepalive_interval": self.host.keepalive_interval or (),
            "connect_timeout": self.host.connect_timeout,
        }
        if port is not None:
            kwargs["port"] = port
        if user is not None:
            kwargs["username"] = user
        if self._identity is not None:
            kwargs["client_keys"] = [self._identity]
            kwargs["agent_path"] = None
        kwargs.update(self._extra)
        options: asyncssh.SSHClientConnectionOptions = (
            await asyncssh.SSHClientConnectionOptions.construct(**kwargs)
        )
        if list(options.encryption_algs) == _DEFAULT_CIPHERS:
            # Neither ssh_config (Ciphers) nor the caller chose: offer AES-GCM first
            # (every default stays allowed, so any server still finds a match).
            options = await asyncssh.SSHClientConnectionOptions.construct(
                options=options, encryption_algs=_PREFERRED_CIPHERS
            )
        return options

    def _ssh_configs(self) -> list[str]:
        """The ssh_config file when it exists; ``[]`` (not the default file) otherwise."""
        if not self.host.ssh_config:
            return []
        path = Path(self.host.ssh_config).expanduser()
        return [str(path)] if path.is_file() else []

    async def _open(
        self, box: list[VerifyingClient]
    ) -> tuple[asyncssh.SSHClientConnection, asyncssh.SSHClientConnection | None]:
        jump: asyncssh.SSHClientConnection | None = None
        if self.host.proxy_jump:
            jump_user, jump_host, jump_port = parse_jump(self.host.proxy_jump)
            jump_options = await self._options(jump_host, jump_port, jump_user, box)
            jump = await asyncssh.connect(jump_host, options=jump_options)
        try:
            options = await self._options(self.host.address, self.host.port, self.host.user, box)
            self._user = str(options.username or self._user)
            conn = await asyncssh.connect(
                self.host.address, options=options, tunnel=jump if jump is not None else ()
            )
        except BaseException:
            if jump is not None:
                jump.abort()
            raise
        return conn, jump

    async def _connect_and_stream(self, box: list[VerifyingClient]) -> None:
        # The gate bounds TCP + key exchange + auth across the fleet (sshd MaxStartups).
        limit = self.host.connect_timeout * (2 if self.host.proxy_jump else 1)
        async with self._gate:
            conn, jump = await asyncio.wait_for(self._open(box), limit)
        self._conn = conn
        try:
            session = await HelperSession.start(conn, self.host.python, self._argv)
            try:
                hello = await session.handshake(self.timing.hello_timeout)
                self._on_hello(hello)
                self._session = session
                watchdog = asyncio.get_running_loop().create_task(self._watch(conn))
                try:
                    await self._stream(session)
                finally:
                    watchdog.cancel()
                    self._session = None
                    session.fail_pending()
                if self._abort is None:
                    exited, details = await session.exit_details(self.timing.close_timeout)
                    if not exited:
                        raise asyncssh.ConnectionLost(details)
                    raise HelperFailure(HostStatus.HELPER_ERROR, f"helper {details}", slow=False)
            finally:
                self._session = None
                await session.close(self.timing.close_timeout)
        finally:
            self._conn = None
            conn.abort() if self._abort is not None else conn.close()
            if jump is not None:
                jump.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), self.timing.close_timeout)

    def _on_hello(self, hello: Hello) -> None:
        check_versions(hello)
        self._last_rx = asyncio.get_running_loop().time()
        nvml_error = hello.errors.get("nvml")
        if nvml_error:
            message = f"NVML: {nvml_error}"
            self._set(hello=hello, status=HostStatus.NVML_ERROR, message=message)
            raise HelperFailure(HostStatus.NVML_ERROR, message)
        self._set(hello=hello, status=HostStatus.LIVE, message="", next_retry_at=None)

    # -- streaming (the hot path) -----------------------------------------------------

    async def _stream(self, session: HelperSession) -> None:
        await session.stream(self._line_handler(session))

    def _line_handler(self, session: HelperSession) -> Callable[[bytes], None]:
        """The per-line callback, run inside asyncssh's ``data_received``."""
        loop_time = asyncio.get_running_loop().time
        wall_time = time.time
        live = HostStatus.LIVE
        publish = self._publish

        def on_line(line: bytes) -> None:
            if not line or line.isspace():
                return
            message = decode_helper_line(line)
            self._last_rx = loop_time()
            if type(message) is Sample:  # exact type checks: cheapest dispatch
                self.samples_received += 1
                snap = self.snapshot
                if snap.status is live:
                    self.snapshot = new = replace(snap, sample=message, received_at=wall_time())
                    publish(new)
                else:
                    self._set(sample=message, received_at=wall_time(), status=live, message="")
            elif type(message) is Result:
                future = session.pending.get(message.id)
                if future is not None and not future.done():
                    future.set_result(message)
            elif type(message) is Event:
                self._events.append(message)
                self._set(events=tuple(self._events))
            elif type(message) is HelperError:
                if message.fatal:
                    raise HelperFailure(HostStatus.NVML_ERROR, message.message, slow=True)
                self._set(message=message.message)
            elif type(message) is Hello:
                check_versions(message)
                self._set(hello=message)

        return on_line

    async def _watch(self, conn: asyncssh.SSHClientConnection) -> None:
        """Mark the host STALE when samples stop; drop the connection when it hangs."""
        loop = asyncio.get_running_loop()
        stale, hung = self._stale_after, self._hung_after
        while True:
            silent = loop.time() - self._last_rx
            if silent >= hung:
                self._abort = Failure(
                    HostStatus.UNREACHABLE, f"no data for {silent:.0f} s; reconnecting"
                )
                conn.abort()
                return
            if silent >= stale:
                if self.snapshot.status is HostStatus.LIVE:
                    self._set(status=HostStatus.STALE, message=f"no sample for {stale:g} s")
                await asyncio.sleep(min(hung - silent, stale) + 0.01)
            else:
                await asyncio.sleep(stale - silent + 0.01)

    # -- requests ---------------------------------------------------------------------

    async def request(self, line_for: Callable[[int], str]) -> Result | SignalOutcome:
        """Send one request; the helper's ``Result`` or an outcome saying why there is none."""
        session = self._session
        if session is None:
            status = self.snapshot.status.value
            return SignalOutcome(False, f"{self.name} is not connected ({status})", "offline")
        request_id = session.next_id()
        future: asyncio.Future[Result | None] = asyncio.get_running_loop().create_future()
        session.pending[request_id] = future
        timeout = self.timing.signal_timeout
        try:
            session.send(line_for(request_id))
            result = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            return SignalOutcome(False, f"{self.name} did not answer in {timeout:g} s", "timeout")
        except EDGE_ERRORS as exc:
            text = clean(exc, 120) or type(exc).__name__
            return SignalOutcome(False, f"could not reach {self.name}: {text}", "offline")
        finally:
            session.pending.pop(request_id, None)
        if result is None:
            return SignalOutcome(
                False, f"lost the connection to {self.name} before it answered", "offline"
            )
        return result

    async def signal(self, gpu_uuid: str, process: ProcessSample, signal: Signal) -> SignalOutcome:
        answer = await self.request(
            lambda rid: signal_request(
                rid,
                pid=process.pid,
                signal=signal,
                gpu_uuid=gpu_uuid,
                uid=process.uid,
                start_ticks=process.start_ticks,
            )
        )
        if isinstance(answer, SignalOutcome):
            return answer
        return SignalOutcome(answer.ok, result_message(answer, process.pid, signal), answer.code)

    async def set_interval(self, seconds: float) -> SignalOutcome:
        answer = await self.request(lambda rid: interval_request(rid, seconds))
        if isinstance(answer, SignalOutcome):
            return answer
        if answer.ok:
            return SignalOutcome(True, f"{self.name} samples every {seconds:g} s")
        return SignalOutcome(False, clean(answer.error or answer.code or "refused", 200))
