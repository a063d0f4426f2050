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
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any

from gputui.common.i18n import _
from gputui.common.tasks import within
from gputui.config.models import Config
from gputui.config.slurm import SlurmConfig
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.backend import Answer, AsyncBackend, Unsupported
from gputui.scheduler.client.channel import HeadChannel
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.reach import open_head
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
            held_by = on_node if holder is None or holder in on_node else [holder, *on_node]
            for h in held_by:
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
    known = set(hosts)
    unmapped = sorted(
        {r["name"] for r in snap.nodes if conf.host_of(r["name"]) not in known and r["name"]}
    )
    return {"me": dict(me), "jobs": snap.jobs, "claims": [], "gpus": gpus, "hosts": live,
            "flags": flags, "unmapped": unmapped}  # fmt: skip


def _job_ok(job: Any) -> bool:
    """A relayed job view with what ``slurm_state`` reads, of the right types."""
    if not isinstance(job, dict):
        return False
    number, gpus = job.get("id"), job.get("gpus")
    return (
        isinstance(number, int) and not isinstance(number, bool) and 0 < number < 2**32
        and isinstance(gpus, int) and not isinstance(gpus, bool) and 0 <= gpus < 2**20
        and all(isinstance(job.get(k), str) for k in ("state", "user", "name"))
        and (job.get("host") is None or isinstance(job.get("host"), str))
        and (job.get("started_at") is None or isinstance(job.get("started_at"), (int, float)))
    )  # fmt: skip


def relayed(answer: Mapping[str, Any]) -> Snapshot:
    """The head's ``slurm`` answer as a ``Snapshot``, its shape checked (a bad one:
    ``ValueError``; every string in it is cleaned again where it is shown)."""
    jobs, indexes, nodes = answer["jobs"], answer["indexes"], answer["nodes"]
    if not (isinstance(jobs, list) and isinstance(indexes, dict) and isinstance(nodes, list)):
        raise ValueError(_("not a snapshot of Slurm"))
    checked: dict[int, dict[str, list[int]]] = {}
    for key, per_node in list(indexes.items())[:100_000]:
        if not (isinstance(key, str) and key.isdigit() and isinstance(per_node, dict)):
            raise ValueError(_("bad GPU indexes"))
        checked[int(key)] = {
            str(node): [i for i in idx if isinstance(i, int) and 0 <= i < 4096][:4096]
            for node, idx in list(per_node.items())[:4096]
            if isinstance(idx, list)
        }
    good_jobs = [j for j in jobs[:1_000_000] if _job_ok(j)]
    good_nodes = [
        {k: str(n.get(k, "")) for k in ("name", "state", "gres", "partition", "reason")}
        for n in nodes[:100_000]
        if isinstance(n, dict)
    ]
    return Snapshot(good_jobs, checked, good_nodes)


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
        relay: Callable[[], Awaitable[Answer]] | None = None,
    ) -> None:
        """``relay``: asks the head for Slurm's state (one poll of slurmctld for every
        console); None, or while it fails: this console asks Slurm itself."""
        self.relay = relay
        self.relay_problem: str | None = None
        """Why the last refresh could not come from the head (None: it did)."""
        self.backend = backend
        self.conf = conf
        self.hosts = hosts
        self.exempt_users = tuple(exempt_users)
        self.closed_reason: str | None = None
        self.seq = 0
        self.calls = 0
        """Snapshots asked of Slurm so far (each one squeue, one sinfo, at most one scontrol)."""
        self._first_seen: dict[ProcKey, float] = {}
        self._unmapped: tuple[str, ...] = ()
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

    async def _snapshot(self) -> Snapshot:
        if self.relay is not None:
            try:
                answer = await self.relay()
                snap = relayed(answer)
            except HeadError as exc:
                self.relay_problem = exc.message
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self.relay_problem = _("the head's answer: {problem}").format(problem=exc)
            else:
                self.relay_problem = None
                return snap
        self.calls += 1
        return await asyncio.to_thread(self.backend.snapshot)

    async def _state(self) -> dict[str, Any]:
        snap = await self._snapshot()
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
        if self.relay is None:  # the version is the login node's: asked once, here
            await asyncio.to_thread(self.backend.runner.version)
        state = await self._state()
        return {"state": state, "seq": self.seq, "notices": self._news(state)}

    async def pushes(self) -> AsyncIterator[Answer]:
        while not self._closed.is_set():
            with contextlib.suppress(TimeoutError):
                await within(self._closed.wait(), self.conf.refresh_s)
            if self._closed.is_set():
                return
            state = await self._state()
            for notice in self._news(state):
                yield {"push": "notice", "notice": notice}
            yield {"push": "state", "state": state, "seq": self.seq}

    def _news(self, state: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A notice when the Slurm nodes that no host of hosts.yaml is change (they are
        scheduled on but not monitored: no grid rows, no ownership check)."""
        unmapped = tuple(state.get("unmapped", ()))
        if unmapped == self._unmapped:
            return []
        self._unmapped = unmapped
        if not unmapped:
            return []
        shown = ", ".join(unmapped[:20])
        if len(unmapped) > 20:
            shown = _("{nodes} and {n} more").format(nodes=shown, n=len(unmapped) - 20)
        text = _(
            "Slurm nodes that are no host of hosts.yaml (not monitored): {nodes}"
            " (map them with slurm.nodes, or add the hosts)"
        ).format(nodes=shown)
        return [{"kind": "slurm", "text": text}]

    async def close(self) -> None:
        self.closed_reason = self.closed_reason or _("closed")
        self._closed.set()

    @classmethod
    def of(
        cls, conf: SlurmConfig, hosts: Callable[[], Mapping[str, HostSnapshot]], **kw: Any
    ) -> SlurmConsole:
        runner = Runner(conf.login, timeout_s=conf.command_timeout_s, ssh_config=conf.ssh_config)
        backend = SlurmBackend(runner, partitions=conf.partitions, qos=conf.qos, nodes=conf.nodes)
        return cls(backend, conf, hosts, **kw)

    def as_backend(self) -> AsyncBackend:
        """This, typed as the console's backend: every method is one of Slurm's
        commands or ``Unsupported`` (``__getattr__``)."""
        from typing import cast

        return cast(AsyncBackend, self)


class HeadRelay:
    """Asks the head for Slurm's state (its ``slurm`` request): over the console's
    connection to the head while it has one (``channel``, its telemetry's), else
    over one of its own kept between refreshes (``reach.open_head``: the local
    socket, or SSH to ``head.host``), opened again after a failure, at the next
    refresh."""

    def __init__(self, config: Config, channel: HeadChannel[AsyncHeadClient] | None = None) -> None:
        self.config = config
        assert config.head is not None
        self._channel = channel
        self._client: AsyncHeadClient | None = None

    async def ask(self) -> Answer:
        shared = self._channel.conn if self._channel is not None else None
        if shared is not None and shared.closed_reason is None:
            await self.close()  # the console's connection is back: its own is not needed
            return await shared.call("slurm", {}, timeout=15.0)
        if self._client is None or self._client.closed_reason is not None:
            await self.close()
            self._client = await open_head(self.config)
        try:
            return await self._client.call("slurm", {}, timeout=15.0)
        except HeadError as exc:
            if exc.code in ("unreachable", "timeout", "protocol"):
                await self.close()
            raise

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
