"""``HeadTelemetry``: the console's ``TelemetrySource`` (and ``HostControl``) fed by the
head's ``telemetry`` subscription instead of an SSH session to every host.

The console's one connection to the head (``channel.HeadChannel``: its socket here,
or through SSH to ``head.host``; the scheduler side rides it too), one ``telemetry``
request, then the head's pushes: per host, what changed since the last
push (``deltas``), rebuilt into ``HostSnapshot`` objects. Pushes are numbered; one
missing (the connection's push queue keeps only the newest when it overflows) is met
by subscribing again, which starts from a full push. When the head cannot be reached
every host shows it (``unreachable``, the reason, and how to fall back to SSH of
one's own: the key ``S`` or ``gputui --direct``) and the channel tries again with a
growing wait, then this subscribes again with the view it has.

The console says what it shows (``view``: the hosts on screen, the selected GPU);
the head then sends those hosts in full and the others as summaries (the grid's rows,
without the processes' detail or health readings). The view goes with the
subscription and, when it changes, as ``telemetry_view``: debounced, only names the
head watches, at most ``MAX_VIEWED_HOSTS`` hosts besides the selected GPU's; a view
the head did not take for want of an answer is sent again.

Acting on hosts goes to the head too (``signal``): it checks that the caller owns the
process (admins: anyone's) before it acts as root. What only a direct session can do
(a helper request, the sampling interval) says so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gputui.common.i18n import N_
from gputui.common.tasks import cancel_and_wait
from gputui.common.text import clean
from gputui.config.models import Config
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.channel import BACKOFF_CAP_S, BACKOFF_FIRST_S, HeadChannel
from gputui.scheduler.client.deltas import DeltaError, HostBook
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.ops import MAX_VIEWED_HOSTS
from gputui.telemetry import HostSnapshot, HostStatus, Listener, RequestOutcome
from gputui.wire.fields import MAX_GPUS
from gputui.wire.messages import (
    HelperRequest,
    IntervalResult,
    ProcessSample,
    Signal,
    SignalResult,
)
from gputui.wire.words import say

FALLBACK_HINT = "S: watch the hosts over SSH directly (or start with gputui --direct)"
"""What every host says while the head's stream is away."""
SUBSCRIBE_TIMEOUT_S = 15.0
SIGNAL_TIMEOUT_S = 30.0
VIEW_DEBOUNCE_S = 0.2
"""A view is sent this long after it changed (a held arrow key sends one)."""
STOP_TIMEOUT_S = 2.0
"""How long leaving the stream waits for the head (a console quitting waits on it)."""
VIEW_RETRY_S = 2.0
"""A view the head did not answer (a timeout) is sent again after this."""
_NOT_ANSWERED = frozenset({"timeout", "unreachable"})
"""The codes of a view that got no answer (the others: the head refused it)."""


