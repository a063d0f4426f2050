"""``HostLink``: one host kept connected, its helper running, its requests answered.

A link runs forever (until closed): connect (SSH, or nothing for a local host whose
helper is a child process), start the helper, stream its lines, and on any failure
show why and reconnect with jittered backoff; a watchdog marks the host stale when
samples stop and drops a connection that went silent. What the helper says becomes
the host's snapshot in the link's ``HostFeed`` (``gputui.fleet.feed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import asyncssh

from gputui.common.tasks import within
from gputui.common.text import clean
from gputui.config.models import ResolvedHost
from gputui.fleet.backoff import Backoff, LinkTiming, thresholds
from gputui.fleet.connector import HostConnector
from gputui.fleet.failures import (
    EDGE_ERRORS,
    Failure,
    HelperFailure,
    SetupFailure,
    TunnelFailure,
    classify,
    helper_channel_failure,
)
from gputui.fleet.feed import HostFeed
from gputui.fleet.hostkeys import KnownHostsCache, VerifyingClient
from gputui.fleet.jumps import JumpFailure, JumpPool
from gputui.fleet.requests import send
from gputui.fleet.session import HelperSession
from gputui.health import is_stale
from gputui.telemetry import HostSnapshot, HostStatus, R, RequestOutcome
from gputui.wire.decode import ProtocolError
from gputui.wire.messages import HelperRequest, IntervalRequest, IntervalResult

log = logging.getLogger(__name__)


def helper_argv(
    host: ResolvedHost,
    interval: float,
    extra: Sequence[str] = (),
    health_every: float | None = None,
) -> list[str]:
    """The helper's arguments for ``host``: sim mode when configured, always the interval,
    the health readings' interval when given, then ``extra`` (the fleet's
    ``helper_args``, e.g. ``--jobs NS``)."""
    argv: list[str] = []
    if host.sim:
        argv += ["--sim", host.sim]
    argv += ["--interval", str(interval)]
    if health_every is not None:
        argv += ["--health-every", str(health_every)]
    argv += [str(arg) for arg in extra]
    return argv


class HostLink:
    """Keeps one host connected and its snapshot current."""

    def __init__(
        self,
        host: ResolvedHost,
        *,
        interval: float,
        stale_after: float,
        publish: Callable[[HostSnapshot], None],
        gate: asyncio.Semaphore,
        known_hosts: KnownHostsCache | None = None,
        jumps: JumpPool | None = None,
        timing: LinkTiming | None = None,
        connect_options: Mapping[str, Any] | None = None,
        helper_args: Sequence[str] = (),
        health_every: float | None = None,
    ) -> None:
        """``interval``: seconds between samples; ``stale_after``: hosts.yaml's
        ``stale_after_s``, raised as a slow interval needs (see ``thresholds``);
        ``helper_args``: more helper arguments, after the link's own;
        ``health_every``: seconds between the helper's health readings (its default
        when None)."""
        self.host = host
        self.health_every = health_every
        self.name = host.name
        self._helper_args = tuple(helper_args)
        self._connector = HostConnector(
            host,
            gate=gate,
            known_hosts=known_hosts or KnownHostsCache(),
            jumps=jumps or JumpPool(),
            connect_options=connect_options,
        )
        self.timing = timing or LinkTiming()
        self._stale_setting = stale_after
        self.feed = HostFeed(
            HostSnapshot(
                name=host.name, address=host.address, pool=host.pool, labels=dict(host.labels)
            ),
            publish,
        )
        self.set_interval_thresholds(interval)
        self._session: HelperSession | None = None
        """The helper requests go to: set once it said hello (``_serving``)."""
        self._up = asyncio.Event()
        """Set while ``_session`` is (``wait_session``)."""
        self._helper: HelperSession | None = None
        """The helper running now, from its start (what ``close`` ends)."""
        self._conn: asyncssh.SSHClientConnection | None = None
        self._abort: Failure | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._backoff = Backoff(self.timing.backoff_base, self.timing.backoff_cap)

    # -- snapshot ---------------------------------------------------------------------

    @property
    def snapshot(self) -> HostSnapshot:
        """What the console shows of this host now (the feed's latest)."""
        return self.feed.snapshot

    @property
    def session(self) -> HelperSession | None:
        """The helper session requests go to now (None while there is none)."""
        return self._session

    async def wait_session(self, seconds: float) -> HelperSession | None:
        """The helper session requests go to, waiting up to ``seconds`` for one while
        the host connects (a head just started, a link reconnecting); None if none came."""
        if self._session is None and not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._up.wait(), seconds)
        return self._session

    @property
    def samples_received(self) -> int:
        return self.feed.samples_received

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, stream, and reconnect until ``close``; never raises."""
        while not self._closing:
            self.feed.set(status=HostStatus.CONNECTING, message="connecting", next_retry_at=None)
            started = time.monotonic()
            self._abort = None
            verdict_box: list[VerifyingClient] = []
            try:
                await self._connect_and_stream(verdict_box)
                failure = self._abort or Failure(HostStatus.UNREACHABLE, "connection closed")
            except asyncio.CancelledError:
                raise
            except (
                *EDGE_ERRORS,
                HelperFailure,
                JumpFailure,
                SetupFailure,
                TunnelFailure,
                ProtocolError,
                ValueError,
            ) as exc:
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
            elif failure.refused:
                delay = self._backoff.next_delay(self.timing.refused_cap)
            else:
                delay = self._backoff.next_delay()
            self.feed.set(
                status=failure.status,
                message=failure.message,
                next_retry_at=time.time() + delay,
            )
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self._wake.wait(), delay)

    def _failure(self, exc: BaseException, verdict_box: list[VerifyingClient]) -> Failure:
        if self._abort is not None:
            return self._abort
        if isinstance(exc, JumpFailure):
            return exc.failure
        if isinstance(exc, ProtocolError):
            # A bad line mid-stream: the session is dropped, but retried at normal pace.
            return Failure(HostStatus.HELPER_ERROR, f"helper sent a bad line: {clean(exc, 200)}")
        verdict = next((c.verdict for c in verdict_box if c.verdict is not None), None)
        timeout, user = self.host.connect_timeout, self._connector.user
        return classify(exc, user=user, address=self.host.address, timeout=timeout, verdict=verdict)

    @property
    def login_user(self) -> str:
        """Who the helper runs as there: the SSH login user, or this process's user for
        a local host (the head decides from it whose jobs may run on the host)."""
        if self.host.local:
            import getpass

            return getpass.getuser()
        return self._connector.user

    def set_interval_thresholds(self, interval: float) -> None:
        """The helper now samples every ``interval`` s: stale and hung limits follow."""
        self.interval = interval
        self.stale_after, self.hung_after = thresholds(
            self._stale_setting, interval, self.timing.hung_after
        )
        if self.snapshot.stale_after_s != self.stale_after:
            # Views re-check the data age between snapshots with the same limit.
            self.feed.set(stale_after_s=self.stale_after)

    def retry_now(self) -> None:
        """Skip the rest of the backoff wait (e.g. after the user fixed known_hosts)."""
        self._wake.set()

    async def close(self) -> None:
        """Stop reconnecting; end the helper (stdin EOF) and the connection."""
        self._closing = True
        self._wake.set()
        session, conn = self._helper, self._conn
        if session is not None:
            await session.close(self.timing.close_timeout)
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await within(conn.wait_closed(), self.timing.close_timeout)

    def mark_stopped(self) -> None:
        self.feed.set(status=HostStatus.STOPPED, message="stopped", next_retry_at=None)

    # -- connecting and the helper session ----------------------------------------

    async def _connect_and_stream(self, box: list[VerifyingClient]) -> None:
        argv = helper_argv(self.host, self.interval, self._helper_args, self.health_every)
        if self.host.local:
            await self._run_local(argv)
        else:
            await self._run_ssh(argv, box)

    async def _run_local(self, argv: list[str]) -> None:
        """The helper as a child process: no SSH, the same session above it."""
        try:
            session = await HelperSession.local(self.host.python, argv)
        except OSError as exc:
            reason = clean(exc.strerror or exc, 120) or type(exc).__name__
            raise HelperFailure(
                HostStatus.HELPER_ERROR,
                f"could not start the helper: {clean(self.host.python, 120)}: {reason}",
            ) from None
        await self._serve(session, session.abort)

    async def _run_ssh(self, argv: list[str], box: list[VerifyingClient]) -> None:
        conn, lease = await self._connector.open(box)
        self._conn = conn
        try:
            try:
                session = await HelperSession.over_ssh(conn, self.host.python, argv)
            except asyncssh.ChannelOpenError as exc:
                raise helper_channel_failure(exc) from exc
            await self._serve(session, conn.abort)
        finally:
            self._conn = None
            conn.abort() if self._abort is not None else conn.close()
            try:
                with contextlib.suppress(Exception):
                    await within(conn.wait_closed(), self.timing.close_timeout)
            finally:
                if lease is not None:
                    lease.release()  # the last host through a bastion closes it

    async def _serve(self, session: HelperSession, abort: Callable[[], None]) -> None:
        """Hello, then stream until the helper ends or hangs (``abort`` cuts it off)."""
        self._helper = session
        try:
            hello = await session.handshake(self.timing.hello_timeout)
            self.feed.hello(hello)
            self._serving(session)
            watchdog = asyncio.get_running_loop().create_task(self._watch(abort))
            try:
                await self._stream(session)
            finally:
                watchdog.cancel()
                self._serving(None)
                session.fail_pending()
                self.feed.terminals_lost(f"lost the connection to {self.name}")
            if self._abort is None:
                await session.raise_ended(self.timing.close_timeout, slow=False)
        finally:
            self._serving(None)
            self._helper = None
            await session.close(self.timing.close_timeout)

    def _serving(self, session: HelperSession | None) -> None:
        """Requests go to ``session`` now (None: to none), and waiters hear of it."""
        self._session = session
        if session is None:
            self._up.clear()
        else:
            self._up.set()

    async def _stream(self, session: HelperSession) -> None:
        await session.stream(self.feed.line_handler(session))

    async def _watch(self, abort: Callable[[], None]) -> None:
        """Mark the host STALE when samples stop (``gputui.health``'s rule); drop the
        connection when nothing at all comes any more (hung)."""
        loop = asyncio.get_running_loop()
        while True:
            stale, hung = self.stale_after, self.hung_after  # follow interval changes
            now = loop.time()
            silent, quiet = now - self.feed.last_rx, now - self.feed.last_sample
            if silent >= hung:
                self._abort = Failure(
                    HostStatus.UNREACHABLE, f"no data for {silent:.0f} s; reconnecting"
                )
                abort()
                return
            if is_stale(quiet, stale):
                if self.snapshot.status is HostStatus.LIVE:
                    self.feed.set(status=HostStatus.STALE, message=f"no sample for {stale:g} s")
                await asyncio.sleep(min(hung - silent, stale) + 0.01)
            else:
                await asyncio.sleep(min(hung - silent, stale - quiet) + 0.01)

    # -- requests ---------------------------------------------------------------------

    async def request(self, request: HelperRequest[R]) -> RequestOutcome[R]:
        """Send ``request`` to this host's helper; its typed result, or why there is none.

        Request ids count per session: an answer only ever matches its own session's
        request. A request not answered in ``LinkTiming.request_timeout`` is
        ``timeout`` and one whose connection ended first is ``lost``: either may still
        have been acted on (a launch is resolved by asking ``jobs``: ``Fleet.launch``).
        """
        status = self.snapshot.status.value
        timeout = request.answer_within(self.timing.request_timeout)
        return await send(self._session, request, host=self.name, status=status, timeout=timeout)

    async def set_interval(self, seconds: float) -> RequestOutcome[IntervalResult]:
        """Sample every ``seconds``; the stale and hung limits follow what was applied."""
        outcome = await self.request(IntervalRequest(seconds=seconds))
        if outcome.value is not None:
            self.set_interval_thresholds(outcome.value.seconds)
        elif outcome.code == "bad-result":
            # It said it applied one, then sent a number that cannot be one (NaN, 1e308
            # would switch the watchdog off): the limits follow what was asked.
            self.set_interval_thresholds(seconds)
        return outcome
