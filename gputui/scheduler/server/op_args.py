"""The argument models of the ops that change something (``ops.MUTATING``): submit,
the job actions, claim and release, drain and force-free, acknowledging a health
problem, and ``notices`` (which marks what it reads as read); and ``signal`` (a
process on a GPU, through the head), which changes something but is not retried
under a request id: a lost answer says it may have been delivered. So are the
``notify_*`` ops (a user's chat channels): setting or clearing one twice is the
same as once, and a test message sent twice is harmless.

What the head's decoder (``wire.ARGS``) checks a mutating request's ``args`` against;
the read-only ops' models are in ``read_args``, the types and limits they share in
``arg_types``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from gputui.common import jobenv
from gputui.common.arrays import ArrayError, parse_array
from gputui.common.jobscript import MAX_OUTPUT, MAX_SCRIPT_BYTES
from gputui.common.mig_profile import PROFILE
from gputui.config.notify import (
    NAME_RE,
    SECRET_MAX,
    URL_MAX,
    check_secret,
    check_url,
    kind_of,
    parse_events,
)
from gputui.scheduler.server.arg_types import (
    MAX_ARGV_BYTES,
    MAX_ENV_BYTES,
    MAX_GPUS_PER_JOB,
    MAX_IDS,
    ArgsModel,
    ClaimId,
    Epoch,
    GpuCount,
    JobId,
    Name,
    PlainArgs,
    Seconds,
    Short,
    plain,
)


def _mig_profile(value: str | None) -> str | None:
    """A MIG profile a request asks for (``--mig 1g.10gb``), checked against NVML's
    naming, so a typo is refused in one line rather than waiting forever."""
    if value is not None and PROFILE.fullmatch(value) is None:
        raise ValueError(f"--mig {value[:40]!r} is not a MIG profile (e.g. 1g.10gb, 3g.40gb)")
    return value


RESERVED_ENV = jobenv.RESERVED_ENV


class SubmitArgs(PlainArgs):
    gpus: GpuCount = 1
    argv: Annotated[
        list[Annotated[str, StringConstraints(max_length=MAX_ARGV_BYTES)]],
        Field(min_length=1, max_length=4096),
    ]
    name: Name | None = None
    cwd: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    env: dict[str, Annotated[str, StringConstraints(max_length=MAX_ENV_BYTES)]] = Field(
        default_factory=dict, max_length=jobenv.ENV_MAX_VARS
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
    booking: JobId | None = None
    """``--booking ID``: run on that booking's cards (the submitter's), while it is on."""
    conda: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    """A conda environment (name or prefix) activated for the command (``--conda``)."""
    venv: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    """A virtual environment (absolute path) activated for the command (``--venv``)."""
    image: Annotated[str, StringConstraints(min_length=1, max_length=jobenv.IMAGE_MAX)] | None = (
        None
    )
    """Run the command in a container of this image (``--image``)."""
    runtime: jobenv.Runtime | None = None
    """The container runtime (``--runtime``); None: the head's ``jobs.runtime``."""
    mig: Name | None = None
    """A MIG slice profile (``--mig 1g.10gb``): its GPUs are slices of that profile."""

    _mig_checked = field_validator("mig")(_mig_profile)

    @field_validator("conda")
    @classmethod
    def _conda(cls, value: str | None) -> str | None:
        return None if value is None else jobenv.check_conda(value)

    @field_validator("venv")
    @classmethod
    def _venv(cls, value: str | None) -> str | None:
        return None if value is None else jobenv.check_env_path(value, "venv")

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return None if value is None else jobenv.check_image(value)

    @model_validator(mode="after")
    def _wrapping(self) -> SubmitArgs:
        jobenv.check_wrapping(self.conda, self.venv, self.image, self.runtime, self.cwd)
        return self

    array: Annotated[str, StringConstraints(min_length=1, max_length=1024)] | None = None
    """``--array``: its tasks' numbers, and how many may run at once (``0-31%4``)."""
    script: Annotated[str, StringConstraints(min_length=2, max_length=MAX_SCRIPT_BYTES)] | None = (
        None
    )
    """The script's text, copied at submit: argv[0] names it, argv[1:] are its arguments."""
    output: Annotated[str, StringConstraints(min_length=1, max_length=MAX_OUTPUT)] | None = None
    """``--output``: the output file's pattern on the host (``%j``, ``%A``, ``%a``)."""

    @field_validator("array")
    @classmethod
    def _array(cls, array: str | None) -> str | None:
        if array is not None:
            try:
                parse_array(array)
            except ArrayError as exc:
                raise ValueError(str(exc)) from None
        return array

    @field_validator("script")
    @classmethod
    def _script(cls, script: str | None) -> str | None:
        if script is not None:
            if not script.startswith("#!"):
                raise ValueError("a script starts with #!")
            if "\x00" in script or len(script.encode("utf-8", "surrogatepass")) > MAX_SCRIPT_BYTES:
                raise ValueError(f"a script has no NUL byte and at most {MAX_SCRIPT_BYTES} bytes")
        return script

    @field_validator("output")
    @classmethod
    def _output(cls, output: str | None) -> str | None:
        if output is not None and not output.isprintable():
            raise ValueError("--output has a control character")
        return output

    pty: bool = False
    """An interactive job: on a terminal to attach to (``run --pty``), with the
    interactive time and idle limits (``jobs:`` in hosts.yaml), never preempted."""

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
            if not jobenv.is_env_name(key):
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
    task: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    """With it, ``job_id`` is an array and this its task (``cancel 12_7``)."""
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
    mig: Name | None = None
    """A MIG slice profile (``--mig 1g.10gb``): slices of that profile, not whole cards."""
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

    _mig_checked = field_validator("mig")(_mig_profile)


