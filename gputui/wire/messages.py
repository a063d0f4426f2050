"""Wire messages between the helper on a GPU host and its clients (console, head).

JSON lines, one object per line, each with a ``type``. The helper speaks first with
``hello``; then ``sample`` every interval, ``event`` as things happen, ``result`` for
each request, ``jobs`` (the supervised jobs of the namespace it watches) whenever one
changes, and ``error`` for problems that are not a crash. A message of a type this
client does not know (a newer helper's) decodes to ``UnknownMessage``, for the link
to note and ignore: it is not a reason to drop the session.

This module is the messages' models and their limits. The requests to a helper and
their results are in ``gputui.wire.ops``, re-exported here: ``SignalRequest`` ...
``JobsForgetRequest``, ``JobState``, ``LaunchResult`` ...; the fields' types and caps
are ``gputui.wire.fields``'s, the health readings ``gputui.wire.health``'s.

The helper (``gputui.remote``) builds these objects as plain dicts with the standard
library; ``gputui.wire.decode`` is the one place the client side decodes them.

A field that could not be read is ``null`` in its place and named in the object's
``errors`` map with the NVML error name (``"NotSupported"``, ``"GpuIsLost"``,
``"FunctionNotFound"`` ...). One bad field never hides the others. Every number has
a range (no NaN, no infinity, no temperature below absolute zero, no 10^30 W) and
every list a cap.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, field_validator
from pydantic.dataclasses import dataclass

from gputui.wire.fields import (
    MAX_ERRORS,
    MAX_GPUS,
    MAX_NOTES,
    AttachmentId,
    Celsius,
    Count,
    Epoch,
    ErrorMap,
    GpuIndex,
    LongText,
    MHz,
    MiB,
    Notes,
    ParentPid,
    PcieGen,
    PcieWidth,
    Percent,
    Pid,
    ShortText,
    Uid,
    Watts,
    XidCode,
)
from gputui.wire.fields import Wire as _Wire
from gputui.wire.fields import decoder_only as _decoder_only
from gputui.wire.health import NVLINK_MAX_LINKS, HealthReadings, NvLinkSample
from gputui.wire.mig import MAX_SLICES, MigInfo, MigSample
from gputui.wire.ops import (
    JOB_ID_MAX,
    MAX_JOBS,
    MAX_LOG_BYTES,
    MAX_REQUEST_BYTES,
    NAMESPACE,
    HelperRequest,
    IntervalRequest,
    IntervalResult,
    JobId,
    JobLogRequest,
    JobLogResult,
    JobsForgetRequest,
    JobsForgetResult,
    JobSignal,
    JobSignalRequest,
    JobSignalResult,
    JobsRequest,
    JobsResult,
    JobState,
    JobStateName,
    LaunchRequest,
    LaunchResult,
    Namespace,
    ResultError,
    Signal,
    SignalRequest,
    SignalResult,
)

__all__ = [
    "JOB_ID_MAX",
    "MAX_ANCESTORS",
    "MAX_ERRORS",
    "MAX_GPUS",
    "MAX_JOBS",
    "MAX_LINE_BYTES",
    "MAX_LOG_BYTES",
    "MAX_NOTES",
    "MAX_PARENTS",
    "MAX_PROCESSES",
    "MAX_REQUEST_BYTES",
    "MAX_SLICES",
    "MAX_THROTTLE_REASONS",
    "NAMESPACE",
    "NVLINK_MAX_LINKS",
    "PROTOCOL_VERSION",
    "Event",
    "GpuInfo",
    "GpuSample",
    "GpuState",
    "Hello",
    "HelperError",
    "HelperMessage",
    "HelperRequest",
    "IntervalRequest",
    "IntervalResult",
    "JobId",
    "JobLogRequest",
    "JobLogResult",
    "JobSignal",
    "JobSignalRequest",
    "JobSignalResult",
    "JobState",
    "JobStateName",
    "Jobs",
    "JobsForgetRequest",
    "JobsForgetResult",
    "JobsRequest",
    "JobsResult",
    "LaunchRequest",
    "LaunchResult",
    "Message",
    "MigInfo",
    "MigSample",
    "Namespace",
    "NvLinkSample",
    "Parent",
    "ProcessSample",
    "Result",
    "ResultError",
    "Sample",
    "Signal",
    "SignalRequest",
    "SignalResult",
    "UnknownMessage",
    "Vendor",
]

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line a client reads from a helper; a longer one is refused."""
MAX_PROCESSES = 512
"""Processes kept per GPU; a helper listing more is cut, with a note."""
MAX_THROTTLE_REASONS = 32
MAX_ANCESTORS = 8
"""The deepest parent chain a console follows through ``Sample.parents`` (a helper
names 4 levels); the walk stops there, at a pid it saw before (a loop), and at a pid
the table does not name."""
MAX_PARENTS = 1024
"""Entries kept in a sample's ``parents`` table; a longer table is cut, with a note."""


