"""Requests to a helper, one model per op, and the typed result of each.

A request is validated here, on the client, before it is sent (a namespace that is
not ``[a-z0-9]{8,32}``, a job id out of range, an empty argv never leave this
process), then written as one JSON line with the session's request id. The helper
answers with a ``result`` message (``gputui.wire.messages.Result``) whose ``value`` is
decoded with the op's result model: strings cleaned and capped, numbers
range-checked, like every other message. A value that breaks a rule makes the whole
answer a clean failure (``ResultError``), never a half-read one.

Request ids count up per helper session and start again with the next one, so an
answer can only ever match a request of its own session. What makes a retry safe is
the op itself: ``launch`` is keyed by (namespace, job id) on the host, where the job
directory is created exclusively, so a second launch of the same job never starts a
second process (it answers the first one's state with ``already: true``). A launch
whose answer never came (a timeout, a dropped connection) is therefore resolved by
asking ``jobs`` for that job id, never by guessing; ``Fleet.launch`` does that.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from gputui.common.gpu_env import GPU_UUID_PATTERN
from gputui.common.jobenv import ENV_NAME_PATTERN, ENV_PATH_MAX, IMAGE_PATTERN, Runtime
from gputui.common.jobscript import MAX_SCRIPT_BYTES
from gputui.common.text import clean
from gputui.wire.fields import (
    AttachmentId,
    Count,
    Epoch,
    ErrorMap,
    GpuIndex,
    LongText,
    MiB,
    Notes,
    Pid,
    ShortText,
    Uid,
    Wire,
)

DEFAULT_TIMEOUT_S = 60.0
"""Seconds a GPU reset may take when the request does not say."""
MIN_TIMEOUT_S = 0.1
MAX_TIMEOUT_S = 600.0
"""The range a reset's ``timeout_s`` must be in (the helper checks the same one)."""
MAX_HOLDERS = 256
"""Processes holding a GPU's device files one answer lists at most."""
RESET_ANSWER_MARGIN_S = 30.0
"""A reset's answer is waited for this long past its own timeout."""
MAX_REQUEST_BYTES = 1 << 20
"""The helper reads request lines of at most 1 MiB (newline included)."""
MAX_JOBS = 4096
"""Jobs one ``jobs`` answer (or message) lists at most."""
MAX_LOG_BYTES = 65536
"""The most one ``job_log`` request may ask for."""
JOB_ID_MAX = 2**53
"""Job ids are 1 .. 2**53: exact in a double, so any JSON reader keeps them."""

_NS = r"^[a-z0-9]{8,32}$"
NAMESPACE = re.compile(r"\A[a-z0-9]{8,32}\Z")
"""What a jobs namespace looks like: 8 to 32 of a-z and 0-9."""
_USER = r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,31}$"
_ENV_NAME = rf"^{ENV_NAME_PATTERN}$"
_GPU_UUID = rf"^{GPU_UUID_PATTERN}$"
_LOG_LINE_CELLS = MAX_LOG_BYTES

Namespace = Annotated[str, Field(pattern=_NS, strict=True)]
"""The head's namespace token on a host: keeps two heads' jobs apart."""
JobId = Annotated[int, Field(ge=1, le=JOB_ID_MAX, strict=True)]
ExitCode = Annotated[int, Field(ge=0, le=255, strict=True)]
GraceSeconds = Annotated[float, Field(ge=0, le=86_400, strict=True, allow_inf_nan=False)]
LimitSeconds = Annotated[float, Field(gt=0, le=1e9, strict=True, allow_inf_nan=False)]
IntervalSeconds = Annotated[float, Field(ge=0.1, le=60.0, strict=True, allow_inf_nan=False)]
ResetSeconds = Annotated[
    float,
    Field(ge=MIN_TIMEOUT_S, le=MAX_TIMEOUT_S, strict=True, allow_inf_nan=False),
]
Signal = Literal["TERM", "KILL", "INT", "HUP", "STOP", "CONT"]
"""Signals a process on a GPU may be sent (verified by the helper first)."""
JobSignal = Literal["TERM", "KILL", "INT", "HUP"]
"""Signals a supervised job's process group may be sent."""

