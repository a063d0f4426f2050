"""The console in front of Slurm: Slurm's queue and holders on the same grid.

With a ``slurm:`` section in hosts.yaml the console's scheduler side is Slurm. Every
``slurm.refresh_s`` one ``SlurmBackend.snapshot`` (one ``squeue``, one ``sinfo``,
and one ``scontrol show job -d`` while a job runs: never one call per job) is joined
with the console's own telemetry into a state of the head's shape (``slurm_state``):

* each GPU with the Slurm job that holds it, found by (node, GPU index) from Slurm
  and (host, index) -> UUID from the host's helper; where Slurm gave no indexes for
  a job, every GPU of its node shows it, marked ``[node]`` (the allocation is per
  node);
* processes on GPUs whose owner has no Slurm job there: ROGUE (``no-allocation``)
  or STRAY (``outside-allocation``), the head's own rule
  (``gputui.scheduler.policy.ownership``); gputui signals nothing on Slurm;
* a drained node's GPUs as drained, with Slurm's reason.

``SlurmConsole`` is the ``HeadLink``'s backend and carrier for it: subscribe gives
the state now, pushes a new one each refresh; requests (cancel, hold, submit...) are
Slurm's commands, run as the console's user in a thread, so the UI never waits on
slurmctld.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any

from gputui.config.models import SlurmConfig
from gputui.scheduler.client.backend import Answer, AsyncBackend, Unsupported
from gputui.scheduler.client.slurm.backend import SlurmBackend, Snapshot
from gputui.scheduler.client.slurm.parse import node_names
from gputui.scheduler.client.slurm.runner import Runner
from gputui.scheduler.policy.ownership import GpuProc, Holding, ProcKey, offences
from gputui.telemetry import HostSnapshot, HostStatus

NODE_MARK = " [node]"
"""After a job's name on GPUs it holds per node (Slurm gave no GPU indexes)."""


def _drained(state: str) -> bool:
    return "drain" in state.lower()


