"""What the head needs of its GPU hosts, as one small interface over the Fleet.

The daemon never touches SSH itself: it launches, signals, reads logs and
watches host states through ``HostOps``. ``FleetHosts`` serves it from a
``Fleet`` (one helper session per host, started with ``--jobs NS`` so each helper
pushes the state of the head's runs); tests may serve it otherwise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gputui.scheduler.head.lifecycle import HostJob, Launch
from gputui.telemetry import HostSnapshot
from gputui.wire.messages import Pty


@dataclass(frozen=True, slots=True)
class HostAnswer:
    """A host's answer to one request: ``value`` when ``ok``, else why not."""

    ok: bool
    value: Any = None
    code: str | None = None
    message: str = ""


def signal_outcome(name: str, answer: HostAnswer) -> str:
    """An audit row's outcome for signal ``name`` (``SIGTERM``) as its host answered."""
    if answer.ok:
        return f"{name} delivered"
    return f"{name} not delivered: {answer.code}: {answer.message}"[:256]


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process on a GPU as a sample showed it: what its host checks before a signal."""

    gpu_uuid: str
    pid: int
    uid: int | None
    start_ticks: int | None


class TerminalLine(Protocol):
    """An interactive job's terminal, attached through its host (``fleet.terminal``)."""

    def send(
        self,
        data: str | None = None,
        *,
        rows: int | None = None,
        cols: int | None = None,
        ack: int | None = None,
    ) -> bool:
        """Input (base64), a window size, an acknowledgement; False once it is gone."""
        ...

    def close(self) -> None: ...


class HostOps(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def updates(self) -> AsyncIterator[HostSnapshot]:
        """Every host's latest snapshot as it changes (coalesced per host)."""
        ...

    def reports(self, snapshot: HostSnapshot) -> tuple[HostJob, ...] | None:
        """The runs this host last reported (the same tuple until something changes)."""
        ...

    def login_user(self, host: str) -> str | None:
        """The user the head logs in as on ``host`` (None while unknown)."""
        ...

    async def launch(self, spec: Launch) -> HostAnswer:
        """Start a run; ``value`` is its ``HostJob``. A timeout is resolved by asking."""
        ...

    async def signal_job(
        self, host: str, key: int, signal: str, grace_s: float | None
    ) -> HostAnswer: ...

    async def signal_process(self, host: str, process: GpuProcess, signal: str) -> HostAnswer:
        """Signal a process on a GPU, verified on the host first (pid, owner, start
        time, still on that GPU), so a pid reused since it was seen is never hit."""
        ...

    async def job_log(self, host: str, key: int, offset: int, max_bytes: int) -> HostAnswer:
        """``value``: dict with data, offset, size, ended."""
        ...

    async def forget(self, host: str, keys: Sequence[int]) -> HostAnswer: ...

    async def open_pty(
        self, host: str, key: int, rows: int, cols: int, listener: Callable[[Pty], None]
    ) -> tuple[HostAnswer, TerminalLine | None]:
        """Attach to run ``key``'s terminal: its ``pty`` messages go to ``listener``
        (the ring first) until one that is not ``out``."""
        ...

    async def holders(self, host: str, index: int) -> HostAnswer:
        """What holds GPU ``index``'s device files open; ``value``: the ``holders``
        result as a dict (device, holders, found, unreadable, notes)."""
        ...

    async def reset_gpu(self, host: str, index: int, uuid: str) -> HostAnswer:
        """Reset GPU ``index`` if it is still ``uuid`` and idle; ``value``: the
        ``ResetResult`` as a dict (``reset``, ``error`` and ``message``: why not;
        ``via``; after a reset ``mem_used_mib`` and ``processes``)."""
        ...

    async def clocks(self, host: str, index: int, uuid: str, action: str) -> HostAnswer:
        """Lock GPU ``index``'s clocks low (``lock``) or reset them (``reset``) if it is
        still ``uuid``; ``value``: the ``ClocksResult`` as a dict (``locked``,
        ``supported``, ``error``, ``message``, ``mhz``)."""
        ...
