"""Telemetry deltas: a host's snapshot as the head sends it to a console, and back.

The head keeps, for each subscribed console, the view of each host it last sent
(``HostView``: plain JSON values) and sends only what differs from it (``diff``): the
host's own fields that changed (status, message, the hello, events, the sample's
number and time ...), each GPU's fields that changed (one that did not is not sent),
and the process list of a GPU whose list changed. The first push of a subscription
is a diff from nothing: everything. The console keeps the same views (``HostBook``)
and rebuilds a ``HostSnapshot`` from them, checking again only the GPU fields that
changed (in one check, onto the GPU as decoded before), and so the host's own fields.

A host a console does not show (``summary_view``) is sent as the grid needs it and no
more: the host's fields and every GPU's readings, each process as its pid and user
(the PROCS and OWNERS columns, busy and free), without the processes' commands,
memory and start times, the parent chains or the health readings. Those come when
the console says it shows the host (``telemetry_view``).

GPUs are keyed by their place in the sample (``"0"``, ``"1"`` ...), which a host keeps
from sample to sample; ``n`` says how many there are when that changes. Pure: no I/O,
shared by the head (``diff``) and the console (``HostBook.apply``). What the head
sends is untrusted here like every wire message: a bad delta raises ``DeltaError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from typing_extensions import TypedDict  # pydantic's own: typing's before 3.12 it refuses

from gputui.common.text import clean
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.fields import MAX_GPUS, Epoch, Notes, Seconds, ShortText, unchecked, wire_fields
from gputui.wire.health import HealthReadings
from gputui.wire.messages import Event, GpuSample, Hello, Parent, ProcessSample, Sample

MAX_EVENTS = 256
"""Events kept per host in a delta (a host's snapshot keeps fewer)."""
MAX_LABELS = 64
_MISSING = object()


class DeltaError(ValueError):
    """A delta the console cannot apply (malformed, or about a GPU it never had)."""


@dataclass(frozen=True, slots=True)
class HostView:
    """A host's snapshot as plain JSON values: its own fields, and per GPU (by place in
    the sample) its fields and its process list."""

    top: Mapping[str, Any]
    gpus: tuple[Mapping[str, Any], ...] = ()
    procs: tuple[tuple[Mapping[str, Any], ...], ...] = ()


def host_view(snap: HostSnapshot) -> HostView:
    """``snap`` as plain values (its ``jobs`` stay with the head: they are the head's
    own runs, which the console reads from the head's state)."""
    sample = snap.sample
    top: dict[str, Any] = {
        "address": snap.address,
        "status": snap.status.value,
        "message": snap.message,
        "pool": snap.pool,
        "labels": dict(snap.labels),
        "received_at": snap.received_at,
        "next_retry_at": snap.next_retry_at,
        "stale_after_s": snap.stale_after_s,
        "notes": list(snap.notes),
        "hello": None if snap.hello is None else _hello_view(snap.hello),
        "events": [e.model_dump(mode="json") for e in snap.events],
        "sample": None,
    }
    if sample is None:
        return HostView(top)
    top["sample"] = {
        "seq": sample.seq,
        "time": sample.time,
        "parents": [p.model_dump(mode="json") for p in sample.parents],
        "notes": list(sample.notes),
    }
    gpus = tuple(_GPU.dump_python(g, mode="json", exclude={"processes"}) for g in sample.gpus)
    procs = tuple(tuple(map(_process_json, g.processes)) for g in sample.gpus)
    return HostView(top, gpus, procs)


_PROCESS: TypeAdapter[ProcessSample] = TypeAdapter(ProcessSample)
_GPU: TypeAdapter[GpuSample] = TypeAdapter(GpuSample)


def _process_json(process: ProcessSample) -> dict[str, Any]:
    """A process as plain values (what its model's ``model_dump`` was)."""
    view: dict[str, Any] = _PROCESS.dump_python(process, mode="json")
    return view


_HEALTH_DEFAULTS: dict[str, Any] = {
    name: info.get_default(call_default_factory=True)
    for name, info in wire_fields(HealthReadings).items()
}
"""The health readings as a sample without them has them (``health_read`` false)."""
_SUMMARY_PROCESS = ("pid", "user")
"""What a summary keeps of each process: enough to count them and name their users."""


def summary_view(view: HostView, every_s: float = 0.0) -> HostView:
    """``view`` as a console that does not show the host gets it: the grid's row of
    each GPU (its readings, its processes' pids and users) and nothing else. Sent only
    every ``every_s``, so its stale limit grows by that much: a summary's age between
    two of them is the cadence's, not the host's."""
    top = view.top
    limit = top.get("stale_after_s")
    if every_s and isinstance(limit, int | float) and not isinstance(limit, bool):
        top = {**top, "stale_after_s": limit + every_s}
    sample = top.get("sample")
    if isinstance(sample, dict) and sample.get("parents"):
        top = {**top, "sample": {**sample, "parents": []}}
    gpus = tuple(_summary_gpu(fields) for fields in view.gpus)
    procs = tuple(
        tuple({k: p[k] for k in _SUMMARY_PROCESS if k in p} for p in listed)
        for listed in view.procs
    )
    return HostView(top, gpus, procs)


def _summary_gpu(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    errors = fields.get("errors")
    if isinstance(errors, dict) and any(k in _HEALTH_DEFAULTS for k in errors):
        errors = {k: v for k, v in errors.items() if k not in _HEALTH_DEFAULTS}
    return {**fields, **_HEALTH_DEFAULTS, "errors": errors if errors is not None else {}}


def _hello_view(hello: Hello) -> dict[str, Any]:
    # ``notes`` by hand: the decoder's own field, whose plain validator leaves the
    # serializer unsure of its type (a warning on every dump).
    return {**hello.model_dump(mode="json", exclude={"notes"}), "notes": list(hello.notes)}


def diff(name: str, old: HostView | None, new: HostView) -> dict[str, Any] | None:
    """What turns ``old`` (None: nothing yet) into ``new``, for host ``name``; None when
    nothing changed."""
    out: dict[str, Any] = {}
    before_top: Mapping[str, Any] = {} if old is None else old.top
    top = {k: v for k, v in new.top.items() if before_top.get(k, _MISSING) != v}
    if top:
        out["top"] = top
    before_n = -1 if old is None else len(old.gpus)
    if before_n != len(new.gpus):
        out["n"] = len(new.gpus)
    gpus: dict[str, Any] = {}
    procs: dict[str, Any] = {}
    for i, fields in enumerate(new.gpus):
        base: Mapping[str, Any] = old.gpus[i] if old is not None and i < len(old.gpus) else {}
        changed = {k: v for k, v in fields.items() if base.get(k, _MISSING) != v}
        if changed:
            gpus[str(i)] = changed
        had = old.procs[i] if old is not None and i < len(old.procs) else None
        if had is None or had != new.procs[i]:
            procs[str(i)] = list(new.procs[i])
    if gpus:
        out["gpus"] = gpus
    if procs:
        out["procs"] = procs
    if not out:
        return None
    return {"host": name, **out}


class _Top(BaseModel):
    """A host's own fields as a delta carries them (checked: the head is a peer)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    address: ShortText = ""
    status: HostStatus = HostStatus.CONNECTING
    message: Annotated[str, Field(max_length=4096)] = ""
    pool: ShortText = "default"
    labels: Annotated[dict[ShortText, ShortText], Field(max_length=MAX_LABELS)] = {}
    received_at: Epoch | None = None
    next_retry_at: Epoch | None = None
    stale_after_s: Seconds | None = None
    notes: Notes = ()


@dataclass(slots=True)
class _Host:
    top: dict[str, Any] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    procs: list[list[Any]] = field(default_factory=list)
    decoded: list[GpuSample | None] = field(default_factory=list)
    changed: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Place -> the fields (and ``processes``) deltas changed since the GPU was last
    decoded: checked without the rest (``_GPU_FIELDS``) onto the GPU as decoded before."""
    top_model: _Top | None = None
    """``top`` checked (None: checked whole next, as after a field that failed)."""
    top_changed: dict[str, Any] = field(default_factory=dict)
    """The host's own fields deltas changed since ``top_model``: checked without the
    rest, onto it (each delta changes ``received_at``)."""
    hello: tuple[Any, Hello | None] = (None, None)
    events: tuple[Any, tuple[Event, ...]] = (None, ())
    parents: tuple[Any, tuple[Parent, ...]] = (None, ())


class HostBook:
    """The console's side: each host's views as the head sent them, and the snapshot
    rebuilt from them after each delta."""

    def __init__(self) -> None:
        self._hosts: dict[str, _Host] = {}

    def views(self, name: str) -> HostView | None:
        """Host ``name`` as the deltas so far left it (for tests: equals the head's)."""
        host = self._hosts.get(name)
        if host is None:
            return None
        return HostView(
            dict(host.top),
            tuple(dict(g) for g in host.gpus),
            tuple(tuple(p) for p in host.procs),
        )

    def apply(self, delta: Any) -> HostSnapshot:
        """Apply one host's delta; the host's snapshot as it now stands."""
        if not isinstance(delta, dict) or not isinstance(delta.get("host"), str):
            raise DeltaError("a telemetry delta without a host name")
        name = clean(delta["host"], 128)
        host = self._hosts.setdefault(name, _Host())
        top, n = delta.get("top", {}), delta.get("n")
        gpus, procs = delta.get("gpus", {}), delta.get("procs", {})
        if not isinstance(top, dict) or not isinstance(gpus, dict) or not isinstance(procs, dict):
            raise DeltaError(f"{name}: a telemetry delta of the wrong shape")
        host.top.update(top)
        if host.top_model is not None:
            host.top_changed.update((k, v) for k, v in top.items() if k in _TOP_KEYS)
        if n is not None:
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_GPUS:
                raise DeltaError(f"{name}: GPU count {str(n)[:20]!r} out of range")
            del host.gpus[n:], host.procs[n:], host.decoded[n:]
            while len(host.gpus) < n:
                host.gpus.append({})
                host.procs.append([])
                host.decoded.append(None)
        for key, fields in gpus.items():
            i = _place(name, key, len(host.gpus))
            if not isinstance(fields, dict):
                raise DeltaError(f"{name}: GPU {i}'s fields are not an object")
            host.gpus[i].update(fields)
            if host.decoded[i] is not None:
                changed = host.changed.setdefault(i, {})
                changed.update(fields)  # keys of no field: left out by the check
                if "processes" in fields:  # a GPU's processes come apart (``procs``)
                    changed["processes"] = host.procs[i]
        for key, listed in procs.items():
            i = _place(name, key, len(host.gpus))
            if not isinstance(listed, list):
                raise DeltaError(f"{name}: GPU {i}'s processes are not a list")
            host.procs[i] = listed
            if host.decoded[i] is not None:
                host.changed.setdefault(i, {})["processes"] = listed
        return self._snapshot(name, host)

    def _snapshot(self, name: str, host: _Host) -> HostSnapshot:
        try:
            top = host.top_model
            if top is None:
                top = _Top.model_validate(host.top)
            elif host.top_changed:
                host.top_model = None  # until the fields pass
                top = top.model_copy(update=_TOP_FIELDS.validate_python(host.top_changed))
            host.top_changed.clear()
            host.top_model = top
            if host.changed:
                _patch(name, host)
            for i, known in enumerate(host.decoded):
                if known is None:  # its processes validated with it, in the same call
                    fields = {**host.gpus[i], "processes": host.procs[i]}
                    host.decoded[i] = _GPU.validate_python(fields)
            sample = _sample(name, host)
            hello = _hello(host)
            events = _events(host)
        except ValidationError as exc:
            raise DeltaError(f"{name}: {_first(exc)}") from None
        return HostSnapshot(
            name=name,
            address=top.address,
            status=top.status,
            message=top.message,
            pool=top.pool,
            labels=top.labels,
            hello=hello,
            sample=sample,
            received_at=top.received_at,
            next_retry_at=top.next_retry_at,
            events=events,
            stale_after_s=top.stale_after_s,
            notes=top.notes,
        )


class _Checks(Protocol):
    def validate_python(self, value: Any, /) -> Any: ...


def _partial(title: str, fields: Mapping[str, FieldInfo]) -> _Checks:
    """A check of some of ``fields`` at once (a dict of them): each as its model checks
    it (its type and constraints, ``Field(ge=...)``, ``Strict``), all in one call. Keys
    of no field are left out, as the models ignore them. A delta changes a few fields
    of a GPU or of a host, and only those are checked again."""
    kinds: dict[str, Any] = {}
    for key, info in fields.items():
        kind = info.annotation
        kinds[key] = Annotated[(kind, *info.metadata)] if info.metadata else kind
    partial: Any = TypedDict(title, kinds, total=False)  # type: ignore[misc]
    return TypeAdapter(partial).validator


_GPU_FIELDS = _partial("GpuChange", wire_fields(GpuSample))
"""A GPU's fields a delta changed (``GpuSample`` has no check across fields)."""
_TOP_FIELDS = _partial("TopChange", _Top.model_fields)
"""A host's own fields a delta changed (``_Top`` has no check across fields either)."""
_TOP_KEYS = frozenset(_Top.model_fields)


def _patch(name: str, host: _Host) -> None:
    """Check each GPU's changed fields alone, onto its fields as decoded before. One
    that fails is left undecoded (checked whole next time, and failing again there)."""
    while host.changed:
        i, changed = host.changed.popitem()
        known = host.decoded[i] if i < len(host.decoded) else None
        if known is None:  # dropped (fewer GPUs), or checked whole in ``_snapshot``
            continue
        host.decoded[i] = None  # until its fields pass
        host.decoded[i] = unchecked(known, **_check(name, _GPU_FIELDS, changed))


def _place(name: str, key: Any, count: int) -> int:
    if not isinstance(key, str) or not key.isdigit() or int(key) >= count:
        raise DeltaError(f"{name}: a delta for GPU {str(key)[:20]!r}, which it does not have")
    return int(key)


def _notes(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(clean(str(n), 128) for n in raw[:16])


_SAMPLE_FIELDS = _partial(
    "SampleChange", {key: Sample.model_fields[key] for key in ("seq", "time", "parents")}
)
"""The fields of a ``Sample`` a delta brings (its GPUs are checked already, and
``notes`` are the console's own, from ``_notes``)."""


def _sample(name: str, host: _Host) -> Sample | None:
    raw = host.top.get("sample")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DeltaError(f"{name}: a sample that is not an object")
    parents = raw.get("parents", [])
    if not isinstance(parents, list):
        parents = []
    if host.parents[0] != parents:  # most samples' chains are the last one's
        host.parents = (parents, _check(name, _SAMPLE_FIELDS, {"parents": parents})["parents"])
    checked = _check(name, _SAMPLE_FIELDS, {"seq": raw.get("seq"), "time": raw.get("time")})
    return Sample.model_construct(
        seq=checked["seq"],
        time=checked["time"],
        gpus=tuple(cast(list[GpuSample], host.decoded)),  # each decoded by now
        parents=host.parents[1],
        notes=_notes(raw.get("notes")),
    )


def _check(name: str, fields: _Checks, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` checked by ``fields`` (a ``_partial``); a bad one raises ``DeltaError``."""
    try:
        checked: dict[str, Any] = fields.validate_python(values)
    except ValidationError as exc:
        raise DeltaError(f"{name}: {_first(exc)}") from None
    return checked


def _hello(host: _Host) -> Hello | None:
    raw = host.top.get("hello")
    if host.hello[0] is raw:
        return host.hello[1]
    hello = None
    if raw is not None:
        hello = Hello.model_validate(raw)
        hello = hello.model_copy(update={"notes": _notes(raw.get("notes"))})
    host.hello = (raw, hello)
    return hello


def _events(host: _Host) -> tuple[Event, ...]:
    raw = host.top.get("events")
    if host.events[0] is raw:
        return host.events[1]
    listed = raw if isinstance(raw, list) else []
    events = tuple(Event.model_validate(e) for e in listed[-MAX_EVENTS:])
    host.events = (raw, events)
    return events


def _first(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid"
    where = ".".join(str(p) for p in errors[0].get("loc", ()))
    return clean(f"{where}: {errors[0].get('msg', 'invalid')}", 200)
