"""The head's socket protocol: JSON lines, one request or response per line.

A request is ``{"id": N, "op": OP, "rid": RID, "args": {...}}``. ``id`` pairs the
response with its request on this connection; ``rid`` (client request id) is
required on every mutating op and makes a retry after a dropped connection apply
once. The answer is ``{"id": N, "ok": true, "result": {...}}`` or ``{"id": N,
"ok": false, "error": {"code": C, "message": M}}``. After ``subscribe`` the head
also pushes ``{"push": "state", "seq": S, "state": {...}}`` whenever the queue,
claims or GPUs change, and ``{"push": "notice", "notice": {...}}``.

Everything a client sends is untrusted: the argument models forbid unknown keys,
range-check every number and cap every size. Identity is never part of a request;
the head takes it from the socket (SO_PEERCRED).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from gputui.scheduler.client import ops
from gputui.scheduler.policy import rows

MUTATING = ops.MUTATING
"""The ops that change something (``ops.MUTATING``: one set for client and head)."""

MAX_REQUEST_BYTES = 1 << 20
"""A request line longer than this is refused without being parsed."""
MAX_ARGV_BYTES = 256 * 1024
MAX_ENV_BYTES = 64 * 1024
MAX_GPUS_PER_JOB = 64
MAX_TIME_S = 366 * 86400.0
MAX_IDS = 256

Name = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Short = Annotated[str, StringConstraints(max_length=512)]
RequestId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
JobId = Annotated[int, Field(ge=1, le=2**53, strict=True)]
ClaimId = Annotated[int, Field(ge=1, le=2**53, strict=True)]
Seconds = Annotated[float, Field(gt=0, le=MAX_TIME_S, allow_inf_nan=False)]
GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS_PER_JOB, strict=True)]

# Lone surrogates too: valid in JSON ("\\ud800"), but no UTF-8 can store or print them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
RESERVED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUTUI_JOB_ID", "GPUTUI_SIM_GPU")


class Refusal(Exception):
    """A request the head will not carry out: ``code`` for programs, a line for people."""

    def __init__(self, code: str, message: str, request_id: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id
        """The refused request's id, once it could be read (its answer carries it)."""


def plain(value: str, what: str) -> str:
    """``value`` when it has no control, bidi or zero-width characters (else a Refusal)."""
    found = _CONTROL.search(value)
    if found:
        raise ValueError(f"{what} contains control character U+{ord(found.group()):04X}")
    return value


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Plain(_Args):
    @field_validator(
        "name", "pool", "host", "note", "reason", "model", "project", check_fields=False
    )
    @classmethod
    def _plain(cls, value: str | None) -> str | None:
        return None if value is None else plain(value, "text")


class Empty(_Args):
    pass


class SubmitArgs(_Plain):
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


class JobArgs(_Plain):
    job_id: JobId
    reason: Short | None = None


class RequeueArgs(JobArgs):
    force: bool = False
    """Requeue a job that ended: its command runs again, as its owner."""


class ShowArgs(_Args):
    job_id: JobId


class ExplainArgs(_Args):
    job_id: JobId


class ClaimArgs(_Plain):
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


class ReleaseArgs(_Plain):
    claim_ids: Annotated[list[ClaimId], Field(max_length=MAX_IDS)] = Field(default_factory=list)
    gpu_refs: Annotated[list[Name], Field(max_length=MAX_GPUS_PER_JOB)] = Field(
        default_factory=list
    )
    all: bool = False
    reason: Short | None = None


Target = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class DrainArgs(_Plain):
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


class ForceFreeArgs(_Plain):
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


class ListArgs(_Plain):
    all: bool = False
    """Finished jobs and released claims too."""
    user: Name | None = None
    limit: Annotated[int, Field(ge=1, le=100_000, strict=True)] = 10_000
    """A page: at most this many, oldest first."""
    after: Annotated[int, Field(ge=0, le=2**53, strict=True)] = 0
    """Only those whose id is above this (the ``next`` of the page before)."""