class BookArgs(PlainArgs):
    """``book``: ``gpus`` cards (or those named) from ``start`` for ``duration_s``."""

    gpus: GpuCount | None = None
    gpu_refs: Annotated[list[Name], Field(max_length=MAX_GPUS_PER_JOB)] = Field(
        default_factory=list
    )
    """Cards by uuid or ``host:index``."""
    pool: Name | None = None
    model: Name | None = None
    host: Name | None = None
    start: Epoch
    """Seconds since the epoch (the client reads ``mon 09:00`` in its own zone)."""
    duration_s: Seconds
    note: Short = ""
    maint: bool = False
    """A maintenance window (admins): its cards are drained for it."""
    reason: Short | None = None


class UnbookArgs(PlainArgs):
    booking_id: JobId
    reason: Short | None = None


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


def _channel_name(value: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise ValueError("a channel's name is 1-32 of a-z 0-9 _ . - (starting with a letter/digit)")
    return value


ChannelName = Annotated[str, StringConstraints(max_length=32), AfterValidator(_channel_name)]


class NotifySetArgs(ArgsModel):
    """``notify_set``: the caller's channel ``name`` sends to ``url`` (``secret``: a
    Feishu/Lark or DingTalk bot's signing secret), for ``events`` (None: all)."""

    url: Annotated[str, StringConstraints(max_length=URL_MAX)]
    secret: Annotated[str, StringConstraints(max_length=SECRET_MAX)] | None = None
    events: (
        Annotated[list[Annotated[str, StringConstraints(max_length=16)]], Field(max_length=16)]
        | None
    ) = None
    name: ChannelName = "default"

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        problem = check_url(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("events")
    @classmethod
    def _events(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else list(parse_events(",".join(value)))

    @model_validator(mode="after")
    def _secret(self) -> NotifySetArgs:
        problem = check_secret(self.secret, kind_of(self.url))
        if problem is not None:
            raise ValueError(f"secret: {problem}")
        return self


class NotifyNameArgs(ArgsModel):
    """``notify_clear`` and ``notify_test``: one of the caller's channels, or all."""

    name: ChannelName | None = None
