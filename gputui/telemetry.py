"""What the console knows about each host: the view model between fleet and UI.

The fleet (SSH to every host) produces ``HostSnapshot`` objects; the UI renders
them. Nothing here does I/O, so widgets can import it freely. A later source (the
head's aggregated stream) can serve the same ``TelemetrySource`` interface; acting on
hosts goes through ``HostControl``, kept apart so either can change alone (``ReadOnly``
is the control of a source that cannot act). The console uses only these two
interfaces; the CLI and the demo, which build it, pick the source behind them.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from gputui.wire.messages import (
    Event,
    Hello,
    HelperRequest,
    IntervalResult,
    JobState,
    ProcessSample,
    Sample,
    Signal,
    SignalResult,
)


class HostStatus(enum.Enum):
    """Where a host stands, as a person needs to see it."""

    CONNECTING = "connecting"
    LIVE = "live"
    STALE = "stale"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth failed"
    HOST_KEY_UNKNOWN = "host key unknown"
    HOST_KEY_CHANGED = "host key changed"
    HELPER_ERROR = "helper error"
    NVML_ERROR = "nvml error"
    STOPPED = "stopped"

    @property
    def is_problem(self) -> bool:
        return self not in (HostStatus.LIVE, HostStatus.CONNECTING, HostStatus.STOPPED)


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """The latest of everything known about one host. Immutable: replaced, not edited."""

    name: str
    address: str
    status: HostStatus = HostStatus.CONNECTING
    message: str = ""
    pool: str = "default"
    labels: Mapping[str, str] = field(default_factory=dict)
    hello: Hello | None = None
    sample: Sample | None = None
    received_at: float | None = None
    next_retry_at: float | None = None
    events: tuple[Event, ...] = ()
    stale_after_s: float | None = None
    """Seconds without a sample after which the source calls this host stale (it follows
    the sampling interval in use); None: the source sets no limit of its own. The rule
    itself is ``gputui.health.is_stale``."""
    notes: tuple[str, ...] = ()
    """What the source noted about this host's session: message types it does not know,
    entries it dropped. Shown like the decoder's notes on a hello or sample."""
    jobs: tuple[JobState, ...] = ()
    """The supervised jobs of the namespace the helper watches (``--jobs NS``): the
    latest full list it pushed (kept across a reconnect until the next one comes)."""
    jobs_seen_at: float | None = None
    """Wall time the ``jobs`` list arrived; None: none has yet."""

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the last sample arrived, or None before the first one."""
        if self.received_at is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.received_at)

    def with_changes(self, **changes: object) -> HostSnapshot:
        return replace(self, **changes)  # type: ignore[arg-type]


T_co = TypeVar("T_co", covariant=True)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class RequestOutcome(Generic[T_co]):
    """What came of a request to a host, in words a person can act on, and its value.

    ``code`` says why it failed: the helper's own code (``permission-denied``,
    ``unknown-job``, ``exec-failed`` ...), or the client's: ``offline`` (not sent),
    ``timeout`` (sent, no answer in time: it may still act), ``lost`` (sent, the
    connection ended before an answer), ``bad-request`` (not sent: too big),
    ``bad-result`` (answered with a value that breaks the op's rules),
    ``unknown-host``. ``value`` is the decoded result when ``ok``.
    """

    ok: bool
    message: str
    code: str | None = None
    value: T_co | None = None


Listener = Callable[[HostSnapshot], None]


class TelemetrySource(Protocol):
    """What feeds the console's view: the SSH fleet today, the head's stream later.

    Only telemetry: acting on hosts is ``HostControl``'s, a separate interface, so a
    read-only source (a replay, a head that serves no control) fits here as it is.
    """

    def snapshots(self) -> Mapping[str, HostSnapshot]:
        """The latest snapshot of every host, keyed by host name, in config order."""
        ...

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` on the event loop with every new snapshot; returns unsubscribe."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class Viewing(Protocol):
    """A source that sends in full only what the console shows (the head's stream):
    the console tells it which hosts are on screen and which GPU is selected. A
    source without it (the SSH fleet) has every host in full anyway."""

    def view(self, hosts: Sequence[str], gpu: tuple[str, int] | None) -> None:
        """The console now shows ``hosts`` (screen order) with ``gpu`` (host, index)
        selected; cheap, called whenever the view may have changed (the source
        debounces and sends only a change)."""
        ...


@runtime_checkable
class HostControl(Protocol):
    """Acting on hosts: signals, helper requests, reconnects, the sampling interval."""

    def retry_now(self, host: str | None = None) -> None:
        """Skip the backoff wait: reconnect ``host`` (or every waiting host) now."""
        ...

    async def signal_process(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> RequestOutcome[SignalResult]:
        """Ask ``host``'s helper to signal ``process`` after verifying it is still that one."""
        ...

    async def request(self, host: str, request: HelperRequest[R]) -> RequestOutcome[R]:
        """Send one request to ``host``'s helper; its typed result, or why there is none."""
        ...

    async def set_refresh_interval(
        self, seconds: float
    ) -> Mapping[str, RequestOutcome[IntervalResult]]:
        """Ask every connected helper to sample every ``seconds``; the outcome per host."""
        ...


class ReadOnly:
    """The ``HostControl`` of a source that cannot act on hosts: every action says so."""

    _TEXT = "this console cannot act on hosts (its data source is read-only)"

    def retry_now(self, host: str | None = None) -> None:
        return None

    async def signal_process(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> RequestOutcome[SignalResult]:
        return RequestOutcome(False, self._TEXT, "unsupported")

    async def request(self, host: str, request: HelperRequest[R]) -> RequestOutcome[R]:
        return RequestOutcome(False, self._TEXT, "unsupported")

    async def set_refresh_interval(
        self, seconds: float
    ) -> dict[str, RequestOutcome[IntervalResult]]:
        return {}