class HeadTelemetry:
    """Every host's telemetry from the head's stream; signals through the head."""

    def __init__(
        self,
        config: Config,
        *,
        channel: HeadChannel[AsyncHeadClient] | None = None,
        backoff_first: float = BACKOFF_FIRST_S,
        backoff_cap: float = BACKOFF_CAP_S,
    ) -> None:
        """``channel``: the console's connection to the head, shared with its scheduler
        side (a channel of its own when not given, with that backoff)."""
        if config.head is None:
            raise ValueError("hosts.yaml has no head: section")
        self.config = config
        self.channel = channel or HeadChannel.to_head(
            config, backoff_first=backoff_first, backoff_cap=backoff_cap
        )
        self._snaps: dict[str, HostSnapshot] = {
            h.name: HostSnapshot(name=h.name, address=h.address, pool=h.pool, labels=h.labels)
            for h in config.resolved()
        }
        self._listeners: tuple[Listener, ...] = ()
        self._task: asyncio.Task[None] | None = None
        self._client: AsyncHeadClient | None = None
        """The connection this is subscribed on (None while away)."""
        self.problem: str | None = None
        """Why the stream is away (None while it flows)."""
        self.on_problem: Callable[[str | None], None] = lambda why: None
        """Told why when the stream goes away, and None when it flows again."""
        self.pushes = 0
        """Pushes applied (for tests and the benchmark)."""
        self._wanted: tuple[tuple[str, ...], tuple[str, int] | None] | None = None
        """What the console shows (``view``); None: it never said (every host in full)."""
        self._head_hosts: frozenset[str] = frozenset()
        """The hosts the head named when this console subscribed."""
        self._sent_view: dict[str, Any] | None = None
        """The view the head has for this subscription (None: not subscribed)."""
        self._view_task: asyncio.Task[None] | None = None
        self.view_problem: str | None = None
        """Why the head refused the last view (None: it took it)."""

    # -- TelemetrySource -----------------------------------------------------------

    def snapshots(self) -> Mapping[str, HostSnapshot]:
        return dict(self._snaps)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

        return unsubscribe

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.channel.serve(self))

    def view(self, hosts: Sequence[str], gpu: tuple[str, int] | None) -> None:
        """``Viewing``: the console shows ``hosts`` with ``gpu`` selected."""
        wanted = (tuple(hosts), gpu)
        if wanted == self._wanted:
            return
        self._wanted = wanted
        self._kick_view()

    def _kick_view(self) -> None:
        if self._view_task is None or self._view_task.done():
            self._view_task = asyncio.get_running_loop().create_task(self._send_view())

    def _view_args(self) -> dict[str, Any] | None:
        """The view as the head takes it: names it watches only, capped, checked."""
        if self._wanted is None:
            return None
        known = self._head_hosts
        hosts, gpu = self._wanted
        shown: list[str] = []
        for name in dict.fromkeys(hosts):
            if name in known and len(shown) < MAX_VIEWED_HOSTS:
                shown.append(name)
        args: dict[str, Any] = {"hosts": shown}
        if gpu is not None and gpu[0] in known and 0 <= gpu[1] < MAX_GPUS:
            args["gpu"] = {"host": gpu[0], "index": gpu[1]}
        return args

    async def _send_view(self) -> None:
        await asyncio.sleep(VIEW_DEBOUNCE_S)
        while True:  # again if the view moved while the last one was on its way
            client, args = self._client, self._view_args()
            if client is None or self._sent_view is None or args is None:
                return
            if args == self._sent_view:
                return
            try:
                await client.call("telemetry_view", args, timeout=SUBSCRIBE_TIMEOUT_S)
            except HeadError as exc:
                self.view_problem = exc.message
                if exc.code not in _NOT_ANSWERED:
                    return  # refused: sent again once the view changes
                await asyncio.sleep(VIEW_RETRY_S)  # unanswered: the head may not have it
                continue
            if client is self._client and self._sent_view is not None:
                self._sent_view = args  # what the head has now (not a newer subscription's)
            self.view_problem = None

    async def close(self) -> None:
        tasks, self._view_task, self._task = (self._view_task, self._task), None, None
        await cancel_and_wait(tasks)
        client = self.channel.conn
        if client is not None:  # the scheduler side keeps the connection: stop the stream
            with contextlib.suppress(HeadError):
                await client.call("telemetry_stop", {}, timeout=STOP_TIMEOUT_S)

    # -- the stream (a part of the channel) ----------------------------------------

    async def follow(self, client: AsyncHeadClient, ready: Callable[[], None]) -> None:
        """Subscribe on ``client`` with the view there is and apply its pushes until
        the connection ends; a missed push subscribes again (from a full push)."""
        self._client = client
        try:
            while await self._subscription(client, ready):
                pass
        except DeltaError as exc:
            raise HeadError.of(
                "protocol", say(N_("the head sent a bad delta: {exc}"), exc=str(exc))
            ) from None
        finally:
            self._client, self._sent_view = None, None

    async def _subscription(self, client: AsyncHeadClient, ready: Callable[[], None]) -> bool:
        """One subscription: True when a push was missed (subscribe again), False
        when the connection ended."""
        self._sent_view = None
        args = self._view_args()
        body: dict[str, Any] = {}
        if args is not None:
            body = {"detail": args["hosts"], **({"gpu": args["gpu"]} if "gpu" in args else {})}
        answer = await client.call("telemetry", body, timeout=SUBSCRIBE_TIMEOUT_S)
        ready()
        hosts = answer.get("hosts")
        self._head_hosts = frozenset(
            h for h in (hosts if isinstance(hosts, list) else ()) if isinstance(h, str)
        )
        self._sent_view = {} if args is None else args
        if self._view_args() != self._sent_view:
            self._kick_view()  # the view moved, or the head's hosts were not known yet
        # Pushes of the subscription before this one, still unread, came before its
        # answer: passed over (the first of this one is numbered 0 again).
        book, expected, stale = HostBook(), 0, client.queued("telemetry")
        async for push in client.pushes("telemetry"):
            if expected == 0 and stale > 0 and push.get("n") != 0:
                stale -= 1
                continue
            if push.get("n") != expected:
                return True  # one was dropped on the way: start again from a full push
            expected += 1
            hosts = push.get("hosts")
            for delta in hosts if isinstance(hosts, list) else ():
                snap = book.apply(delta)
                if snap.name in self._snaps:
                    self._publish(snap)
            if self.problem is not None:
                self.problem = None
                self.on_problem(None)
            self.pushes += 1
        return False

    def _publish(self, snap: HostSnapshot) -> None:
        self._snaps[snap.name] = snap
        for listener in self._listeners:
            listener(snap)

    def away(self, why: str) -> None:
        """The channel lost the head (or cannot reach it): every host says so."""
        self.problem = why
        self.on_problem(why)
        message = f"through the head, which is away ({why}) — {FALLBACK_HINT}"
        for snap in list(self._snaps.values()):
            self._publish(snap.with_changes(status=HostStatus.UNREACHABLE, message=message))

    # -- HostControl -----------------------------------------------------------------

    def retry_now(self, host: str | None = None) -> None:
        self.channel.retry_now()

    async def signal_process(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> RequestOutcome[SignalResult]:
        client = self._client
        if client is None:
            return RequestOutcome(False, f"not sent: head unreachable ({self.problem})", "offline")
        args: dict[str, Any] = {
            "host": host,
            "gpu_uuid": gpu_uuid,
            "pid": process.pid,
            "start_ticks": process.start_ticks,
            "signal": signal,
        }
        try:
            result = await client.call("signal", args, timeout=SIGNAL_TIMEOUT_S)
        except HeadError as exc:
            return RequestOutcome(False, exc.message, exc.code)
        method = result.get("method")
        value = SignalResult(method=clean(method, 32) if isinstance(method, str) else "head")
        return RequestOutcome(True, f"SIG{signal} sent to {process.pid} by the head", value=value)

    async def request(self, host: str, request: HelperRequest[Any]) -> RequestOutcome[Any]:
        return RequestOutcome(
            False, "not through the head: this needs a direct session (gputui --direct)",
            "unsupported",
        )  # fmt: skip

    async def set_refresh_interval(
        self, seconds: float
    ) -> dict[str, RequestOutcome[IntervalResult]]:
        return {}