JOB_STATES = ("starting", "running", "exited", "failed-to-start", "lost")
JobStateName = Literal["starting", "running", "exited", "failed-to-start", "lost", "unknown"]
"""What a job is doing; ``unknown``: a state this client does not know (a newer
helper's), which must not be read as ended, nor as running."""


def _known_state(value: object) -> object:
    """A state word from a newer helper reads as ``unknown``, not as an error."""
    if isinstance(value, str) and value not in JOB_STATES:
        return "unknown"
    return value


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


_NoNul = AfterValidator(_no_nul)


def _log_text(value: str) -> str:
    """Log output keeps its lines; each loses escape sequences and control characters."""
    return "\n".join(clean(line, _LOG_LINE_CELLS) for line in value.split("\n"))


class ResultError(ValueError):
    """A helper's answer whose value breaks the op's rules; the text says where."""


# -- results ------------------------------------------------------------------------


class JobState(Wire):
    """One supervised job as its host sees it (from ``state.json`` and ``/proc``)."""

    job_id: JobId
    state: Annotated[JobStateName, BeforeValidator(_known_state)]
    pid: Pid | None = None
    start_ticks: Count | None = None
    exit_code: ExitCode | None = None
    """How an ``exited`` job ended, when it exited (else ``signal`` says)."""
    signal: ShortText | None = None
    """The signal that ended an ``exited`` job, e.g. ``KILL``."""
    started_at: Epoch | None = None
    ended_at: Epoch | None = None
    timed_out: StrictBool = False
    """The supervisor ended the job at its time limit."""
    idle_out: StrictBool = False
    """The supervisor ended an interactive job at its idle limit."""
    pty: StrictBool = False
    """An interactive job: its supervisor keeps a terminal to attach to (``pty_open``)."""
    log_path: LongText = ""
    error: LongText | None = None
    container_id: Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")] | None = None
    """Its container (the first 12 hex of the id its runtime wrote), for an image job."""
    errors: ErrorMap = Field(default_factory=dict)
    """Fields the decoder could not read (mended to null), by name."""

    @property
    def active(self) -> bool:
        """Starting or running: the job holds its GPUs."""
        return self.state in ("starting", "running")

    @property
    def ended(self) -> bool:
        """Exited, never started, or lost: the job is not running and never will be."""
        return self.state in ("exited", "failed-to-start", "lost")


class SignalResult(Wire):
    method: ShortText = ""
    """How the process was pinned while verified: ``pidfd`` or ``proc-stat``."""
    pid: Pid | None = None
    signal: ShortText | None = None


class IntervalResult(Wire):
    seconds: IntervalSeconds
    """The interval the helper applied (it clamps what was asked)."""


class LaunchResult(JobState):
    already: StrictBool = False
    """The job existed already (a repeated launch): nothing new was started."""
    method: ShortText = ""
    """How the supervisor was started: ``detached`` or ``systemd-run``."""


class JobsResult(Wire):
    jobs: Annotated[tuple[JobState, ...], Field(max_length=MAX_JOBS)] = ()


class JobSignalResult(JobState):
    delivered: StrictBool = False
    """The signal reached the job's process group (False: nothing was left to signal)."""


class JobLogResult(Wire):
    job_id: JobId
    data: Annotated[str, Field(max_length=MAX_LOG_BYTES, strict=True)]
    """The log text read (UTF-8, errors replaced), escape sequences removed."""
    offset: Count
    """Where the next read starts (bytes)."""
    size: Count
    """The log's size now (bytes)."""
    ended: StrictBool
    """The job has ended and ``offset`` is the end of its log: nothing more will come."""

    @field_validator("data", mode="after")
    @classmethod
    def _clean_data(cls, value: str) -> str:
        return _log_text(value)

    @model_validator(mode="after")
    def _offset_within(self) -> JobLogResult:
        if self.offset > self.size:
            raise ValueError(f"offset {self.offset} is past the log's size {self.size}")
        return self


class JobsForgetResult(Wire):
    forgotten: Annotated[tuple[JobId, ...], Field(max_length=MAX_JOBS)] = ()


