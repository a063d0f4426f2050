"""``LeasedHosts``: the head's ``HostOps`` that act on a host only while this head
leads (a head on PostgreSQL that shares its database with a standby: ``leader``).

A leader paused past its lease (SIGSTOP, a frozen VM) wakes with work already on
its loop: launches, signals and kills decided before it stopped. The fence stops
its writes, but these go to the hosts, not the database. So each action asks the
lease first (``Leadership.may_act``: the epoch still the fence's, the lease not run
out by this head's own clock, which it times from the start of its last renewal)
and is refused, with one log line, when the head may no longer act: answered
``not-leading``, never sent. Reading (a job's log, what holds a GPU) goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence

from gputui.scheduler.head.hostops import GpuProcess, HostAnswer, HostOps, TerminalLine
from gputui.scheduler.head.lifecycle import NOT_LEADING, HostJob, Launch
from gputui.telemetry import HostSnapshot
from gputui.wire.messages import Pty

log = logging.getLogger(__name__)


class LeasedHosts:
    """``hosts``, with every action refused while ``may_act`` says why not."""

    def __init__(self, hosts: HostOps, may_act: Callable[[], str | None]) -> None:
        self._hosts = hosts
        self._may_act = may_act
        self.refused = 0
        """Actions refused (not sent) since the start."""

    def _refuse(self, what: str) -> HostAnswer | None:
        why = self._may_act()
        if why is None:
            return None
        self.refused += 1
        log.warning("head: %s not sent: %s", what, why)
        return HostAnswer(False, code=NOT_LEADING, message=f"not sent: {why}")

    async def start(self) -> None:
        await self._hosts.start()

    async def close(self) -> None:
        await self._hosts.close()

    def updates(self) -> AsyncIterator[HostSnapshot]:
        return self._hosts.updates()

    def reports(self, snapshot: HostSnapshot) -> tuple[HostJob, ...] | None:
        return self._hosts.reports(snapshot)

    def login_user(self, host: str) -> str | None:
        return self._hosts.login_user(host)

    async def launch(self, spec: Launch) -> HostAnswer:
        refused = self._refuse(f"launch of job {spec.job_id} on {spec.host}")
        return refused or await self._hosts.launch(spec)

    async def signal_job(
        self, host: str, key: int, signal: str, grace_s: float | None
    ) -> HostAnswer:
        refused = self._refuse(f"SIG{signal} to run {key} on {host}")
        return refused or await self._hosts.signal_job(host, key, signal, grace_s)

    async def open_pty(
        self, host: str, key: int, rows: int, cols: int, listener: Callable[[Pty], None]
    ) -> tuple[HostAnswer, TerminalLine | None]:
        refused = self._refuse(f"a terminal on run {key} on {host}")
        if refused is not None:
            return refused, None
        return await self._hosts.open_pty(host, key, rows, cols, listener)

    async def signal_process(self, host: str, process: GpuProcess, signal: str) -> HostAnswer:
        refused = self._refuse(f"SIG{signal} to pid {process.pid} on {host}")
        return refused or await self._hosts.signal_process(host, process, signal)

    async def job_log(self, host: str, key: int, offset: int, max_bytes: int) -> HostAnswer:
        return await self._hosts.job_log(host, key, offset, max_bytes)

    async def forget(self, host: str, keys: Sequence[int]) -> HostAnswer:
        refused = self._refuse(f"forgetting {len(keys)} run(s) on {host}")
        return refused or await self._hosts.forget(host, keys)

    async def holders(self, host: str, index: int) -> HostAnswer:
        return await self._hosts.holders(host, index)

    async def reset_gpu(self, host: str, index: int, uuid: str) -> HostAnswer:
        refused = self._refuse(f"reset of GPU {index} on {host}")
        return refused or await self._hosts.reset_gpu(host, index, uuid)

    async def clocks(self, host: str, index: int, uuid: str, action: str) -> HostAnswer:
        refused = self._refuse(f"{action} of GPU {index}'s clocks on {host}")
        return refused or await self._hosts.clocks(host, index, uuid, action)