def slurm_state(
    snap: Snapshot,
    hosts: Mapping[str, HostSnapshot],
    conf: SlurmConfig,
    *,
    me: Mapping[str, Any],
    exempt_users: Collection[str] = (),
    first_seen: dict[ProcKey, float] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Slurm's view joined with the hosts' GPUs, as the head's pushed ``state``.
    ``first_seen`` keeps when each flagged process was first seen (across calls)."""
    now = time.time() if now is None else now
    seen = first_seen if first_seen is not None else {}
    drained: dict[str, str] = {}
    for record in snap.nodes:
        if _drained(record["state"]):
            drained[conf.host_of(record["name"])] = record["reason"] or record["state"]
    holders: dict[tuple[str, int], dict[str, Any]] = {}
    whole: dict[str, list[dict[str, Any]]] = {}
    jobs_by_id = {int(j["id"]): j for j in snap.jobs}
    for job in snap.jobs:
        if job["state"] != "RUNNING" or not job["gpus"]:
            continue
        held: dict[str, Any] = {
            "kind": "job",
            "id": job["id"],
            "user": job["user"],
            "since": job["started_at"],
            "name": job["name"],
        }
        per_node = snap.indexes.get(int(job["id"]))
        if per_node:
            for node, indexes in per_node.items():
                for index in indexes:
                    holders[(conf.host_of(node), index)] = held
        else:
            for node in node_names(job.get("host") or ""):
                whole.setdefault(conf.host_of(node), []).append(
                    {**held, "name": f"{job['name']}{NODE_MARK}"}
                )
    gpus: list[dict[str, Any]] = []
    holdings: list[Holding] = []
    procs: list[GpuProc] = []
    live: dict[str, dict[str, bool]] = {}
    for name, host in hosts.items():
        live[name] = {"live": host.status is HostStatus.LIVE}
        sample = host.sample
        if sample is None:
            continue
        for gpu in sample.gpus:
            holder = holders.get((name, gpu.index))
            on_node = whole.get(name, [])
            if holder is None and on_node:
                holder = on_node[0]
            for h in ([holder] if holder is not None else []) + on_node:
                owner = jobs_by_id.get(int(h["id"]))
                if owner is not None:
                    holdings.append(
                        Holding(gpu.uuid, name, "job", int(h["id"]), -1, frozenset({owner["user"]}))
                    )
            state = "drained" if name in drained else ("job" if holder is not None else "free")
            gpus.append(
                {
                    "uuid": gpu.uuid,
                    "host": name,
                    "index": gpu.index,
                    "pool": host.pool,
                    "state": state,
                    "state_reason": drained.get(name, ""),
                    "holder": holder,
                }
            )
            for p in gpu.processes:
                procs.append(
                    GpuProc(
                        host=name,
                        gpu_uuid=gpu.uuid,
                        gpu_index=gpu.index,
                        pid=p.pid,
                        uid=p.uid,
                        user=p.user,
                        name=p.command.split(" ", 1)[0].rsplit("/", 1)[-1][:64],
                        start_ticks=p.start_ticks,
                        graphics=p.kind == "graphics",
                    )
                )
    flags = []
    now_seen: dict[ProcKey, float] = {}
    for offence in offences(holdings, procs, exempt_users):
        proc = offence.proc
        since = now_seen[proc.key] = seen.get(proc.key, now)
        flags.append(
            {
                "host": proc.host,
                "gpu_uuid": proc.gpu_uuid,
                "gpu_index": proc.gpu_index,
                "pid": proc.pid,
                "uid": proc.uid,
                "user": proc.user,
                "name": proc.name,
                "kind": offence.kind,
                "since": since,
            }
        )
    seen.clear()
    seen.update(now_seen)
    return {"me": dict(me), "jobs": snap.jobs, "claims": [], "gpus": gpus, "hosts": live,
            "flags": flags}  # fmt: skip


class SlurmConsole:
    """The console's scheduler for a ``slurm:`` section: an ``AsyncBackend`` (Slurm's
    commands in a thread) that subscribes by polling, and the carrier the link closes."""

    def __init__(
        self,
        backend: SlurmBackend,
        conf: SlurmConfig,
        hosts: Callable[[], Mapping[str, HostSnapshot]],
        *,
        exempt_users: Collection[str] = (),
    ) -> None:
        self.backend = backend
        self.conf = conf
        self.hosts = hosts
        self.exempt_users = tuple(exempt_users)
        self.closed_reason: str | None = None
        self.seq = 0
        self.calls = 0
        """Snapshots asked of Slurm so far (each one squeue, one sinfo, at most one scontrol)."""
        self._first_seen: dict[ProcKey, float] = {}
        self._closed = asyncio.Event()
        uid = os.getuid()
        self._me = {"uid": uid, "user": getpass.getuser(), "admin": uid == 0}

    # -- the backend's identity ------------------------------------------------------

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def local(self) -> bool:
        return self.backend.local

    def supports(self, capability: str) -> bool:
        return capability == "subscribe" or self.backend.supports(capability)

    def __getattr__(self, capability: str) -> Any:
        """Every request: Slurm's command, in a thread (Unsupported said at once)."""
        if capability.startswith("_"):
            raise AttributeError(capability)
        backend = self.backend

        async def call(*args: Any, **kwargs: Any) -> Answer:
            if not backend.supports(capability):
                raise Unsupported(backend.name, capability)
            kwargs.pop("timeout", None)
            answer: Answer = await asyncio.to_thread(getattr(backend, capability), *args, **kwargs)
            return answer

        return call

    # -- the state, polled ------------------------------------------------------------

    async def _state(self) -> dict[str, Any]:
        snap = await asyncio.to_thread(self.backend.snapshot)
        self.calls += 1
        self.seq += 1
        return slurm_state(
            snap,
            self.hosts(),
            self.conf,
            me=self._me,
            exempt_users=self.exempt_users,
            first_seen=self._first_seen,
        )

    async def subscribe(self, *, timeout: float | None = None) -> Answer:
        state = await self._state()
        return {"state": state, "seq": self.seq, "notices": []}

    async def pushes(self) -> AsyncIterator[Answer]:
        while not self._closed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), self.conf.refresh_s)
            if self._closed.is_set():
                return
            state = await self._state()
            yield {"push": "state", "state": state, "seq": self.seq}

    async def close(self) -> None:
        self.closed_reason = self.closed_reason or "closed"
        self._closed.set()

    @classmethod
    def of(
        cls, conf: SlurmConfig, hosts: Callable[[], Mapping[str, HostSnapshot]], **kw: Any
    ) -> SlurmConsole:
        runner = Runner(conf.login, timeout_s=conf.command_timeout_s)
        backend = SlurmBackend(runner, partitions=conf.partitions, qos=conf.qos, nodes=conf.nodes)
        return cls(backend, conf, hosts, **kw)

    def as_backend(self) -> AsyncBackend:
        """This, typed as the console's backend: every method is one of Slurm's
        commands or ``Unsupported`` (``__getattr__``)."""
        from typing import cast

        return cast(AsyncBackend, self)
