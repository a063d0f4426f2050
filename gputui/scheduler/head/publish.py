"""What a subscription is pushed: the queue, the claims and who holds each GPU.

The state is the same for every subscriber but for ``me``, so a push builds it once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gputui.scheduler.head.gpufacts import AnyGpu
from gputui.scheduler.head.views import claim_view, gpu_view, job_view, json_list
from gputui.scheduler.server import wire
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.api import Tx
from gputui.scheduler.store.tables import Host

RECENT_JOBS = 50
"""Finished jobs pushed along with the live ones (the newest)."""


def whoami(caller: Caller) -> dict[str, Any]:
    return {
        "uid": caller.uid,
        "user": caller.user,
        "group": caller.group,
        "groups": sorted(caller.groups),
        "admin": caller.admin,
    }


def cluster_state(tx: Tx, gpus: Sequence[AnyGpu], live: Mapping[str, bool]) -> dict[str, Any]:
    """Jobs (live, waiting and the recent finished), claims, GPUs with their holders,
    drains and fences, hosts with whether they answer and their drain."""
    jobs = tx.jobs(wire.PENDING_JOB_STATES | wire.LIVE_JOB_STATES)
    recent = tx.jobs(wire.FINAL_JOB_STATES, limit=RECENT_JOBS)
    claims = tx.claims(("waiting", "active"))
    holders: dict[str, dict[str, Any]] = {}
    for job in jobs:
        if job.state in wire.LIVE_JOB_STATES:
            since = job.started_at or job.submitted_at
            for uuid in json_list(job.gpu_uuids):
                holders[uuid] = {
                    "kind": "job", "id": job.id, "user": job.user, "since": since,
                    "name": job.name,
                }  # fmt: skip
    for item in claims:
        if item.state == "active":
            for uuid in json_list(item.gpu_uuids):
                holders[uuid] = {
                    "kind": "claim", "id": item.id, "user": item.user,
                    "since": item.granted_at, "name": item.note,
                }  # fmt: skip
    drained = {h.name: h for h in tx.hosts() if h.drained}
    return {
        "jobs": [job_view(j) for j in (*jobs, *recent)],
        "claims": [claim_view(c) for c in claims],
        "gpus": [gpu_view(g, holders.get(g.uuid), host_drained=g.host in drained) for g in gpus],
        "hosts": {
            name: {"live": up, "drain": host_drain(drained.get(name))} for name, up in live.items()
        },
    }


def note_owners(tx: Tx) -> dict[int, int]:
    """The owner's uid of each waiting or active claim with a note (``private_data``)."""
    return {c.id: c.uid for c in tx.claims(("waiting", "active")) if c.note and c.id is not None}


def host_drain(host: Host | None) -> dict[str, Any] | None:
    """An admin's drain of a whole host: who, why, since when (None: not drained)."""
    if host is None or not host.drained:
        return None
    return {"by": host.drained_by, "reason": host.drain_reason, "since": host.drained_at}