Vendor = Literal["nvidia", "amd"]
"""The GPU vendors a helper reads (``GpuInfo.vendor``)."""


class GpuInfo(_Wire):
    """Static facts about one GPU, sent once in ``hello``."""

    index: GpuIndex
    uuid: ShortText
    name: ShortText = "unknown"
    memory_total_mib: MiB | None = None
    power_limit_w: Watts | None = None
    pcie_max_gen: PcieGen | None = None
    pcie_max_width: PcieWidth | None = None
    mig_mode: StrictBool | None = None
    pci_bus_id: ShortText | None = None
    serial: ShortText | None = None
    temp_slowdown_c: Celsius | None = None
    """The temperature at which the card slows itself down (NVML's threshold)."""
    temp_shutdown_c: Celsius | None = None
    vendor: Vendor = "nvidia"
    """Whose library reads it: ``nvidia`` (NVML) or ``amd`` (ROCm's amdsmi). An older
    helper sends none: its GPUs are NVIDIA's."""
    vendor_index: GpuIndex | None = None
    """Its index among its vendor's cards (NVML's, or amdsmi's order); ``index`` is
    the host's, unique across vendors (NVIDIA's first)."""
    mig: Annotated[tuple[MigInfo, ...], Field(max_length=MAX_SLICES)] = ()
    """Its MIG slices (``mig_mode`` on), as an admin made them."""
    errors: ErrorMap = Field(default_factory=dict)


class Hello(_Wire):
    type: Literal["hello"] = "hello"
    protocol: Count
    helper_version: ShortText
    hostname: ShortText
    driver: ShortText | None = None
    cuda: ShortText | None = None
    nvml: ShortText | None = None
    simulated: StrictBool = False
    signal_method: ShortText = "pidfd"
    boot_time: Epoch | None = None
    """When the host booted (``btime`` of /proc/stat), None where it could not be read:
    a later ``hello`` with another boot time says the host rebooted in between."""
    gpus: Annotated[tuple[GpuInfo, ...], Field(max_length=MAX_GPUS)] = ()
    errors: ErrorMap = Field(default_factory=dict)
    notes: Notes = ()
    """What the decoder had to do to this message (GPUs dropped, lists cut)."""

    _notes_are_the_decoders = field_validator("notes", mode="plain")(_decoder_only)


class Parent(_Wire):
    """A process up some GPU process's parent chain: its pid, its own parent's pid and
    its name (``comm``). ``Sample.parents`` names each such process once."""

    pid: Pid
    ppid: ParentPid
    name: ShortText


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="ignore"))
class ProcessSample:
    """A process that holds memory on a GPU, as the host saw it.

    ``ppid`` came in with the tree view (the chain above it is in ``Sample.parents``);
    an older helper sends none, so ``ppid`` is None and the console shows a flat list.

    A slotted dataclass, as ``GpuSample`` is (why: there).
    """

    pid: Pid
    uid: Uid | None = None
    user: ShortText | None = None
    command: LongText = ""
    gpu_mem_mib: MiB | None = None
    start_ticks: Count | None = None
    start_time: Epoch | None = None
    container: ShortText | None = None
    ppid: ParentPid | None = None
    kind: Literal["compute", "graphics"] = "compute"
    errors: ErrorMap = dataclasses.field(default_factory=dict)


GpuState = Literal["ok", "lost", "error"]


@dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="ignore"))
class GpuSample(HealthReadings):
    """One GPU's readings at one instant. ``state`` is ``lost`` once NVML says so.

    The health readings (``HealthReadings``) come in some samples only.

    Checked as every wire model is, but a slotted dataclass (as its processes and
    NVLinks are): a host's every sample holds one per GPU, and every reader of the
    head reads their fields. A model is three objects to make, scan and free (itself,
    its fields' dict, the set of those given) and reads a field from a dict; this is
    one object and reads a slot. ``wire_fields`` lists its fields;
    ``unchecked`` copies it with fields changed (``model_copy``'s part)."""

    index: GpuIndex
    uuid: ShortText
    state: GpuState = "ok"
    message: LongText | None = None
    util_gpu: Percent | None = None
    util_mem: Percent | None = None
    mem_used_mib: MiB | None = None
    mem_total_mib: MiB | None = None
    temp_c: Celsius | None = None
    power_w: Watts | None = None
    power_limit_w: Watts | None = None
    fan_pct: Percent | None = None
    clock_sm_mhz: MHz | None = None
    clock_mem_mhz: MHz | None = None
    throttle: Annotated[tuple[ShortText, ...], Field(max_length=MAX_THROTTLE_REASONS)] | None = None
    ecc_corrected: Count | None = None
    ecc_uncorrected: Count | None = None
    pcie_gen: PcieGen | None = None
    pcie_width: PcieWidth | None = None
    processes: Annotated[tuple[ProcessSample, ...], Field(max_length=MAX_PROCESSES)] = ()
    mig: Annotated[tuple[MigSample, ...], Field(max_length=MAX_SLICES)] = ()
    """Its MIG slices' readings (memory, utilisation where NVML gives it, pids)."""
    errors: ErrorMap = dataclasses.field(default_factory=dict)


