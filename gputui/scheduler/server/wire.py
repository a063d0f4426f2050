"""The head's socket protocol: JSON lines, one request or response per line.

A request is ``{"id": N, "op": OP, "rid": RID, "args": {...}}``. ``id`` pairs the
response with its request on this connection; ``rid`` (client request id) is
required on every mutating op and makes a retry after a dropped connection apply
once. The answer is ``{"id": N, "ok": true, "result": {...}}`` or ``{"id": N,
"ok": false, "error": {"code": C, "message": M}}``; a refusal made from a template
(``gputui.wire.words``) also carries it and its args, ``"msg": T, "args": {...}``,
for a client to show in its user's language (``message`` stays the English line).
After ``subscribe`` the head also pushes ``{"push": "state", "seq": S, "state":
{...}}`` whenever the queue, claims or GPUs change, and ``{"push": "notice",
"notice": {...}}`` (its ``text`` in English, and ``msg``/``args`` where it was made
from a template). After ``telemetry`` it pushes ``{"push": "telemetry", "n": N,
"hosts": [DELTA, ...]}``:
per host, what changed in its samples since this connection's last push
(``client.deltas``; push 0 carries every host, in full or, outside the ``detail`` the
console named, as a summary). ``telemetry_view`` changes which hosts are in full;
``telemetry_stop`` ends the pushes (the connection stays, for its other requests).

Everything a client sends is untrusted: the argument models forbid unknown keys,
range-check every number and cap every size. Identity is never part of a request;
the head takes it from the socket (SO_PEERCRED).

This module is the envelope: decoding a request line (``ARGS`` names each op's
argument model, from ``op_args`` for the mutating ops and ``read_args`` for the
rest), refusing a bad one, and encoding answers and pushes. What an argument may be
(limits, field types, the text rule) is ``arg_types``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from gputui.common.i18n import N_
from gputui.scheduler.client import ops
from gputui.scheduler.policy import rows
from gputui.scheduler.server.arg_types import CONTROL, ArgsModel, Empty
from gputui.scheduler.server.op_args import (
    BookArgs,
    ClaimArgs,
    DrainArgs,
    ForceFreeArgs,
    HealthAckArgs,
    JobArgs,
    NoticesArgs,
    NotifyNameArgs,
    NotifySetArgs,
    ReleaseArgs,
    RequeueArgs,
    SignalArgs,
    SubmitArgs,
    UnbookArgs,
)
from gputui.scheduler.server.read_args import (
    AttachArgs,
    AuditArgs,
    BookingsArgs,
    EnvArgs,
    EstimatesArgs,
    ExplainArgs,
    GpusArgs,
    HealthArgs,
    HistoryArgs,
    IncidentArgs,
    ListArgs,
    LogArgs,
    PtyInArgs,
    ReportArgs,
    ShowArgs,
    SlurmEnergyArgs,
    TelemetryArgs,
    TelemetryViewArgs,
    UsageArgs,
    WaitArgs,
)
from gputui.wire.words import Words, say

MUTATING = ops.MUTATING
"""The ops that change something (``ops.MUTATING``: one set for client and head)."""

MAX_REQUEST_BYTES = 1 << 20
"""A request line longer than this is refused without being parsed."""


class Refusal(Exception):
    """A request the head will not carry out: ``code`` for programs, a line for people.

    ``message`` is the line, or the ``Words`` it is made from (``say(N_("no job
    {job}"), job=12)``): then the English line is the template filled, and the
    answer carries the template and args too (``refused``)."""

    def __init__(self, code: str, message: str | Words, request_id: int | None = None) -> None:
        words = message if isinstance(message, Words) else None
        text = message.english() if isinstance(message, Words) else message
        super().__init__(text)
        self.code = code
        self.message = text
        self.words = words
        """The template and args the line was made from (None: a plain line)."""
        self.request_id = request_id
        """The refused request's id, once it could be read (its answer carries it)."""


ARGS: dict[str, type[ArgsModel]] = {
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
    "book": BookArgs,
    "unbook": UnbookArgs,
    "bookings": BookingsArgs,
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
    "estimates": EstimatesArgs,
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
    "telemetry": TelemetryArgs,
    "telemetry_view": TelemetryViewArgs,
    "telemetry_stop": Empty,
    "signal": SignalArgs,
    "slurm": Empty,
    "slurm_energy": SlurmEnergyArgs,
    "notify_set": NotifySetArgs,
    "notify_clear": NotifyNameArgs,
    "notify_show": Empty,
    "notify_test": NotifyNameArgs,
    "attach": AttachArgs,
    "pty_in": PtyInArgs,
    "detach": Empty,
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
        raise Refusal(
            "too-large", say(N_("request over {kib} KiB refused"), kib=MAX_REQUEST_BYTES // 1024)
        )
    try:
        data = orjson.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refusal(
            "malformed", say(N_("request is not JSON ({why})"), why=str(exc)[:80])
        ) from None
    except RecursionError:  # "[[[[…" a hundred thousand deep
        raise Refusal("malformed", say(N_("request is nested too deeply"))) from None
    if not isinstance(data, dict):
        raise Refusal("malformed", say(N_("request must be a JSON object")))
    rid_raw = data.get("id")
    if isinstance(rid_raw, bool) or not isinstance(rid_raw, int):
        raise Refusal("malformed", say(N_("request needs an integer id")))
    if not 0 <= rid_raw <= 2**53:  # answered with the id it gave, all the same
        raise Refusal("malformed", say(N_("request needs an integer id")), rid_raw)
    try:
        return _decode_body(data, rid_raw)
    except Refusal as refusal:
        refusal.request_id = rid_raw
        raise


def _decode_body(data: dict[str, Any], request_id: int) -> Request:
    unknown = set(data) - {"id", "op", "rid", "args"}
    if unknown:
        raise Refusal(
            "malformed",
            say(N_("unknown request field {field}"), field=repr(sorted(unknown)[0][:40])),
        )
    op = data.get("op")
    model = ARGS.get(op) if isinstance(op, str) else None
    if model is None or not isinstance(op, str):
        raise Refusal("unknown-op", say(N_("unknown op {op}"), op=repr(str(op)[:40])))
    client_rid = data.get("rid")
    if op in MUTATING:
        if not isinstance(client_rid, str) or not 1 <= len(client_rid) <= 64:
            raise Refusal(
                "malformed", say(N_("{op} needs a request id (rid) of 1-64 characters"), op=op)
            )
    elif client_rid is not None and not isinstance(client_rid, str):
        raise Refusal("malformed", say(N_("rid must be a string")))
    if isinstance(client_rid, str) and CONTROL.search(client_rid):
        raise Refusal("malformed", say(N_("rid must be printable text")))
    raw_args = data.get("args", {})
    if not isinstance(raw_args, dict):
        raise Refusal("malformed", say(N_("args must be a JSON object")))
    try:
        args = model.model_validate(raw_args)
    except ValueError as exc:
        raise Refusal(
            "bad-args", say(N_("{op}: {first_error}"), op=op, first_error=_first_error(exc))
        ) from None
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
        where = CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", where[:60])
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


def error(request_id: int | None, code: str, message: str | Words) -> dict[str, Any]:
    """A refusal's answer: ``message`` a line, or the ``Words`` it is made from (the
    English line, and beside it the template and args)."""
    if isinstance(message, Words):
        body: dict[str, Any] = {"code": code, "message": message.english(), **message.wire()}
    else:
        body = {"code": code, "message": message}
    return {"id": request_id, "ok": False, "error": body}


def refused(request_id: int | None, refusal: Refusal) -> dict[str, Any]:
    """The answer to a refused request: its code, its line, and its words."""
    return error(request_id, refusal.code, refusal.words or refusal.message)


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
