"""A head over a real SQLite file and a real Unix socket, with scripted hosts.

The hosts are the one thing faked here (``ScriptedHosts``): GPUs that exist and
are live, launches that answer at once, runs that end when a test says so. The
end-to-end tests use real helpers instead; these test the daemon's own logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.hostops import GpuProcess, HostAnswer
from gputui.scheduler.head.lifecycle import HostJob, Launch
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.policy import model
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Event, GpuInfo, GpuSample, Hello, ProcessSample, Sample
from gputui.wire.mig import MigInfo, MigSample

FAST_TICK_S = 0.1
"""The head's timer (``HeadSettings.tick_s``; 1 s when installed) in the scheduler's own
tests (``headthread.ThreadedHead``, the end-to-end ``Cluster``): what waits for ticks
(idle claims, ownership flags, health, time limits) comes ten times sooner. The
console's tests keep the installed timer: a console is built for its pace."""


class SettableClock:
    """A head's clock for tests of time-based policy (weekly quotas, fair-share
    decay, the standing refresh, off hours): the wall clock moved by what the test
    set, so hours pass in a call. Handed to ``Head(clock=...)`` by the test kits;
    an installed head has no way to be given one (``gputui head`` always runs on
    the wall clock)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class ScriptedHosts:
    """Hosts with ``gpus`` GPUs each, always live; runs end when ``finish`` is called."""

    layout: dict[str, int]
    launches: list[Launch] = field(default_factory=list)
    signals: list[tuple[str, int, str]] = field(default_factory=list)
    runs: dict[str, dict[int, HostJob]] = field(default_factory=dict)
    processes: dict[str, dict[int, tuple[ProcessSample, ...]]] = field(default_factory=dict)
    """host -> GPU index -> the processes its samples list (``put_processes``)."""
    util: dict[str, dict[int, int]] = field(default_factory=dict)
    """host -> GPU index -> its utilisation (%) in the samples (none: not read)."""
    process_signals: list[tuple[str, GpuProcess, str]] = field(default_factory=list)
    signal_answer: HostAnswer = field(
        default_factory=lambda: HostAnswer(True, value={"method": "scripted"})
    )
    """What every ``signal_process`` answers."""
    power: dict[str, dict[int, float]] = field(default_factory=dict)
    """host -> GPU index -> its power draw (W) in the samples (none: not read)."""
    faults: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    """host -> GPU index -> fields its samples carry (``state="lost"``, ECC counts ...)."""
    events: dict[str, tuple[Event, ...]] = field(default_factory=dict)
    """host -> the events (Xids) its snapshots carry."""
    sample_time: dict[str, float] = field(default_factory=dict)
    """host -> the helper's clock in its samples (none: not sent; ``sample_at``)."""
    logs: dict[int, str] = field(default_factory=dict)
    """run key -> the output of that run (none: one line, "hello from the job")."""
    mig: dict[str, dict[int, tuple[str, ...]]] = field(default_factory=dict)
    """host -> GPU index -> the profiles of its MIG slices (MIG mode on; the slices'
    UUIDs from ``slice_uuid``)."""
    _queue: asyncio.Queue[HostSnapshot] | None = None
    _reports: dict[str, tuple[HostJob, ...]] = field(default_factory=dict)

    def uuid(self, host: str, index: int) -> str:
        return f"GPU-{host}-{index:04d}"

    def slice_uuid(self, host: str, index: int, nth: int) -> str:
        return f"MIG-{host}-{index:04d}-{nth}"

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        for host in self.layout:
            self.runs.setdefault(host, {})
            self._publish(host)

    async def close(self) -> None:
        return None

    def _publish(self, host: str) -> None:
        n = self.layout[host]
        slices = self.mig.get(host, {})
        gpus = tuple(
            GpuInfo(
                index=i,
                uuid=self.uuid(host, i),
                name="NVIDIA A100",
                mig_mode=True if i in slices else None,
                mig=tuple(
                    MigInfo(
                        index=j,
                        uuid=self.slice_uuid(host, i, j),
                        profile=profile,
                        parent_uuid=self.uuid(host, i),
                    )
                    for j, profile in enumerate(slices.get(i, ()))
                ),
            )
            for i in range(n)
        )
        hello = Hello(protocol=1, helper_version="x", hostname=host, gpus=gpus)
        procs, util = self.processes.get(host, {}), self.util.get(host, {})
        power = self.power.get(host, {})
        sample = Sample(
            seq=1,
            time=self.sample_time.get(host),
            gpus=tuple(
                GpuSample(
                    index=i,
                    uuid=self.uuid(host, i),
                    util_gpu=util.get(i),
                    power_w=power.get(i),
                    processes=procs.get(i, ()),
                    mig=tuple(
                        MigSample(index=j, uuid=self.slice_uuid(host, i, j))
                        for j in range(len(slices.get(i, ())))
                    ),
                    **self.faults.get(host, {}).get(i, {}),
                )
                for i in range(n)
            ),
        )
        self._reports[host] = tuple(self.runs[host].values())
        snap = HostSnapshot(
            name=host,
            address=host,
            status=HostStatus.LIVE,
            hello=hello,
            sample=sample,
            events=self.events.get(host, ()),
        )
        assert self._queue is not None
        self._queue.put_nowait(snap)

    async def updates(self) -> AsyncIterator[HostSnapshot]:
        assert self._queue is not None
        while True:
            yield await self._queue.get()

    def reports(self, snapshot: HostSnapshot) -> tuple[HostJob, ...] | None:
        return self._reports.get(snapshot.name)

    def login_user(self, host: str) -> str | None:
        return "root"

    async def launch(self, spec: Launch) -> HostAnswer:
        self.launches.append(spec)
        job = HostJob(key=spec.key, state="running", pid=1000 + spec.job_id, started_at=time.time())
        self.runs[spec.host][spec.key] = job
        self._publish(spec.host)
        return HostAnswer(True, value=job)

    def finish(
        self,
        host: str,
        key: int,
        exit_code: int | None = 0,
        signal: str | None = None,
        ended_at: float = 2.0,
    ) -> None:
        self.runs[host][key] = HostJob(
            key=key, state="exited", exit_code=exit_code, signal=signal, ended_at=ended_at
        )
        self._publish(host)

    async def signal_job(
        self, host: str, key: int, signal: str, grace_s: float | None
    ) -> HostAnswer:
        self.signals.append((host, key, signal))
        self.finish(host, key, None, signal)
        return HostAnswer(True, value={"delivered": True})

    def put_processes(
        self, host: str, index: int, processes: tuple[ProcessSample, ...], util: int | None = None
    ) -> None:
        """From the next sample on, GPU ``index`` of ``host`` lists ``processes``."""
        self.processes.setdefault(host, {})[index] = processes
        if util is not None:
            self.util.setdefault(host, {})[index] = util
        self._publish(host)

    def put_fault(self, host: str, index: int, **fields: Any) -> None:
        """From the next sample on, GPU ``index`` of ``host`` reads ``fields`` (none: healthy)."""
        self.faults.setdefault(host, {})[index] = fields
        self._publish(host)

    def put_xid(self, host: str, index: int, xid: int, at: float) -> None:
        """An Xid on GPU ``index`` of ``host`` at ``at``, in every snapshot from now on."""
        event = Event(
            time=at, kind="xid", gpu_uuid=self.uuid(host, index), gpu_index=index, xid=xid
        )
        self.events[host] = (*self.events.get(host, ()), event)
        self._publish(host)

    def sample_at(self, host: str, at: float) -> None:
        """A new sample taken at ``at`` by the host's clock (the head keeps readings of it)."""
        self.sample_time[host] = at
        self._publish(host)

    def sample_again(self, host: str) -> None:
        """A new sample with nothing changed (as the next one from a helper)."""
        self._publish(host)

    async def signal_process(self, host: str, process: GpuProcess, signal: str) -> HostAnswer:
        self.process_signals.append((host, process, signal))
        return self.signal_answer

    async def job_log(self, host: str, key: int, offset: int, max_bytes: int) -> HostAnswer:
        text = self.logs.get(key, "hello from the job\n")
        start = min(offset, len(text))  # as the helper answers an offset past the end
        data = text[start : start + max_bytes]
        value = {"data": data, "offset": start + len(data), "size": len(text), "ended": True}
        return HostAnswer(True, value=value)

    async def forget(self, host: str, keys: Sequence[int]) -> HostAnswer:
        return HostAnswer(True, value={"forgotten": list(keys)})

    async def holders(self, host: str, index: int) -> HostAnswer:
        value = {"device": f"/dev/nvidia{index}", "holders": [], "notes": []}
        return HostAnswer(True, value=value)

    async def reset_gpu(self, host: str, index: int, uuid: str) -> HostAnswer:
        return HostAnswer(True, value={"reset": True, "error": None, "message": ""})


@contextlib.asynccontextmanager
async def running_head(
    tmp: Path,
    layout: dict[str, int],
    clock: Callable[[], float] | None = None,
    scripted: ScriptedHosts | None = None,
    decide: model.Policy | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Head, ScriptedHosts, Path]]:
    """``clock``: the head's (default: the wall clock); ``scripted``: hosts set up
    before the head starts (their faults in its first samples); ``decide``: the
    scheduling pass (default ``passes.decide``; a test may wrap it to watch);
    ``settings``: more of ``HeadSettings``' fields."""
    engine = open_store(tmp / "db" / "gputui.db")
    hosts = scripted or ScriptedHosts(layout)
    sock = tmp / "head.sock"
    head = Head(
        SqlStore(engine),
        hosts,
        HeadSettings(socket=sock, **settings),
        host_pools=dict.fromkeys(layout, "a100"),
        **({} if clock is None else {"clock": clock}),
        **({} if decide is None else {"decide": decide}),
    )
    await head.start()
    try:
        yield head, hosts, sock
    finally:
        await head.close()