class Holder(Wire):
    """A process with a GPU's device file (or a shared ``/dev/nvidia*`` one) open."""

    pid: Pid
    uid: Uid | None = None
    user: ShortText | None = None
    command: LongText = ""
    devices: Annotated[tuple[ShortText, ...], Field(max_length=8)] = ()
    """The device files it holds (``nvidia3``, ``nvidiactl``, ``nvidia-uvm`` ...)."""
    card: StrictBool = False
    """It holds this GPU's own ``/dev/nvidiaN`` (not only the shared files)."""
    helper: StrictBool = False
    """It is the helper itself (NVML keeps the files open)."""


class HoldersResult(Wire):
    index: GpuIndex
    uuid: ShortText
    device: ShortText
    holders: Annotated[tuple[Holder, ...], Field(max_length=MAX_HOLDERS)] = ()
    found: Count = 0
    unreadable: Count = 0
    """Processes of other users whose fds the helper could not read (it is not root)."""
    notes: Notes = ()


class ResetResult(Wire):
    index: GpuIndex
    uuid: ShortText
    reset: StrictBool
    """The card was reset (False: ``error`` says why not, ``message`` more)."""
    error: ShortText | None = None
    message: LongText = ""
    """``nvidia-smi``'s output as one line, or NVML's error text."""
    via: Literal["nvml", "nvidia-smi"] = "nvml"
    """What reset it: ``nvidia-smi --gpu-reset`` on a real host, NVML on the simulator."""
    mem_used_mib: MiB | None = None
    """After a reset: the memory NVML then reads as used (None: it could not say)."""
    processes: Count | None = None
    """After a reset: the processes NVML then lists on the card."""


class ClocksResult(Wire):
    """What a ``clocks`` request did to a card's graphics clocks."""

    index: GpuIndex
    uuid: ShortText
    locked: StrictBool
    """The card's clocks are locked low now (as far as this helper knows)."""
    supported: StrictBool = True
    """False: the card cannot be locked (older than Volta, NotSupported, NoPermission);
    the helper remembers that and is not asked again by the head."""
    error: ShortText | None = None
    message: LongText = ""
    mhz: Annotated[int, Field(ge=1, le=100_000, strict=True)] | None = None
    """The graphics clock it was locked at."""
    remembered: StrictBool = False
    """``supported`` is false from an earlier answer: NVML was not called again."""


# -- requests -----------------------------------------------------------------------

R = TypeVar("R", bound=BaseModel)


class HelperRequest(BaseModel, Generic[R]):
    """One request to a helper; ``R`` is the model its ``value`` decodes to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: ClassVar[str]
    result_model: ClassVar[type[BaseModel]]
    timeout_note: ClassVar[str] = ""
    """What a person should know when the answer did not come in time."""

    def answer_within(self, default: float) -> float:
        """Seconds to wait for the answer, given the link's usual ``default``."""
        return default

    def line(self, request_id: int) -> str:
        """The request as the one JSON line the helper reads."""
        body = self.model_dump(mode="json")
        return _line({"type": "request", "id": request_id, "op": self.op, **body})

    def decode(self, value: dict[str, Any] | None) -> R:
        """The result's ``value`` as this op's model, or ``ResultError`` saying what is wrong."""
        try:
            result = self.result_model.model_validate(value if value is not None else {})
        except ValidationError as exc:
            raise ResultError(_first_error(self.op, exc)) from None
        except RecursionError:
            raise ResultError(f"{self.op} result nested too deeply") from None
        return result  # type: ignore[return-value]  # result_model is R's class


class SignalRequest(HelperRequest[SignalResult]):
    """Signal a process on a GPU; the helper checks pid, owner, start time and GPU first."""

    op: ClassVar[str] = "signal"
    result_model: ClassVar[type[BaseModel]] = SignalResult
    timeout_note: ClassVar[str] = "the signal may still have been delivered"
    pid: Pid
    signal: Signal
    gpu_uuid: str
    uid: Uid | None
    start_ticks: Count | None


class IntervalRequest(HelperRequest[IntervalResult]):
    """Sample every ``seconds`` from now on (the helper clamps to 0.1 - 60)."""

    op: ClassVar[str] = "interval"
    result_model: ClassVar[type[BaseModel]] = IntervalResult
    seconds: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]


