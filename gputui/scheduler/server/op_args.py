"""The argument models of the ops that change something (``ops.MUTATING``): submit,
the job actions, claim and release, drain and force-free, acknowledging a health
problem, and ``notices`` (which marks what it reads as read); and ``signal`` (a
process on a GPU, through the head), which changes something but is not retried
under a request id: a lost answer says it may have been delivered.

What the head's decoder (``wire.ARGS``) checks a mutating request's ``args`` against;
the read-only ops' models are in ``read_args``, the types and limits they share in
``arg_types``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from gputui.scheduler.server.arg_types import (
    MAX_ARGV_BYTES,
    MAX_ENV_BYTES,
    MAX_GPUS_PER_JOB,
    MAX_IDS,
    ArgsModel,
    ClaimId,
    GpuCount,
    JobId,
    Name,
    PlainArgs,
    Seconds,
    Short,
    plain,
)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
RESERVED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUTUI_JOB_ID", "GPUTUI_SIM_GPU")


class SubmitArgs(PlainArgs):
    gpus: GpuCount = 1
    argv: Annotated[
        list[Annotated[str, StringConstraints(max_length=MAX_ARGV_BYTES)]],
        Field(min_length=1, max_length=4096),
    ]
    name: Name | None = None
    cwd: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    env: dict[str, Annotated[str, StringConstraints(max_length=MAX_ENV_BYTES)]] = Field(
        default_factory=dict, max_length=256
    )
    pool: Name | None = None
    host: Name | None = None
    time_limit_s: Seconds | None = None
    preemptible: bool = False
    priority: Name | None = None
    project: Name | None = None
    after: Annotated[list[JobId], Field(max_length=MAX_IDS)] = Field(default_factory=list)
    """Start only after these jobs ended (``--after``)."""
    after_ok: bool = False
    """... and only if every one of them completed (``--after-ok``); else cancelled."""

    @field_validator("argv")
    @classmethod
    def _argv(cls, argv: list[str]) -> list[str]:
        if sum(len(a) for a in argv) > MAX_ARGV_BYTES:
            raise ValueError(f"command line over {MAX_ARGV_BYTES // 1024} KiB")
        if not argv[0]:
            raise ValueError("the command is empty")
        for arg in argv:
            if "\x00" in arg:
                raise ValueError("command line contains a NUL byte")
        return argv

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, cwd: str | None) -> str | None:
        if cwd is not None and (not cwd.startswith("/") or "\x00" in cwd):
            raise ValueError("must be an absolute path")
        return cwd

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        size = 0
        for key, value in env.items():
            if not _ENV_NAME.fullmatch(key):
                raise ValueError(f"bad environment variable name {key[:40]!r}")
            if key in RESERVED_ENV:
                raise ValueError(f"{key} is set by the head")
            if "\x00" in value:
                raise ValueError(f"{key} contains a NUL byte")
            size += len(key) + len(value)
        if size > MAX_ENV_BYTES:
            raise ValueError(f"environment over {MAX_ENV_BYTES // 1024} KiB")
        return env


class JobArgs(PlainArgs):
    job_id: JobId
    reason: Short | None = None


class RequeueArgs(JobArgs):
    force: bool = False
    """Requeue a job that ended: its command runs again, as its owner."""


class ClaimArgs(PlainArgs):
    gpus: GpuCount | None = None
    """How many GPUs (any free ones); or name them in ``gpu_refs``."""
    gpu_refs: Annotated[list[Name], Field(max_length=MAX_GPUS_PER_JOB)] = Field(
        default_factory=list
    )
    """GPUs by uuid or ``host:index``."""
    pool: Name | None = None
    model: Name | None = None
    host: Name | None = None
    duration_s: Seconds | None = None
    note: Short = ""
    wait: bool = True
    """Queue the claim when it cannot be met now (else refuse it)."""
    session: bool = False
    """Release when this connection closes (``gputui run``)."""
    project: Name | None = None
    resume: ClaimId | None = None
    """With ``session``: bind this live ``gputui run`` claim of the caller's to this
    connection (its run reconnecting after the head restarted); nothing else is read."""


class ReleaseArgs(PlainArgs):
    claim_ids: Annotated[list[ClaimId], Field(max_length=MAX_IDS)] = Field(default_factory=list)
    gpu_refs: Annotated[list[Name], Field(max_length=MAX_GPUS_PER_JOB)] = Field(
        default_factory=list
    )
    all: bool = False
    reason: Short | None = None


Target = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class DrainArgs(PlainArgs):
    """``drain``, ``undrain`` and ``unfence``: a ``HOST`` or ``HOST:GPU`` (index or uuid)."""

    target: Target
    reason: Short | None = None
    """Required for drain and unfence (why, for the audit)."""

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        plain(value, "target")
        if value.count(":") > 1 or value.startswith(":") or any(c.isspace() for c in value):
            raise ValueError("give HOST or HOST:GPU (GPU: its index or uuid)")
        return value


class ForceFreeArgs(PlainArgs):
    """``force_free``: take GPU ``gpu`` (its index or uuid) of ``host`` back (admins)."""

    host: Name
    gpu: Annotated[str, StringConstraints(min_length=1, max_length=96)]
    reason: Short
    """Required: why, for the audit and the owners' notices."""
    reset: bool = False
    """Reset the GPU when its memory stays held with no process (``head.allow_gpu_reset``)."""

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str) -> str:
        plain(value, "gpu")
        if not (value.isdigit() or value.startswith(("GPU-", "MIG-"))) or " " in value:
            raise ValueError("give the GPU's index or its uuid (GPU-...)")
        return value

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("give a reason (why, for the audit and the owners)")
        return value


class NoticesArgs(ArgsModel):
    all: bool = False
    """The newest notices, read or not (default: the unread ones)."""
    limit: Annotated[int, Field(ge=1, le=1000, strict=True)] = 200


class HealthAckArgs(PlainArgs):
    """``health_ack``: an admin acknowledges problem ``key`` (``gputui health --json``)."""

    key: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    note: Short

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        return plain(value, "key")

    @field_validator("note")
    @classmethod
    def _note(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("give a note (why it may wait, for the audit)")
        return value


class SignalArgs(PlainArgs):
    """A process on a GPU, as the console saw it in a sample, and the signal."""

    host: Name
    gpu_uuid: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    pid: Annotated[int, Field(ge=1, le=2**22, strict=True)]
    start_ticks: Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)] | None = None
    signal: Literal["TERM", "KILL", "INT", "HUP", "STOP", "CONT"]
    reason: Short | None = None
    """Why (an admin's signal to another user's process: into its audit row)."""

    @field_validator("gpu_uuid")
    @classmethod
    def _plain_uuid(cls, value: str) -> str:
        return plain(value, "gpu_uuid")
