"""Decoding generated hostile helper output: never a crash, never a bad value through."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from typing import Any

import hostile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gputui.wire.chains import chain, parent_index
from gputui.wire.decode import ProtocolError, decode_helper_line
from gputui.wire.fields import wire_fields
from gputui.wire.messages import (
    MAX_ANCESTORS,
    MAX_GPUS,
    MAX_NOTES,
    MAX_PARENTS,
    MAX_PROCESSES,
    NVLINK_MAX_LINKS,
    Event,
    GpuSample,
    Hello,
    Sample,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def walk(value: Any) -> Any:
    """Every leaf of a decoded model (strings, numbers, keys)."""
    if isinstance(value, BaseModel) or dataclasses.is_dataclass(value):
        for name in wire_fields(type(value)):
            yield from walk(getattr(value, name))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from walk(item)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from walk(item)
    else:
        yield value


def assert_sound(message: Any) -> None:
    for leaf in walk(message):
        if isinstance(leaf, str):
            assert hostile.is_safe_text(leaf), repr(leaf)
            assert len(leaf) <= 4 * 512
        elif isinstance(leaf, float):
            assert math.isfinite(leaf)
    gpus = getattr(message, "gpus", ())
    assert len(gpus) <= MAX_GPUS
    for gpu in gpus:
        assert 0 <= gpu.index < MAX_GPUS
        if isinstance(gpu, GpuSample):
            assert len(gpu.processes) <= MAX_PROCESSES
            for name in ("util_gpu", "util_mem", "fan_pct"):
                value = getattr(gpu, name)
                assert value is None or 0 <= value <= 100
            assert gpu.temp_c is None or -40 <= gpu.temp_c <= 200
            assert gpu.power_w is None or 0 <= gpu.power_w <= 10_000
            for proc in gpu.processes:
                assert 1 <= proc.pid <= 2**22
                assert proc.start_time is None or 0 <= proc.start_time <= 1e10
                assert proc.ppid is None or 0 <= proc.ppid <= 2**22
            assert_health_sound(gpu)
        else:
            for name in ("temp_slowdown_c", "temp_shutdown_c"):
                value = getattr(gpu, name)
                assert value is None or -40 <= value <= 200
    if isinstance(message, Sample):
        assert_parents_sound(message)
    if isinstance(message, Hello):
        assert message.boot_time is None or 0 <= message.boot_time <= 1e10
    for job in getattr(message, "jobs", ()):
        assert 1 <= job.job_id <= 2**53
        assert job.exit_code is None or 0 <= job.exit_code <= 255
        assert job.state in ("starting", "running", "exited", "failed-to-start", "lost", "unknown")
    assert len(getattr(message, "notes", ())) <= MAX_NOTES
    if isinstance(message, Event | Sample):
        assert message.time is None or 0 <= message.time <= 1e10


def assert_parents_sound(message: Sample) -> None:
    """The parent table is capped and in range, and every chain built from it is
    loop-free, capped, and follows the table link by link."""
    assert len(message.parents) <= MAX_PARENTS
    for parent in message.parents:
        assert 1 <= parent.pid <= 2**22 and 0 <= parent.ppid <= 2**22
        assert len(parent.name) <= 128
    index = parent_index(message.parents)
    for gpu in message.gpus:
        for proc in gpu.processes:
            found = chain(proc.pid, proc.ppid, index)
            pids = [p.pid for p in found]
            assert len(found) <= MAX_ANCESTORS
            assert len(set(pids)) == len(pids) and proc.pid not in pids
            assert [proc.ppid, *(p.ppid for p in found)][: len(found)] == pids


HEALTH_COUNTS = (
    "remapped_correctable",
    "remapped_uncorrectable",
    "retired_sbe",
    "retired_dbe",
    "ecc_corrected_total",
    "ecc_uncorrected_total",
    "pcie_replays",
)
HEALTH_FLAGS = ("health_read", "remap_pending", "remap_failed", "retired_pending", "persistence")


def assert_health_sound(gpu: GpuSample) -> None:
    """The health readings: counts in range, flags real bools, links few and numbered."""
    assert isinstance(gpu.health_read, bool)
    for name in HEALTH_COUNTS:
        value = getattr(gpu, name)
        assert value is None or (type(value) is int and 0 <= value <= 2**63 - 1), (name, value)
    for name in HEALTH_FLAGS[1:]:
        assert getattr(gpu, name) in (None, True, False), name
    assert gpu.fabric_state in (None, "not-supported", "not-started", "in-progress", "completed")
    if gpu.nvlinks is not None:
        assert len(gpu.nvlinks) <= NVLINK_MAX_LINKS
        for link in gpu.nvlinks:
            assert 0 <= link.link < NVLINK_MAX_LINKS
            assert link.active in (None, True, False)
            for name in ("replay_errors", "recovery_errors", "crc_flit_errors", "crc_data_errors"):
                value = getattr(link, name)
                assert value is None or 0 <= value <= 2**63 - 1


@SETTINGS
@given(hostile.message())
def test_decode_raises_only_protocol_error_and_lets_nothing_bad_through(obj: Any) -> None:
    try:
        message = decode_helper_line(hostile.line(obj))
    except ProtocolError as exc:
        assert hostile.is_safe_text(str(exc)) and "\n" not in str(exc)
        return
    assert_sound(message)


@SETTINGS
@given(hostile.sample(seq=st.integers(0, 10**9)))
def test_a_sample_that_knows_its_number_is_always_kept(obj: dict[str, Any]) -> None:
    """Bad values inside a sample are mended, not a reason to drop the session."""
    message = decode_helper_line(hostile.line(obj))
    assert isinstance(message, Sample)
    assert_sound(message)


@SETTINGS
@given(hostile.any_json)
def test_any_json_at_all_is_a_message_or_a_protocol_error(obj: Any) -> None:
    with contextlib.suppress(ProtocolError):
        assert_sound(decode_helper_line(hostile.line(obj)))


def gpu(**fields: Any) -> dict[str, Any]:
    return {"index": 0, "uuid": "GPU-0", **fields}


def decode_sample(*gpus: dict[str, Any], **top: Any) -> Sample:
    message = decode_helper_line(
        json.dumps({"type": "sample", "seq": 1, "time": 1.7e9, "gpus": list(gpus), **top})
    )
    assert isinstance(message, Sample)
    return message


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("temp_c", -300, "OutOfRange"),
        ("temp_c", "hot", "WrongType"),
        ("util_gpu", 150, "OutOfRange"),
        ("power_w", 1e30, "OutOfRange"),
        ("power_w", float("nan"), "NotFinite"),
        ("power_w", True, "WrongType"),
        ("fan_pct", "50", "WrongType"),
        ("mem_used_mib", -1, "OutOfRange"),
        ("ecc_uncorrected", 2**64, "OutOfRange"),
        ("throttle", [1, 2], "WrongType"),
    ],
)
def test_a_bad_value_is_not_available_with_its_reason(name: str, value: Any, reason: str) -> None:
    readings = {"temp_c": 40, "util_gpu": 10, "power_w": 100.0}
    good = decode_sample(gpu(**readings)).gpus[0]
    mended = decode_sample(gpu(**{**readings, name: value})).gpus[0]
    assert getattr(mended, name) is None
    assert mended.errors[name] == reason
    # The other fields are untouched.
    for other in ("temp_c", "util_gpu", "power_w"):
        if other != name:
            assert getattr(mended, other) == getattr(good, other)


def test_non_finite_and_far_times_become_unknown() -> None:
    process = {"pid": 7, "start_time": float("nan")}
    message = decode_sample(gpu(processes=[process]), time=1e308)
    assert message.time is None
    assert message.gpus[0].processes[0].start_time is None
    assert message.gpus[0].processes[0].errors == {"start_time": "NotFinite"}
    event = decode_helper_line(json.dumps({"type": "event", "time": 1e308, "kind": "xid"}))
    assert isinstance(event, Event) and event.time is None


def test_an_entry_with_a_bad_identity_is_dropped_alone_with_a_note() -> None:
    message = decode_sample(
        gpu(index=10**9), gpu(index=1, uuid="GPU-1", processes=[{"pid": -5}, {"pid": 9}])
    )
    assert [g.index for g in message.gpus] == [1]
    assert [p.pid for p in message.gpus[0].processes] == [9]
    assert "dropped GPU entry 0: index: OutOfRange" in message.notes
    assert "dropped process entry 0: pid: OutOfRange" in message.notes


def test_sizes_are_capped_with_a_note() -> None:
    many = [gpu(index=i % MAX_GPUS, uuid=f"GPU-{i}") for i in range(100_000)]
    message = decode_helper_line(
        json.dumps(
            {"type": "hello", "protocol": 1, "helper_version": "x", "hostname": "h", "gpus": many}
        )
    )
    assert isinstance(message, Hello)
    assert len(message.gpus) == MAX_GPUS
    assert message.notes == (f"100000 GPU entries sent; kept the first {MAX_GPUS}",)
    procs = [{"pid": 1 + i} for i in range(100_000)]
    sample = decode_sample(gpu(processes=procs))
    assert len(sample.gpus[0].processes) == MAX_PROCESSES
    assert sample.notes == (f"100000 process entries sent; kept the first {MAX_PROCESSES}",)


@pytest.mark.parametrize("kind", [[], {}, 5, None, True])
def test_a_type_that_is_not_a_string_is_a_protocol_error(kind: Any) -> None:
    with pytest.raises(ProtocolError, match=r"^message: "):
        decode_helper_line(json.dumps({"type": kind, "seq": 1}))


def test_a_message_without_its_own_identity_is_refused_in_one_line() -> None:
    with pytest.raises(ProtocolError, match="seq"):
        decode_helper_line(json.dumps({"type": "sample", "seq": float("nan")}))
    with pytest.raises(ProtocolError):
        decode_helper_line("[" * 100_000)
    with pytest.raises(ProtocolError):
        decode_helper_line(json.dumps({"type": "event", "kind": {"a": 1}}))


def test_a_bad_errors_map_loses_only_its_bad_entries() -> None:
    bad = gpu(errors={"fan_pct": "NotSupported", "power_w": 5}, temp_c=-300)
    assert decode_sample(bad).gpus[0].errors == {"fan_pct": "NotSupported", "temp_c": "OutOfRange"}


def test_a_state_this_console_does_not_know_is_an_error_not_ok() -> None:
    mended = decode_sample(gpu(state="resetting")).gpus[0]
    assert mended.state == "error" and mended.errors == {"state": "WrongType"}


HEALTH_NAMES = sorted(set(hostile.HEALTH_FIELDS) - {"nvlinks"})


@SETTINGS
@given(st.dictionaries(st.sampled_from(HEALTH_NAMES), hostile.any_json, min_size=1))
def test_hostile_health_readings_are_mended_and_the_gpu_kept(bad: dict[str, Any]) -> None:
    """Whatever a helper puts in the health fields, the GPU stays with its other readings;
    a value that is not one becomes unknown with its reason."""
    (mended,) = decode_sample(gpu(temp_c=40, util_gpu=7, **bad)).gpus
    assert (mended.temp_c, mended.util_gpu) == (40, 7)
    assert_health_sound(mended)
    assert_sound(mended)
    for name, sent in bad.items():
        got = getattr(mended, name)
        if name in mended.errors:
            assert got is (False if name == "health_read" else None), (name, sent, got)
            assert mended.errors[name] in ("OutOfRange", "WrongType", "NotFinite", "Invalid")
        elif name != "fabric_status":  # text: cleaned, so not always what was sent
            assert got == sent and type(got) is type(sent), (name, sent, got)


@SETTINGS
@given(st.lists(hostile.any_json | hostile.nvlink(3), max_size=24))
def test_hostile_nvlink_lists_keep_only_sound_links(links: list[Any]) -> None:
    (mended,) = decode_sample(gpu(temp_c=40, nvlinks=links)).gpus
    assert mended.temp_c == 40
    assert_health_sound(mended)
    assert_sound(mended)
    # Each link is an entry of its own: only those that are not a numbered link go.
    sound = [
        entry["link"]
        for entry in links[:NVLINK_MAX_LINKS]
        if isinstance(entry, dict)
        and type(entry.get("link")) is int
        and 0 <= entry["link"] < NVLINK_MAX_LINKS
    ]
    assert mended.nvlinks is not None
    assert [link.link for link in mended.nvlinks] == sound


def sound_parent(entry: Any) -> bool:
    """Whether a parent-table entry passes as sent (the decoder keeps exactly these)."""
    return (
        isinstance(entry, dict)
        and type(entry.get("pid")) is int
        and 1 <= entry["pid"] <= 2**22
        and type(entry.get("ppid")) is int
        and 0 <= entry["ppid"] <= 2**22
        and isinstance(entry.get("name"), str)
    )


@SETTINGS
@given(
    st.integers(1, 2**22),
    hostile.any_json | st.integers(-(2**23), 2**23),
    st.lists(hostile.any_json | hostile.parent(), max_size=12) | hostile.any_json,
)
def test_a_process_tree_is_kept_where_sound_and_never_costs_the_process(
    pid: int, ppid: Any, parents: Any
) -> None:
    """The parent pid and the sample's parent table are optional: a bad ppid goes
    (with an errors entry), a bad table entry is dropped alone (with a note), the
    process stays; every pid kept is in range, every name cleaned and capped."""
    process = {"pid": pid, "command": "python train.py", "ppid": ppid}
    message = decode_sample(gpu(processes=[process]), parents=parents)
    assert_sound(message)
    (kept,) = message.gpus[0].processes
    assert kept.pid == pid and kept.command == "python train.py"
    if isinstance(ppid, int) and not isinstance(ppid, bool) and 0 <= ppid <= 2**22:
        assert kept.ppid == ppid
    elif ppid is not None:
        assert kept.ppid is None and kept.errors["ppid"] in ("OutOfRange", "WrongType")
    entries = parents if isinstance(parents, list) else []
    sound = [p for p in entries if sound_parent(p)]
    assert [(p.pid, p.ppid) for p in message.parents] == [(p["pid"], p["ppid"]) for p in sound]
    if len(sound) < len(entries):
        assert any("parent entry" in note for note in message.notes)


def test_an_older_helper_sends_no_tree() -> None:
    message = decode_sample(gpu(processes=[{"pid": 7, "command": "x"}]))
    assert message.gpus[0].processes[0].ppid is None and message.parents == ()


def test_a_parent_shared_by_processes_on_two_gpus_is_sent_once_and_used_by_both() -> None:
    parents = [
        {"pid": 100, "ppid": 50, "name": "torchrun\x1b[2J"},
        {"pid": 50, "ppid": 1, "name": "bash"},
        {"pid": 1, "ppid": 0, "name": "systemd"},
    ]
    message = decode_sample(
        gpu(processes=[{"pid": 7, "ppid": 100}]),
        gpu(index=1, uuid="GPU-1", processes=[{"pid": 8, "ppid": 100}]),
        parents=parents,
    )
    index = parent_index(message.parents)
    chains = [chain(g.processes[0].pid, g.processes[0].ppid, index) for g in message.gpus]
    assert [[p.pid for p in c] for c in chains] == [[100, 50, 1], [100, 50, 1]]
    assert chains[0][0].name == "torchrun" and chains[0][0] is chains[1][0]


def test_a_loop_in_the_table_is_cut_and_a_long_chain_capped() -> None:
    loop = [{"pid": 100, "ppid": 101, "name": "a"}, {"pid": 101, "ppid": 100, "name": "b"}]
    index = parent_index(decode_sample(parents=loop).parents)
    assert [p.pid for p in chain(7, 100, index)] == [100, 101]
    back = parent_index(decode_sample(parents=[{"pid": 100, "ppid": 7, "name": "a"}]).parents)
    assert [p.pid for p in chain(7, 100, back)] == [100]  # its own pid above it: cut
    self_loop = [{"pid": 100, "ppid": 100, "name": "a"}]
    assert [
        p.pid for p in chain(7, 100, parent_index(decode_sample(parents=self_loop).parents))
    ] == [100]
    long = [{"pid": 100 + i, "ppid": 101 + i, "name": f"p{i}"} for i in range(MAX_ANCESTORS + 3)]
    index = parent_index(decode_sample(parents=long).parents)
    assert [p.pid for p in chain(7, 100, index)] == list(range(100, 100 + MAX_ANCESTORS))
    assert chain(7, 999, index) == [] and chain(7, 0, index) == [] and chain(7, None, index) == []


def test_a_pid_named_twice_keeps_its_first_entry_and_a_bad_one_goes_alone() -> None:
    parents = [
        {"pid": 100, "ppid": 50, "name": "first"},
        {"pid": 100, "ppid": 60, "name": "second"},
        {"pid": 50, "ppid": -3, "name": "bad ppid"},
        {"pid": 60, "ppid": 1, "name": "kept"},
        "not an object",
    ]
    message = decode_sample(parents=parents)
    assert [p.name for p in message.parents] == ["first", "second", "kept"]
    assert any("parent entry 2: ppid: OutOfRange" in note for note in message.notes)
    assert [p.name for p in chain(7, 100, parent_index(message.parents))] == ["first"]


def test_an_over_long_table_is_cut_with_a_note() -> None:
    parents = [{"pid": 1 + i, "ppid": 0, "name": "x"} for i in range(MAX_PARENTS + 5)]
    message = decode_sample(parents=parents)
    assert len(message.parents) == MAX_PARENTS
    assert any(f"{MAX_PARENTS + 5} parent entries" in note for note in message.notes)
