"""Wire messages between the helper on a GPU host and its clients (console, head).

JSON lines, one object per line, each with a ``type``. The helper speaks first with
``hello``; then ``sample`` every interval, ``event`` as things happen, ``result`` for
each request, and ``error`` for problems that are not a crash.

The helper (``gputui.remote``) builds these objects as plain dicts with the standard
library; this module is the one place the client side decodes them. Decoding
validates types, strips control and escape sequences from every string a host sent,
and caps sizes, so nothing downstream handles raw host data.

A field that could not be read is ``null`` in its place and named in the object's
``errors`` map with the NVML error name (``"NotSupported"``, ``"GpuIsLost"``,
``"FunctionNotFound"`` ...). One bad field never hides the others.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from gputui.text import clean

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 4 * 1024 * 1024


def _short(value: str) -> str:
    return clean(value, 128)


def _long(value: str) -> str:
    return clean(value, 512)


ShortText = Annotated[str, AfterValidator(_short)]
LongText = Annotated[str, AfterValidator(_long)]
ErrorMap = dict[ShortText, ShortText]


class _Wire(BaseModel):
    # Unknown fields from a newer helper are ignored; the hello handshake decides
    # whether the versions can talk at all.
    model_config = ConfigDict(extra="ignore", frozen=True)


class GpuInfo(_Wire):
    """Static facts about one GPU, sent once in ``hello``."""

    index: int
    uuid: ShortText
    name: ShortText = "unknown"
    memory_total_mib: int | None = None
    power_limit_w: float | None = None
    pcie_max_gen: int | None = None
    pcie_max_width: int | None = None
    mig_mode: bool | None = None
    pci_bus_id: ShortText | None = None
    serial: ShortText | None = None
    errors: ErrorMap = Field(default_factory=dict)


class Hello(_Wire):
    type: Literal["hello"] = "hello"
    protocol: int
    helper_version: ShortText
    hostname: ShortText
    driver: ShortText | None = None
    cuda: ShortText | None = None
    nvml: ShortText | None = None
    simulated: bool = False
    signal_method: ShortText = "pidfd"
    gpus: tuple[GpuInfo, ...] = ()
    errors: ErrorMap = Field(default_factory=dict)


class ProcessSample(_Wire):
    """A process that holds memory on a GPU, as the host saw it."""

    pid: int
    uid: int | None = None
    user: ShortText | None = None
    command: LongText = ""
    gpu_mem_mib: int | None = None
    start_ticks: int | None = None
    start_time: float | None = None
    container: ShortText | None = None
    kind: Literal["compute", "graphics"] = "compute"


GpuState = Literal["ok", "lost", "error"]


class GpuSample(_Wire):
    """One GPU's readings at one instant. ``state`` is ``lost`` once NVML says so."""

    index: int
    uuid: ShortText
    state: GpuState = "ok"
    message: LongText | None = None
    util_gpu: int | None = None
    util_mem: int | None = None
    mem_used_mib: int | None = None
    mem_total_mib: int | None = None
    temp_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    fan_pct: int | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    throttle: tuple[ShortText, ...] | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    processes: tuple[ProcessSample, ...] = ()
    errors: ErrorMap = Field(default_factory=dict)


class Sample(_Wire):
    type: Literal["sample"] = "sample"
    seq: int
    time: float
    gpus: tuple[GpuSample, ...] = ()


class Event(_Wire):
    """Something that happened on a GPU: an Xid now (``nvml``) or before (``kernel-log``)."""

    type: Literal["event"] = "event"
    time: float
    kind: ShortText
    source: Literal["nvml", "kernel-log", "helper"] = "nvml"
    gpu_uuid: ShortText | None = None
    gpu_index: int | None = None
    pci_bus_id: ShortText | None = None
    xid: int | None = None
    text: LongText = ""


class Result(_Wire):
    """The answer to request ``id``: ``ok`` with a ``value``, or an error ``code``."""

    type: Literal["result"] = "result"
    id: int
    ok: bool
    value: dict[str, Any] | None = None
    code: ShortText | None = None
    error: LongText | None = None


class HelperError(_Wire):
    type: Literal["error"] = "error"
    message: LongText
    fatal: bool = False


HelperMessage = Annotated[
    Hello | Sample | Event | Result | HelperError, Field(discriminator="type")
]
_HELPER_MESSAGE: TypeAdapter[Hello | Sample | Event | Result | HelperError] = TypeAdapter(
    HelperMessage
)


class ProtocolError(ValueError):
    """A line from a helper that is not a valid message; the text says what was wrong."""


def decode_helper_line(line: str | bytes) -> Hello | Sample | Event | Result | HelperError:
    """Decode one line from a helper, or raise ``ProtocolError`` with a one-line reason."""
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(f"line of {len(line)} bytes is over the {MAX_LINE_BYTES} limit")
    try:
        return _HELPER_MESSAGE.validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "message"
        snippet = clean(line, 60)
        raise ProtocolError(f"{where}: {first.get('msg', 'invalid')} in {snippet!r}") from None


# Requests, client -> helper. Built here so every client speaks the same shapes.

Signal = Literal["TERM", "KILL", "INT", "HUP", "STOP", "CONT"]


def signal_request(
    request_id: int,
    *,
    pid: int,
    signal: Signal,
    gpu_uuid: str,
    uid: int | None,
    start_ticks: int | None,
) -> str:
    """A ``signal`` request: the helper verifies pid, uid, start and GPU before sending."""
    return _line(
        {
            "type": "request",
            "id": request_id,
            "op": "signal",
            "pid": int(pid),
            "signal": signal,
            "gpu_uuid": gpu_uuid,
            "uid": uid,
            "start_ticks": start_ticks,
        }
    )


def interval_request(request_id: int, seconds: float) -> str:
    """Ask the helper to sample every ``seconds`` (it clamps to a sane range)."""
    return _line({"type": "request", "id": request_id, "op": "interval", "seconds": seconds})


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"
