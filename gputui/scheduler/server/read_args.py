"""The argument models of the ops that only read (every op not in ``ops.MUTATING``):
show, explain, the lists, logs, audit, wait, incident, health, gpus, usage, report
and history; ``Empty`` (``arg_types``) for the ops that take none.

What the head's decoder (``wire.ARGS``) checks a read request's ``args`` against;
the mutating ops' models are in ``op_args``, the types and limits they share in
``arg_types``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from gputui.scheduler.client.ops import MAX_VIEWED_HOSTS
from gputui.scheduler.server.arg_types import (
    MAX_IDS,
    ArgsModel,
    Epoch,
    JobId,
    Name,
    PlainArgs,
    plain,
)
from gputui.wire.fields import GpuIndex


class ShowArgs(ArgsModel):
    job_id: JobId


class ExplainArgs(ArgsModel):
    job_id: JobId


MAX_ESTIMATES = 300
"""The most requests in line one ``estimates`` answer projects (``explain``'s
``MAX_AHEAD``: past that the projection is noise)."""


class EstimatesArgs(ArgsModel):
    """The estimated start of the first ``limit`` requests in line."""

    limit: Annotated[int, Field(ge=1, le=MAX_ESTIMATES, strict=True)] = 100


class ListArgs(PlainArgs):
    all: bool = False
    """Finished jobs and released claims too."""
    user: Name | None = None
    limit: Annotated[int, Field(ge=1, le=100_000, strict=True)] = 10_000
    """A page: at most this many, oldest first."""
    after: Annotated[int, Field(ge=0, le=2**53, strict=True)] = 0
    """Only those whose id is above this (the ``next`` of the page before)."""


class BookingsArgs(PlainArgs):
    all: bool = False
    """Ended and cancelled bookings too (else those not yet over)."""
    since: Epoch | None = None
    """Only those ending after this (the week view's first day)."""
    until: Epoch | None = None
    """Only those starting before this."""


class EnvArgs(PlainArgs):
    host: Name | None = None


class LogArgs(ArgsModel):
    job_id: JobId
    offset: Annotated[int, Field(ge=0, le=2**53, strict=True)] = 0
    max_bytes: Annotated[int, Field(ge=1, le=65536, strict=True)] = 65536


TermSize = Annotated[int, Field(ge=1, le=10000, strict=True)]


class AttachArgs(ArgsModel):
    """Attach this connection to an interactive job's terminal (``gputui attach``)."""

    job_id: JobId
    rows: TermSize = 24
    cols: TermSize = 80


class PtyInArgs(ArgsModel):
    """Keystrokes (base64), the terminal's new size, or output shown up to ``ack``."""

    data: Annotated[str, Field(max_length=65536, pattern=r"^[A-Za-z0-9+/=]*$")] | None = None
    rows: TermSize | None = None
    cols: TermSize | None = None
    ack: Annotated[int, Field(ge=0, le=2**62, strict=True)] | None = None

    @model_validator(mode="after")
    def _both(self) -> PtyInArgs:
        if (self.rows is None) != (self.cols is None):
            raise ValueError("give rows and cols together")
        return self


class AuditArgs(ArgsModel):
    since: Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False)] | None = None
    limit: Annotated[int, Field(ge=1, le=100_000, strict=True)] = 1000


class WaitArgs(ArgsModel):
    job_id: JobId


class IncidentArgs(ArgsModel):
    """``incident``: what the head kept of ``host`` (one GPU of it, or all) since ``since``."""

    host: Name
    gpu: Annotated[int, Field(ge=0, le=63, strict=True)] | None = None
    since: Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False)] = 0.0


class HealthArgs(ArgsModel):
    """``health``: the head's board (anyone may read), of ``hosts`` only when given."""

    hosts: Annotated[list[Name], Field(max_length=MAX_IDS)] = Field(default_factory=list)

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [plain(v, "host") for v in value]


class GpusArgs(ArgsModel):
    """``gpus``: every GPU with its state, holder and use (anyone may read)."""

    pool: Name | None = None
    """Only this pool's GPUs."""
    free: bool = False
    """Only the free ones: unclaimed and idle."""

    @field_validator("pool")
    @classmethod
    def _pool(cls, value: str | None) -> str | None:
        return None if value is None else plain(value, "pool")


MAX_USAGE_DAYS = 366
"""The longest range one ``usage`` or ``report`` request sums up."""


class UsageArgs(ArgsModel):
    """GPU-hours, busy hours, energy and cost by day and key (anyone may ask)."""

    since: Epoch | None = None
    """Default: seven days before ``until``."""
    until: Epoch | None = None
    """Default: now."""
    by: Literal["user", "group", "project", "pool"] = "user"
    hourly: bool = False
    """Also the cluster's hours (GPU-hours present, allocated, busy)."""


class SlurmEnergyArgs(ArgsModel):
    """``slurm_energy``: what a head that relays Slurm metered of Slurm's jobs (anyone
    may ask, as ``usage``; the head relays only where Slurm shows every user's jobs)."""

    since: Epoch | None = None
    until: Epoch | None = None


class ReportArgs(ArgsModel):
    """The summary ``gputui report`` prints (totals, top users and groups, idle share,
    the idlest hours of the day, groups over quota)."""

    since: Epoch | None = None
    until: Epoch | None = None
    top: Annotated[int, Field(ge=1, le=100, strict=True)] = 5


MAX_HISTORY = 10_000
"""Finished jobs one ``history`` answer lists at most."""


HistoryState = Literal["completed", "failed", "timeout", "killed", "cancelled"]


class HistoryArgs(PlainArgs):
    """Finished jobs that ended in ``[since, until)``, newest first, with each one's
    GPU-hours, busy time and energy (``gputui history``, Slurm's ``sacct``)."""

    user: Name | None = None
    """Whose (default: the caller's own); another's needs an admin when the head's
    ``private_data`` is on."""
    all_users: bool = False
    """Everyone's (the same rule as naming another)."""
    states: Annotated[list[HistoryState], Field(max_length=5)] = Field(default_factory=list)
    """Only these end states (default: every one)."""
    since: Epoch | None = None
    """Default: seven days before ``until``."""
    until: Epoch | None = None
    """Default: now."""
    limit: Annotated[int, Field(ge=1, le=MAX_HISTORY, strict=True)] = 100

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        return None if value is None else plain(value, "user")


class ViewedGpu(ArgsModel):
    host: Name
    index: GpuIndex


class TelemetryArgs(ArgsModel):
    """``telemetry``: subscribe to the head's samples of every host, as deltas."""

    detail: Annotated[list[Name], Field(max_length=MAX_VIEWED_HOSTS)] | None = None
    """The hosts this console shows in full (processes, health readings); the others
    come as summaries (``deltas.summary_view``). None: every host in full."""
    gpu: ViewedGpu | None = None
    """The selected GPU (with ``detail``); its host is shown in full too, besides the
    ``MAX_VIEWED_HOSTS``."""


class TelemetryViewArgs(ArgsModel):
    """``telemetry_view``: what this console now shows (after ``telemetry``): those
    hosts in full from the next push, the rest as summaries."""

    hosts: Annotated[list[Name], Field(max_length=MAX_VIEWED_HOSTS)]
    gpu: ViewedGpu | None = None
    """The selected GPU; its host is shown in full too, besides the ``MAX_VIEWED_HOSTS``."""
