"""Rows as the wire shows them: plain dicts of JSON values (no ORM objects leave the head)."""

from __future__ import annotations

import json
from typing import Any

from gputui.scheduler.head.gpufacts import AnyGpu
from gputui.scheduler.store.jobrow import JOB_DEFAULTS
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


JOB_FIELDS = (
    "id", "user", "group", "name", "state", "reason", "gpus", "pool",
    "host_constraint", "host", "gpu_uuids", "priority", "preemptible", "time_limit_s",
    "submitted_at", "started_at", "ended_at", "exit_code", "exit_signal", "requeues",
    "run_as", "project", "after", "after_ok", "over_quota", "idle_since", "interactive",
    "array_id", "array_task", "array_throttle",
)  # fmt: skip
"""What a job's view shows, in order; ``gpu_uuids`` and ``after`` as lists."""


def job_view(job: Job, *, full: bool = False) -> dict[str, Any]:
    view: dict[str, Any] = {name: getattr(job, name) for name in JOB_FIELDS}
    view["gpu_uuids"] = json_list(job.gpu_uuids)
    view["after"] = json_list(job.after)
    if full:
        view["argv"] = json_list(job.argv)
        view["cwd"] = job.cwd
        view["log_path"] = job.log_path
        view["pid"] = job.pid
        view["launches"] = job.launches
        view["preempted_by"] = job.preempted_by
        view["preempted_at"] = job.preempted_at
        view["conda"] = job.conda
        view["venv"] = job.venv
        view["image"] = job.image
        view["runtime"] = job.runtime
        view["container_id"] = job.container_id
        view["script"] = job.script_id is not None
        view["output"] = job.output
        view["mig"] = job.mig
    return view


def job_row_view(row: dict[str, Any]) -> dict[str, Any]:
    """``job_view`` of a freshly inserted row (a dict of its columns, with its id)."""
    merged = {**JOB_DEFAULTS, **row}
    view = {name: merged[name] for name in JOB_FIELDS}
    view["gpu_uuids"] = json_list(merged["gpu_uuids"])
    view["after"] = json_list(merged["after"])
    return view


def claim_view(claim: Claim) -> dict[str, Any]:
    return {
        "id": claim.id,
        "user": claim.user,
        "state": claim.state,
        "reason": claim.reason,
        "gpus": claim.gpus,
        "pool": claim.pool,
        "model": claim.model,
        "mig": claim.mig,
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
    """A notice as sent: its English ``text`` and, where it was made from a template,
    the template and args (``msg``, ``args``: ``gputui.wire.words``)."""
    view: dict[str, Any] = {
        "id": row.id,
        "time": row.time,
        "kind": row.kind,
        "text": row.text,
        "job_id": row.job_id,
        "claim_id": row.claim_id,
    }
    if row.words:
        try:
            words = json.loads(row.words)
        except ValueError:
            words = None
        if isinstance(words, dict) and isinstance(words.get("msg"), str):
            view["msg"], view["args"] = words["msg"], words.get("args") or {}
    return view