class LaunchRequest(HelperRequest[LaunchResult]):
    """Start job ``job_id`` under a detached supervisor that outlives every connection.

    Keyed by ``(ns, job_id)`` on the host: sending it again never starts a second
    process. After a timeout, ask ``jobs`` (``Fleet.launch`` does).
    """

    op: ClassVar[str] = "launch"
    result_model: ClassVar[type[BaseModel]] = LaunchResult
    timeout_note: ClassVar[str] = "the job may still start; ask jobs for it"
    ns: Namespace
    job_id: JobId
    user: Annotated[str, Field(pattern=_USER)] | None = None
    """The Unix user to run as; None: the helper's own user."""
    uid: Uid | None = None
    """The uid ``user`` must have on the host (the job's owner's): the helper refuses
    the launch when the name now belongs to another uid. None: not checked."""
    argv: Annotated[list[Annotated[str, _NoNul]], Field(min_length=1, max_length=4096)]
    cwd: Annotated[str, _NoNul, Field(min_length=1, max_length=4096)] | None = None
    env: Annotated[
        dict[Annotated[str, Field(pattern=_ENV_NAME)], Annotated[str, _NoNul]],
        Field(max_length=1024),
    ] = Field(default_factory=dict)
    gpu_uuids: Annotated[list[Annotated[str, Field(pattern=_GPU_UUID)]], Field(max_length=256)] = (
        Field(default_factory=list)
    )
    time_limit_s: LimitSeconds | None = None
    grace_s: GraceSeconds = 30.0
    """Seconds between SIGTERM and SIGKILL at the time limit."""
    conda: Annotated[str, _NoNul, Field(min_length=1, max_length=ENV_PATH_MAX)] | None = None
    """A conda environment (name or prefix) the helper activates for ``argv``."""
    venv: Annotated[str, _NoNul, Field(min_length=1, max_length=ENV_PATH_MAX)] | None = None
    """A virtual environment (absolute path) the helper activates for ``argv``."""
    image: Annotated[str, Field(pattern=rf"^{IMAGE_PATTERN}$")] | None = None
    """Run ``argv`` in a container of this image, with ``runtime``; the helper names
    and labels it with the job, passes the GPUs by UUID and removes it at the end."""
    runtime: Runtime | None = None
    script: Annotated[str, _NoNul, Field(min_length=2, max_length=MAX_SCRIPT_BYTES)] | None = None
    """A submit script's text: written to the job's directory and run (argv[0] names
    it; the helper puts the copy's path there)."""
    output: Annotated[str, _NoNul, Field(min_length=1, max_length=4096)] | None = None
    """Where stdout and stderr go (relative: to ``cwd``), opened as the job's user."""
    pty: StrictBool = False
    """Run it on a terminal its supervisor keeps, to attach to (an interactive job)."""
    idle_s: LimitSeconds | None = None
    """An interactive job with no input and no output this long is ended."""


class JobsRequest(HelperRequest[JobsResult]):
    """The state of ``job_ids`` (unknown ones are left out), or of every job not forgotten."""

    op: ClassVar[str] = "jobs"
    result_model: ClassVar[type[BaseModel]] = JobsResult
    ns: Namespace
    job_ids: Annotated[list[JobId], Field(max_length=MAX_JOBS)] | None = None


class JobSignalRequest(HelperRequest[JobSignalResult]):
    """Signal a job's process group; with TERM and ``grace_s``, KILL follows after it."""

    op: ClassVar[str] = "job_signal"
    result_model: ClassVar[type[BaseModel]] = JobSignalResult
    timeout_note: ClassVar[str] = "the signal may still have been delivered"
    ns: Namespace
    job_id: JobId
    signal: JobSignal
    grace_s: GraceSeconds | None = None


class JobLogRequest(HelperRequest[JobLogResult]):
    """Up to ``max_bytes`` of a job's output from ``offset`` on."""

    op: ClassVar[str] = "job_log"
    result_model: ClassVar[type[BaseModel]] = JobLogResult
    ns: Namespace
    job_id: JobId
    offset: Count = 0
    max_bytes: Annotated[int, Field(ge=1, le=MAX_LOG_BYTES, strict=True)] = MAX_LOG_BYTES


