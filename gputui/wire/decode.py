"""Decoding a helper's line: the one place the client side turns host bytes into messages.

Decoding validates types, strips control and escape sequences from every string a
host sent, and caps sizes, so nothing downstream handles raw host data. The messages
and their limits are ``gputui.wire.messages``'s.

A well-formed line is decoded in one pass inside pydantic-core. A line that breaks a
rule goes through ``_repair``: a bad optional value becomes ``null`` with its reason
in the errors map (``OutOfRange``, ``NotFinite``, ``WrongType`` ...), a GPU or
process entry whose identity (index, uuid, pid) is bad is dropped, an over-long list
is cut, and the message's ``notes`` say what was done. Only a line whose own
identity is bad is refused (``ProtocolError``, with a one-line reason).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from gputui.common.text import clean
from gputui.wire.fields import MAX_ERRORS, MAX_GPUS, MAX_NOTES, Wire, wire_fields
from gputui.wire.health import NVLINK_MAX_LINKS, NvLinkSample
from gputui.wire.messages import (
    MAX_LINE_BYTES,
    MAX_PARENTS,
    MAX_PROCESSES,
    MAX_SLICES,
    MAX_THROTTLE_REASONS,
    Event,
    GpuInfo,
    GpuSample,
    Hello,
    HelperError,
    HelperMessage,
    Jobs,
    Message,
    MigInfo,
    MigSample,
    Parent,
    ProcessSample,
    Pty,
    Result,
    Sample,
    UnknownMessage,
)
from gputui.wire.ops import MAX_JOBS, JobState

__all__ = ["MODEL_FIRST_BYTES", "ProtocolError", "decode_helper_line"]

MODEL_FIRST_BYTES = 1024 * 1024
"""A line up to this size is validated straight from JSON (the fast path); a bigger
one is parsed and its lists cut to their caps before any model is built."""

_HELPER_MESSAGE: TypeAdapter[Message] = TypeAdapter(HelperMessage)
_BY_TYPE: dict[str, type[Wire]] = {
    "hello": Hello,
    "sample": Sample,
    "event": Event,
    "result": Result,
    "error": HelperError,
    "jobs": Jobs,
    "pty": Pty,
}
# Lists of entries, each with an identity of its own: a bad entry is dropped alone.
# (owner, field): (entry model, noun, cap)
_Entry = type[Wire] | type[GpuSample] | type[NvLinkSample] | type[ProcessSample]
"""A model an entry is checked as (a wire model, or a slotted dataclass: a GPU's
readings, a process, an NVLink)."""
_ENTRIES: dict[tuple[_Entry, str], tuple[_Entry, str, int]] = {
    (Hello, "gpus"): (GpuInfo, "GPU", MAX_GPUS),
    (GpuInfo, "mig"): (MigInfo, "MIG slice", MAX_SLICES),
    (GpuSample, "mig"): (MigSample, "MIG slice", MAX_SLICES),
    (Sample, "gpus"): (GpuSample, "GPU", MAX_GPUS),
    (GpuSample, "processes"): (ProcessSample, "process", MAX_PROCESSES),
    (GpuSample, "nvlinks"): (NvLinkSample, "NVLink", NVLINK_MAX_LINKS),
    (Sample, "parents"): (Parent, "parent", MAX_PARENTS),
    (Jobs, "jobs"): (JobState, "job", MAX_JOBS),
}
# A bad value that must not read as its default: a GPU in a state this console does
# not know (a newer helper's "resetting", say) is not "ok".
_FALLBACKS: dict[tuple[_Entry, str], object] = {(GpuSample, "state"): "error"}
_REPAIR_ROUNDS = 6


class ProtocolError(ValueError):
    """A line from a helper that is not a valid message; the text says what was wrong."""


def decode_helper_line(line: str | bytes) -> Message | UnknownMessage:
    """Decode one line from a helper, or raise ``ProtocolError`` with a one-line reason.

    Bad values inside a message are repaired, not refused (see the module's doc). An
    object whose ``type`` is a string this client does not know is an
    ``UnknownMessage`` (its type cleaned and cut); a ``type`` that is not a string is
    refused.
    """
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(f"line of {len(line)} bytes is over the {MAX_LINE_BYTES} limit")
    failure: ValidationError | None = None
    if len(line) <= MODEL_FIRST_BYTES:
        try:
            return _HELPER_MESSAGE.validate_json(line)
        except ValidationError as exc:
            failure = exc  # its error list is costly on a big line: read only to refuse
    # A big line is cut first: 100,000 GPU entries are never all built as models
    # (nor 100,000 errors about them), only the first MAX_GPUS are.
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise _refusal(failure, line, exc) from None
    kind = data.get("type") if isinstance(data, dict) else None
    if not isinstance(kind, str):
        raise _refusal(failure, line)
    if kind not in _BY_TYPE:
        return UnknownMessage(type=clean(kind, 40) or "?")
    model = _BY_TYPE[kind]
    notes: list[str] = []
    _cut_entries(model, data, notes)
    for _ in range(_REPAIR_ROUNDS):
        try:
            message = _HELPER_MESSAGE.validate_python(data)
        except ValidationError as exc:
            failure = exc
        except RecursionError:
            raise ProtocolError("message nested too deeply") from None
        else:
            if notes and isinstance(message, Hello | Sample | Jobs):
                message = message.model_copy(update={"notes": _said_once(notes)})
            return message
        _repair(data, failure.errors(include_url=False), notes)
    raise _refusal(failure, line)


def _refusal(
    failure: ValidationError | None, line: str | bytes, exc: BaseException | None = None
) -> ProtocolError:
    if failure is None:  # a big line that is not a JSON object with a type
        why = "not JSON" if exc is not None else "not a message (no type)"
        return ProtocolError(clean(f"message: {why} in {clean(line, 60)!r}", 300))
    errors = failure.errors(include_url=False)
    error = errors[0] if errors else None
    where = ".".join(str(p) for p in error["loc"]) if error else ""
    message = error["msg"] if error else "invalid"
    snippet = clean(line, 60)
    return ProtocolError(clean(f"{where or 'message'}: {message} in {snippet!r}", 300))


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "message"


def _reason(error: ErrorDetails) -> str:
    """The error-map word for a pydantic error, in the spirit of NVML's names."""
    kind = str(error.get("type", ""))
    if kind == "finite_number":
        return "NotFinite"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return "OutOfRange"
    if kind == "too_long":
        return "TooMany"
    if kind.endswith(("_type", "_parsing")) or kind == "literal_error":
        return "WrongType"
    return "Invalid"


def _said_once(notes: list[str]) -> tuple[str, ...]:
    """The decoder's notes, each once, at most ``MAX_NOTES`` (the last counts the rest)."""
    unique = list(dict.fromkeys(notes))
    if len(unique) > MAX_NOTES:
        rest = len(unique) - MAX_NOTES + 1
        unique = [*unique[: MAX_NOTES - 1], f"and {rest} more problems"]
    return tuple(unique)


def _cut_entries(model: _Entry, obj: dict[str, Any], notes: list[str]) -> None:
    """Cut every list of entries to its cap before anything looks inside them."""
    for (owner, field), (entry_model, noun, cap) in _ENTRIES.items():
        if owner is not model:
            continue
        items = obj.get(field)
        if not isinstance(items, list):
            continue
        if len(items) > cap:
            notes.append(f"{len(items)} {noun} entries sent; kept the first {cap}")
            del items[cap:]
        for item in items:
            if isinstance(item, dict):
                _cut_entries(entry_model, item, notes)


def _repair(data: dict[str, Any], errors: list[ErrorDetails], notes: list[str]) -> None:
    """Mend ``data`` (parsed JSON) where pydantic found ``errors``; say what in ``notes``.

    A bad optional field is removed (it reads as ``null``) and named in its object's
    errors map; a bad required field drops the entry it identifies; a list over its
    cap is cut. A bad required field of the message itself raises ``ProtocolError``.
    """
    drops: dict[int, tuple[list[Any], set[int]]] = {}
    for error in errors:
        loc = tuple(error.get("loc", ()))
        model: _Entry = _BY_TYPE[data["type"]]
        obj: dict[str, Any] = data
        entry: tuple[list[Any], int, str] | None = None
        field: str | None = None
        i = 1  # loc[0] is the discriminator's tag
        while i < len(loc):
            part = loc[i]
            if not isinstance(part, str) or part not in wire_fields(model):
                break
            field = part
            nested = _ENTRIES.get((model, part))
            items = obj.get(part)
            if (
                nested is not None
                and i + 1 < len(loc)
                and isinstance(loc[i + 1], int)
                and isinstance(items, list)
                and 0 <= int(loc[i + 1]) < len(items)
            ):
                index = int(loc[i + 1])
                entry = (items, index, nested[1])
                field = None
                if i + 2 < len(loc) and isinstance(items[index], dict):
                    model, obj = nested[0], items[index]
                    i += 2
                    continue
            break
        reason = _reason(error)
        if field is None:
            # The entry itself is not an object: drop it.
            if entry is None:
                raise ProtocolError(clean(f"{_where(loc)}: {error['msg']}", 300))
            drops.setdefault(id(entry[0]), (entry[0], set()))[1].add(entry[1])
            notes.append(f"dropped {entry[2]} entry {entry[1]}: not an object")
            continue
        info = wire_fields(model)[field]
        value = obj.get(field)
        if reason == "TooMany" and isinstance(value, list):
            del value[MAX_THROTTLE_REASONS:]
            continue
        if reason == "TooMany" and isinstance(value, dict):
            obj[field] = dict(list(value.items())[:MAX_ERRORS])
            continue
        if not info.is_required():
            if field == "errors":
                # Keep the reasons that are text: the helper's and this pass's own.
                kept = value if isinstance(value, dict) else {}
                obj["errors"] = {k: v for k, v in kept.items() if isinstance(v, str)}
                continue
            fallback = _FALLBACKS.get((model, field))
            if fallback is None:
                obj.pop(field, None)
            else:
                obj[field] = fallback
            if "errors" in wire_fields(model):
                found = obj.get("errors")
                if not isinstance(found, dict):
                    obj["errors"] = found = {}
                if len(found) < MAX_ERRORS:
                    found[field] = reason
            continue
        if entry is None:
            raise ProtocolError(clean(f"{_where(loc)}: {error['msg']}", 300))
        drops.setdefault(id(entry[0]), (entry[0], set()))[1].add(entry[1])
        notes.append(f"dropped {entry[2]} entry {entry[1]}: {field}: {reason}")
    for items, indices in drops.values():
        for index in sorted(indices, reverse=True):
            del items[index]
