"""The telemetry deltas' round trip: for any sequence of a host's snapshots, the
deltas the head makes (each from the view it sent before) rebuild every snapshot
exactly on the console's side; a field that did not change is never sent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from gputui.scheduler.client.deltas import DeltaError, HostBook, diff, host_view
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.fields import wire_fields
from gputui.wire.messages import Event, GpuInfo, GpuSample, Hello, Parent, ProcessSample, Sample

_PROCESS: TypeAdapter[ProcessSample] = TypeAdapter(ProcessSample)

small = st.one_of(st.none(), st.integers(0, 100))
procs = st.lists(
    st.builds(
        ProcessSample,
        pid=st.integers(1, 50),
        uid=st.one_of(st.none(), st.integers(0, 3)),
        user=st.sampled_from([None, "alice", "bob"]),
        command=st.sampled_from(["", "python train.py", "a\tb ✓"]),
        gpu_mem_mib=small,
        start_ticks=small,
    ),
    max_size=3,
).map(tuple)


@st.composite
def gpu(draw: st.DrawFn, index: int) -> GpuSample:
    return GpuSample(
        index=index,
        uuid=f"GPU-{index}",
        state=draw(st.sampled_from(["ok", "lost"])),
        util_gpu=draw(small),
        mem_used_mib=draw(small),
        temp_c=draw(small),
        power_w=draw(st.one_of(st.none(), st.floats(0, 700, allow_nan=False))),
        throttle=draw(st.one_of(st.none(), st.just(("sw_power_cap",)))),
        health_read=draw(st.booleans()),
        remapped_correctable=draw(small),
        processes=draw(procs),
        errors=draw(st.sampled_from([{}, {"fan_pct": "NotSupported"}])),
    )


@st.composite
def snapshots(draw: st.DrawFn) -> HostSnapshot:
    count = draw(st.integers(0, 3))
    status = draw(st.sampled_from(list(HostStatus)))
    sample = None
    if draw(st.booleans()):
        sample = Sample(
            seq=draw(st.integers(0, 5)),
            time=draw(st.one_of(st.none(), st.floats(0, 1e9, allow_nan=False))),
            gpus=tuple(draw(gpu(i)) for i in range(count)),
            parents=draw(st.sampled_from([(), (Parent(pid=7, ppid=1, name="bash"),)])),
        )
    hello = draw(
        st.sampled_from(
            [
                None,
                Hello(protocol=1, helper_version="1", hostname="h"),
                Hello(
                    protocol=1,
                    helper_version="2",
                    hostname="h",
                    gpus=(GpuInfo(index=0, uuid="GPU-0", name="A100"),),
                ),
            ]
        )
    )
    events = draw(
        st.sampled_from([(), (Event(kind="xid", xid=79, gpu_index=0, text="fell off the bus"),)])
    )
    return HostSnapshot(
        name="gpu01",
        address="10.0.0.1",
        status=status,
        message=draw(st.sampled_from(["", "connection refused"])),
        pool=draw(st.sampled_from(["default", "a100"])),
        labels=draw(st.sampled_from([{}, {"rack": "r1"}])),
        hello=hello,
        sample=sample,
        received_at=draw(st.one_of(st.none(), st.floats(0, 1e9, allow_nan=False))),
        next_retry_at=draw(st.one_of(st.none(), st.floats(0, 1e9, allow_nan=False))),
        events=events,
        stale_after_s=draw(st.one_of(st.none(), st.floats(0, 60, allow_nan=False))),
        notes=draw(st.sampled_from([(), ("dropped 1 process",)])),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(snapshots(), min_size=1, max_size=6))
def test_applying_the_deltas_rebuilds_every_snapshot(sequence: list[HostSnapshot]) -> None:
    book, sent = HostBook(), None
    for snap in sequence:
        view = host_view(snap)
        delta = diff(snap.name, sent, view)
        sent = view
        if delta is None:  # nothing changed: nothing sent
            assert book.views(snap.name) == view
            continue
        rebuilt = book.apply(delta)
        assert rebuilt == snap
        assert book.views(snap.name) == view


@settings(max_examples=100, deadline=None)
@given(snapshots(), st.floats(0, 1e9, allow_nan=False))
def test_a_sample_that_changed_no_gpu_sends_no_gpu_field(snap: HostSnapshot, at: float) -> None:
    again = snap.with_changes(received_at=at)
    delta = diff(snap.name, host_view(snap), host_view(again))
    assert delta is None or set(delta) <= {"host", "top"}


def test_the_first_delta_carries_every_field_of_every_gpu() -> None:
    snap = HostSnapshot(
        name="h", address="h", sample=Sample(seq=1, gpus=(GpuSample(index=0, uuid="u"),))
    )
    delta = diff("h", None, host_view(snap))
    assert delta is not None
    assert delta["n"] == 1
    assert delta["gpus"]["0"] == host_view(snap).gpus[0]
    assert delta["procs"] == {"0": []}


@pytest.mark.parametrize(
    ("delta", "words"),
    [
        ({}, "without a host name"),
        ({"host": "h", "top": []}, "wrong shape"),
        ({"host": "h", "n": 65}, "out of range"),
        ({"host": "h", "n": True}, "out of range"),
        ({"host": "h", "gpus": {"3": {}}}, "which it does not have"),
        ({"host": "h", "n": 1, "gpus": {"0": {"util_gpu": 900}}}, "h: "),
        ({"host": "h", "top": {"status": "exploded"}}, "h: status"),
        ({"host": "h", "top": {"received_at": float("inf")}}, "h: received_at"),
    ],
)
def test_a_bad_delta_is_one_clear_error(delta: dict[str, object], words: str) -> None:
    with pytest.raises(DeltaError) as caught:
        HostBook().apply(delta)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_private_data_hides_other_users_process_commands_in_the_stream() -> None:
    from gputui.scheduler.head.privacy import HIDDEN, hide_commands
    from gputui.scheduler.server.peer import Caller

    mine = ProcessSample(pid=1, uid=1000, user="alice", command="python mine.py")
    theirs = ProcessSample(pid=2, uid=1001, user="bob", command="python secret.py")
    unknown = ProcessSample(pid=3, command="who knows")
    snap = HostSnapshot(
        name="h",
        address="h",
        sample=Sample(
            seq=1, gpus=(GpuSample(index=0, uuid="u", processes=(mine, theirs, unknown)),)
        ),
    )
    view = host_view(snap)
    alice = Caller(1000, "alice", "alice", frozenset(), admin=False)
    admin = Caller(1002, "carol", "carol", frozenset(), admin=True)
    commands = [p["command"] for p in hide_commands(view, alice, True).procs[0]]
    assert commands == ["python mine.py", HIDDEN, HIDDEN]
    assert hide_commands(view, admin, True) is view
    assert hide_commands(view, alice, False) is view


# A GPU's fields checked alone after a delta must come out as the whole GPU checked
# afresh: the same GPU, or a refusal both ways, for any values a head could send.
_ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=140),
    st.lists(st.one_of(st.text(max_size=8), st.integers(-2, 200)), max_size=3),
    st.dictionaries(
        st.text(max_size=12), st.one_of(st.text(max_size=12), st.integers()), max_size=2
    ),
)
_FIELD_NAMES = st.sampled_from(
    [*wire_fields(GpuSample), "processes", "not_a_field"],
)
_PROCESS_LISTS = st.one_of(
    procs.map(lambda listed: [_PROCESS.dump_python(p, mode="json") for p in listed]),
    st.lists(st.dictionaries(st.sampled_from(["pid", "uid", "user"]), _ANY_VALUE), max_size=2),
)
_GPU_DELTAS = st.fixed_dictionaries(
    {
        "fields": st.dictionaries(_FIELD_NAMES, _ANY_VALUE, max_size=4),
        "procs": st.one_of(st.none(), _PROCESS_LISTS),
        "gpu": st.integers(0, 1),
    }
)


def _afresh(book: HostBook, name: str) -> HostSnapshot | None:
    """What a new book makes of everything ``book`` was sent (None: it refuses it)."""
    view = book.views(name)
    assert view is not None
    delta = diff(name, None, view)
    assert delta is not None
    try:
        return HostBook().apply(delta)
    except DeltaError:
        return None


_WITH_A_PROCESS = GpuSample(index=0, uuid="GPU-0", processes=(ProcessSample(pid=3),))


@settings(max_examples=300, deadline=None)
@given(st.tuples(gpu(0), gpu(1)), st.lists(_GPU_DELTAS, min_size=1, max_size=8))
@example(  # a GPU's own fields naming ``processes``: its list still comes from ``procs``
    (_WITH_A_PROCESS, GpuSample(index=1, uuid="GPU-1")),
    [{"fields": {"processes": []}, "procs": None, "gpu": 0}],
)
def test_checking_only_the_changed_fields_equals_checking_the_gpu_afresh(
    gpus: tuple[GpuSample, GpuSample], deltas: list[dict[str, Any]]
) -> None:
    snap = HostSnapshot(name="h", address="h", sample=Sample(seq=1, gpus=gpus))
    book = HostBook()
    first = diff("h", None, host_view(snap))
    assert first is not None
    assert book.apply(first) == snap
    for step in deltas:
        delta: dict[str, Any] = {"host": "h", "gpus": {str(step["gpu"]): step["fields"]}}
        if step["procs"] is not None:
            delta["procs"] = {str(step["gpu"]): step["procs"]}
        try:
            got: HostSnapshot | None = book.apply(delta)
        except DeltaError as exc:
            assert "\n" not in str(exc)
            got = None
        assert got == _afresh(book, "h")


_PARENT_LISTS = st.one_of(
    st.just([]),
    st.lists(
        st.fixed_dictionaries(
            {"pid": st.integers(-1, 5), "ppid": st.integers(-1, 5), "name": st.text(max_size=4)}
        ),
        max_size=3,
    ),
    _ANY_VALUE,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_ANY_VALUE, _ANY_VALUE, _PARENT_LISTS), min_size=1, max_size=4))
def test_a_samples_own_fields_are_checked_as_the_model_checks_them(
    steps: list[tuple[Any, Any, Any]],
) -> None:
    book = HostBook()
    for seq, at, parents in steps:
        raw = {"seq": seq, "time": at, "parents": parents, "notes": []}
        try:
            got = book.apply({"host": "h", "top": {"sample": raw}}).sample
        except DeltaError:
            got = None
        try:
            listed = parents if isinstance(parents, list) else []
            want: Sample | None = Sample.model_validate({**raw, "parents": listed})
        except ValidationError:
            want = None
        assert got == want


_TOP_NAMES = st.sampled_from(
    [
        "address",
        "status",
        "message",
        "pool",
        "labels",
        "received_at",
        "next_retry_at",
        "stale_after_s",
        "notes",
        "not_a_field",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            _TOP_NAMES, _ANY_VALUE | st.sampled_from([s.value for s in HostStatus]), max_size=3
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_hosts_own_changed_fields_are_checked_as_checking_it_afresh(
    tops: list[dict[str, Any]],
) -> None:
    """Each delta changes the host's ``received_at``: only what changed is checked
    again, onto the fields as checked before, and that must be what checking the whole
    host gives (a bad field refused each time, until a delta mends it)."""
    snap = HostSnapshot(name="h", address="h", received_at=5.0, sample=Sample(seq=1))
    book = HostBook()
    first = diff("h", None, host_view(snap))
    assert first is not None
    assert book.apply(first) == snap
    for top in tops:
        try:
            got: HostSnapshot | None = book.apply({"host": "h", "top": top})
        except DeltaError as exc:
            assert "\n" not in str(exc)
            got = None
        assert got == _afresh(book, "h")