class JobsForgetRequest(HelperRequest[JobsForgetResult]):
    """Stop listing ended jobs in ``jobs`` (their logs stay readable)."""

    op: ClassVar[str] = "jobs_forget"
    result_model: ClassVar[type[BaseModel]] = JobsForgetResult
    ns: Namespace
    job_ids: Annotated[list[JobId], Field(min_length=1, max_length=MAX_JOBS)]


PTY_SIZE_MAX = 10000
"""Rows or columns a terminal may be said to have (the supervisor's cap)."""
TermSize = Annotated[int, Field(ge=1, le=PTY_SIZE_MAX, strict=True)]


class PtyOpenResult(Wire):
    aid: AttachmentId
    job_id: JobId


class PtyOpenRequest(HelperRequest[PtyOpenResult]):
    """Attach to an interactive job's terminal as ``aid``: its output then comes as
    ``pty`` messages (the ring first), and ``pty_send`` lines carry input to it."""

    op: ClassVar[str] = "pty_open"
    result_model: ClassVar[type[BaseModel]] = PtyOpenResult
    ns: Namespace
    job_id: JobId
    aid: AttachmentId
    rows: TermSize = 24
    cols: TermSize = 80


class PtySendResult(Wire):
    aid: AttachmentId


PTY_INPUT_MAX = 65536
"""Base64 characters of input one ``pty_send`` carries at most."""


class PtySendRequest(HelperRequest[PtySendResult]):
    """Input (base64), a new window size, or an acknowledgement of output shown up to
    offset ``ack`` (which lets the supervisor send more): any of them."""

    op: ClassVar[str] = "pty_send"
    result_model: ClassVar[type[BaseModel]] = PtySendResult
    aid: AttachmentId
    data: Annotated[str, Field(max_length=PTY_INPUT_MAX, pattern=r"^[A-Za-z0-9+/=]*$")] | None = (
        None
    )
    rows: TermSize | None = None
    cols: TermSize | None = None
    ack: Annotated[int, Field(ge=0, le=2**62, strict=True)] | None = None


class PtyCloseRequest(HelperRequest[PtySendResult]):
    """Detach ``aid`` (the job and its terminal go on)."""

    op: ClassVar[str] = "pty_close"
    result_model: ClassVar[type[BaseModel]] = PtySendResult
    aid: AttachmentId


class HoldersRequest(HelperRequest[HoldersResult]):
    """What holds GPU ``index``'s device files (and the shared ones) open."""

    op: ClassVar[str] = "holders"
    result_model: ClassVar[type[BaseModel]] = HoldersResult
    index: GpuIndex


class ResetRequest(HelperRequest[ResetResult]):
    """Reset GPU ``index`` if it is still ``uuid`` and no process is on it."""

    op: ClassVar[str] = "reset"
    result_model: ClassVar[type[BaseModel]] = ResetResult
    timeout_note: ClassVar[str] = "the reset may still have been done"
    index: GpuIndex
    uuid: Annotated[str, Field(pattern=_GPU_UUID)]
    timeout_s: ResetSeconds = DEFAULT_TIMEOUT_S
    """How long ``nvidia-smi --gpu-reset`` may take on the host before it is killed."""

    def answer_within(self, default: float) -> float:
        """The helper answers once the reset ends or times out: wait past that."""
        return max(default, self.timeout_s + RESET_ANSWER_MARGIN_S)


class ClocksRequest(HelperRequest[ClocksResult]):
    """Lock GPU ``index``'s graphics clocks low (``lock``) or reset them (``reset``),
    if it is still ``uuid``."""

    op: ClassVar[str] = "clocks"
    result_model: ClassVar[type[BaseModel]] = ClocksResult
    timeout_note: ClassVar[str] = "the clocks may still have been changed"
    index: GpuIndex
    uuid: Annotated[str, Field(pattern=_GPU_UUID)]
    action: Literal["lock", "reset"]


def _first_error(op: str, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    if not errors:
        return f"{op} result: invalid"
    where = ".".join(str(part) for part in errors[0]["loc"]) or "value"
    return clean(f"{op} result: {where}: {errors[0]['msg']}", 300)


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"
