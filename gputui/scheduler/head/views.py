"""Rows as the wire shows them: plain dicts of JSON values (no ORM objects leave the head)."""

from __future__ import annotations

import json
from typing import Any

from gputui.scheduler.head.gpufacts import AnyGpu
from gputui.scheduler.store.jobrow import as_job
from gputui.scheduler.store.tables import Audit, Claim, Job, Notice


def json_list(text: str) -> list[Any]:
    """A JSON list column's value (an empty list for anything else)."""
    if text == "[]":  # most list columns' value (their default): no parse
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def job_view(job: Job, *, full: bool = False) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": job.id,
        "user": job.user,
        "group": job.group,
        "name": job.name,
        "state": job.state,
        "reason": job.reason,
        "gpus": job.gpus,
        "pool": job.pool,
        "host_constraint": job.host_constraint,
        "host": job.host,
        "gpu_uuids": json_list(job.gpu_uuids),
        "priority": job.priority,
        "preemptible": job.preemptible,
        "time_limit_s": job.time_limit_s,
        "submitted_at": job.submitted_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "exit_code": job.exit_code,
        "exit_signal": job.exit_signal,
        "requeues": job.requeues,
        "run_as": job.run_as,
        "project": job.project,
        "after": json_list(job.after),
        "after_ok": job.after_ok,
        "over_quota": job.over_quota,
        "idle_since": job.idle_since,
    }
    if full:
        view["argv"] = json_list(job.argv)
        view["cwd"] = job.cwd
        view["log_path"] = job.log_path
        view["pid"] = job.pid
        view["launches"] = job.launches
        view["preempted_by"] = job.preempted_by
        view["preempted_at"] = job.preempted_at
    return view


def job_row_view(row: dict[str, Any]) -> dict[str, Any]:
    """``job_view`` of a freshly inserted row (a dict of its columns)."""
    return job_view(as_job(row))


def claim_view(claim: Claim) -> dict[str, Any]:
    return {
        "id": claim.id,
        "user": claim.user,
        "state": claim.state,
        "reason": claim.reason,
        "gpus": claim.gpus,
        "pool": claim.pool,
        "model": claim.model,
        "host": claim.host,
        "gpu_uuids": json_list(claim.gpu_uuids),
        "note": claim.note,
        "created_at": claim.created_at,
        "granted_at": claim.granted_at,
        "expires_at": claim.expires_at,
        "idle_release_s": claim.idle_release_s,
        "last_active_at": claim.last_active_at,
        "released_at": claim.released_at,
        "release_reason": claim.release_reason,
        "session": claim.session is not None,
        "project": claim.project,
    }


def gpu_view(
    gpu: AnyGpu, holder: dict[str, Any] | None, *, host_drained: bool = False
) -> dict[str, Any]:
    """A GPU with its holder, its admin's drain and the head's fence, apart: ``state``
    is ``unhealthy`` (fenced), ``drained`` (it or its host, ``host_drained``) or ``ok``;
    ``state_reason`` the fence's or the drain's why."""
    drain = None
    if gpu.drained:
        drain = {"by": gpu.drained_by, "reason": gpu.drain_reason, "since": gpu.drained_at}
    fence = None
    if gpu.fenced:
        fence = {
            "code": gpu.fence_code,
            "reason": gpu.fence_reason,
            "since": gpu.fenced_at,
            "clears": gpu.fence_clears,
        }
    state = gpu.state if gpu.state != "ok" or not host_drained else "drained"
    why = gpu.fence_reason if fence else gpu.drain_reason if drain else None
    return {
        "uuid": gpu.uuid,
        "host": gpu.host,
        "index": gpu.index,
        "model": gpu.model,
        "pool": gpu.pool,
        "state": state,
        "state_reason": why if why is not None or state != "drained" else "its host is drained",
        "drain": drain,
        "host_drained": host_drained,
        "fence": fence,
        "holder": holder,
    }


def audit_view(row: Audit) -> dict[str, Any]:
    return {
        "id": row.id,
        "time": row.time,
        "uid": row.uid,
        "user": row.user,
        "action": row.action,
        "target": row.target,
        "owner": row.owner,
        "reason": row.reason,
        "outcome": row.outcome,
    }


def notice_view(row: Notice) -> dict[str, Any]:
    return {
        "id": row.id,
        "time": row.time,
        "kind": row.kind,
        "text": row.text,
        "job_id": row.job_id,
        "claim_id": row.claim_id,
    }