class EnvArgs(_Plain):
    host: Name | None = None


class NoticesArgs(_Args):
    all: bool = False
    """The newest notices, read or not (default: the unread ones)."""
    limit: Annotated[int, Field(ge=1, le=1000, strict=True)] = 200


class LogArgs(_Args):
    job_id: JobId
    offset: Annotated[int, Field(ge=0, le=2**53, strict=True)] = 0
    max_bytes: Annotated[int, Field(ge=1, le=65536, strict=True)] = 65536


class AuditArgs(_Args):
    since: Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False)] | None = None
    limit: Annotated[int, Field(ge=1, le=100_000, strict=True)] = 1000


class WaitArgs(_Args):
    job_id: JobId


class IncidentArgs(_Args):
    """``incident``: what the head kept of ``host`` (one GPU of it, or all) since ``since``."""

    host: Name
    gpu: Annotated[int, Field(ge=0, le=63, strict=True)] | None = None
    since: Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False)] = 0.0


class HealthArgs(_Args):
    """``health``: the head's board (anyone may read), of ``hosts`` only when given."""

    hosts: Annotated[list[Name], Field(max_length=MAX_IDS)] = Field(default_factory=list)

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        return [plain(v, "host") for v in value]


class HealthAckArgs(_Plain):
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


class GpusArgs(_Args):
    """``gpus``: every GPU with its state, holder and use (anyone may read)."""

    pool: Name | None = None
    """Only this pool's GPUs."""
    free: bool = False
    """Only the free ones: unclaimed and idle."""

    @field_validator("pool")
    @classmethod
    def _pool(cls, value: str | None) -> str | None:
        return None if value is None else plain(value, "pool")


Epoch = Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False)]
MAX_USAGE_DAYS = 366
"""The longest range one ``usage`` or ``report`` request sums up."""


class UsageArgs(_Args):
    """GPU-hours, busy hours, energy and cost by day and key (anyone may ask)."""

    since: Epoch | None = None
    """Default: seven days before ``until``."""
    until: Epoch | None = None
    """Default: now."""
    by: Literal["user", "group", "project", "pool"] = "user"
    hourly: bool = False
    """Also the cluster's hours (GPU-hours present, allocated, busy)."""


class ReportArgs(_Args):
    """The summary ``gputui report`` prints (totals, top users and groups, idle share,
    the idlest hours of the day, groups over quota)."""

    since: Epoch | None = None
    until: Epoch | None = None
    top: Annotated[int, Field(ge=1, le=100, strict=True)] = 5


MAX_HISTORY = 10_000
"""Finished jobs one ``history`` answer lists at most."""
HistoryState = Literal["completed", "failed", "timeout", "killed", "cancelled"]


class HistoryArgs(_Plain):
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