class Sample(_Wire):
    type: Literal["sample"] = "sample"
    seq: Count
    time: Epoch | None = None
    """The helper's clock when it sampled (None when it sent nonsense)."""
    gpus: Annotated[tuple[GpuSample, ...], Field(max_length=MAX_GPUS)] = ()
    parents: Annotated[tuple[Parent, ...], Field(max_length=MAX_PARENTS)] = ()
    """The processes up the GPU processes' parent chains, each once however many
    processes (on however many GPUs) share it: a launcher's workers, one shell's jobs.
    Nearest levels first. An entry with a bad field is dropped alone, with a note.
    Untrusted like the rest: it may name a pid twice (the first counts) or loop;
    ``gputui.wire.chains`` follows it safely."""
    notes: Notes = ()
    """What the decoder had to do to this message (GPUs dropped, lists cut)."""

    _notes_are_the_decoders = field_validator("notes", mode="plain")(_decoder_only)


class Event(_Wire):
    """Something that happened on a GPU: an Xid now (``nvml``) or before (``kernel-log``)."""

    type: Literal["event"] = "event"
    time: Epoch | None = None
    """When it happened (None when the helper sent a time that cannot be one)."""
    kind: ShortText
    source: Literal["nvml", "kernel-log", "helper"] = "nvml"
    gpu_uuid: ShortText | None = None
    gpu_index: GpuIndex | None = None
    pci_bus_id: ShortText | None = None
    xid: XidCode | None = None
    sxid: XidCode | None = None
    """An NVSwitch's SXid (kernel log): the switch's bus id is in ``pci_bus_id``."""
    text: LongText = ""


class Result(_Wire):
    """The answer to request ``id``: ``ok`` with a ``value``, or an error ``code``."""

    type: Literal["result"] = "result"
    id: Count
    ok: StrictBool
    value: dict[str, Any] | None = None
    code: ShortText | None = None
    error: LongText | None = None


class HelperError(_Wire):
    type: Literal["error"] = "error"
    message: LongText
    fatal: StrictBool = False


class Jobs(_Wire):
    """Every job of the watched namespace (``--jobs NS``), in full, whenever one changed.

    Latest state, not a delta: a newer one replaces the last, so it coalesces safely.
    """

    type: Literal["jobs"] = "jobs"
    jobs: Annotated[tuple[JobState, ...], Field(max_length=MAX_JOBS)] = ()
    notes: Notes = ()
    """What the decoder had to do to this message (job entries dropped, lists cut)."""

    _notes_are_the_decoders = field_validator("notes", mode="plain")(_decoder_only)


PTY_DATA_MAX = 1 << 16
"""Base64 characters of terminal output one ``pty`` message carries at most."""


class Pty(_Wire):
    """An attached terminal's output (``out``), its job's end (``end``), or the
    attachment's end while the job goes on (``closed``)."""

    type: Literal["pty"] = "pty"
    aid: AttachmentId
    kind: Literal["out", "end", "closed"]
    at: Annotated[int, Field(ge=0, le=2**62, strict=True)] | None = None
    """Where ``data`` starts in the job's output (bytes since the job started)."""
    data: Annotated[str, Field(max_length=PTY_DATA_MAX, pattern=r"^[A-Za-z0-9+/=]*$")] = ""
    """The bytes, base64 (terminal output is raw bytes: escapes and all)."""
    skipped: Annotated[int, Field(ge=0, le=2**62, strict=True)] | None = None
    """Output this client was too slow to take, overwritten in the ring before it."""
    exit_code: Annotated[int, Field(ge=0, le=255, strict=True)] | None = None
    signal: ShortText | None = None
    why: ShortText | None = None
    """``end``: ``time`` or ``idle`` (a limit ended it), ``stopped``; ``closed``: why."""


class UnknownMessage(_Wire):
    """A message of a type this client does not know: a newer helper's, to be ignored."""

    type: ShortText


Message = Hello | Sample | Event | Result | HelperError | Jobs | Pty
"""Every message this client knows."""
HelperMessage = Annotated[Message, Field(discriminator="type")]