ARGS: dict[str, type[_Args]] = {
    "whoami": Empty,
    "submit": SubmitArgs,
    "cancel": JobArgs,
    "kill": JobArgs,
    "preempt": JobArgs,
    "requeue": RequeueArgs,
    "hold": JobArgs,
    "release_hold": JobArgs,
    "show": ShowArgs,
    "queue": ListArgs,
    "claim": ClaimArgs,
    "release": ReleaseArgs,
    "claims": ListArgs,
    "env": EnvArgs,
    "logs": LogArgs,
    "audit": AuditArgs,
    "incident": IncidentArgs,
    "wait": WaitArgs,
    "usage": UsageArgs,
    "report": ReportArgs,
    "history": HistoryArgs,
    "subscribe": Empty,
    "cluster": Empty,
    "explain": ExplainArgs,
    "quota": Empty,
    "ping": Empty,
    "hosts": Empty,
    "notices": NoticesArgs,
    "drain": DrainArgs,
    "undrain": DrainArgs,
    "unfence": DrainArgs,
    "force_free": ForceFreeArgs,
    "health": HealthArgs,
    "health_ack": HealthAckArgs,
    "gpus": GpusArgs,
}


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request line (``args`` validated against its op's model)."""

    id: int
    op: str
    rid: str | None
    args: Any


def decode_request(line: bytes) -> Request:
    """A request line -> ``Request``, or a ``Refusal`` naming what is wrong with it."""
    if len(line) > MAX_REQUEST_BYTES:
        raise Refusal("too-large", f"request over {MAX_REQUEST_BYTES // 1024} KiB refused")
    try:
        data = orjson.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refusal("malformed", f"request is not JSON ({str(exc)[:80]})") from None
    except RecursionError:  # "[[[[…" a hundred thousand deep
        raise Refusal("malformed", "request is nested too deeply") from None
    if not isinstance(data, dict):
        raise Refusal("malformed", "request must be a JSON object")
    rid_raw = data.get("id")
    if isinstance(rid_raw, bool) or not isinstance(rid_raw, int):
        raise Refusal("malformed", "request needs an integer id")
    if not 0 <= rid_raw <= 2**53:  # answered with the id it gave, all the same
        raise Refusal("malformed", "request needs an integer id", rid_raw)
    try:
        return _decode_body(data, rid_raw)
    except Refusal as refusal:
        refusal.request_id = rid_raw
        raise


def _decode_body(data: dict[str, Any], request_id: int) -> Request:
    unknown = set(data) - {"id", "op", "rid", "args"}
    if unknown:
        raise Refusal("malformed", f"unknown request field {sorted(unknown)[0][:40]!r}")
    op = data.get("op")
    model = ARGS.get(op) if isinstance(op, str) else None
    if model is None or not isinstance(op, str):
        raise Refusal("unknown-op", f"unknown op {str(op)[:40]!r}")
    client_rid = data.get("rid")
    if op in MUTATING:
        if not isinstance(client_rid, str) or not 1 <= len(client_rid) <= 64:
            raise Refusal("malformed", f"{op} needs a request id (rid) of 1-64 characters")
    elif client_rid is not None and not isinstance(client_rid, str):
        raise Refusal("malformed", "rid must be a string")
    if isinstance(client_rid, str) and _CONTROL.search(client_rid):
        raise Refusal("malformed", "rid must be printable text")
    raw_args = data.get("args", {})
    if not isinstance(raw_args, dict):
        raise Refusal("malformed", "args must be a JSON object")
    try:
        args = model.model_validate(raw_args)
    except ValueError as exc:
        raise Refusal("bad-args", f"{op}: {_first_error(exc)}") from None
    return Request(id=request_id, op=op, rid=client_rid, args=args)


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, TypeError):
            return str(exc).splitlines()[0][:200]
        # loc holds the request's own keys (env names, unknown fields): escape them.
        where = ".".join(str(p) for p in first.get("loc", ())) or "args"
        where = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", where[:60])
        message = str(first.get("msg", "invalid"))
        if first.get("type") == "extra_forbidden":
            message = "unknown field"
        message = message.removeprefix("Value error, ")
        return f"{where}: {message[:160]}"
    return str(exc).splitlines()[0][:200]


def encode(obj: dict[str, Any]) -> bytes:
    """One message as a line of JSON (orjson: this is the head's hottest path)."""
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)


def decode(text: str | bytes) -> Any:
    """JSON text the head wrote itself (a stored answer) back to Python."""
    return orjson.loads(text)


def response(request_id: int, result: dict[str, Any]) -> dict[str, Any]:
    return {"id": request_id, "ok": True, "result": result}


def error(request_id: int | None, code: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": {"code": code, "message": message}}


JobStateName = Literal[
    "queued",
    "held",
    "starting",
    "running",
    "killing",
    "preempting",
    "unknown",
    "completed",
    "failed",
    "timeout",
    "killed",
    "cancelled",
]
LIVE_JOB_STATES = rows.LIVE_JOB_STATES
PENDING_JOB_STATES = rows.PENDING_JOB_STATES
FINAL_JOB_STATES = rows.FINAL_JOB_STATES
"""The states split three ways: the policy's sets (``policy.rows``), one for all."""
