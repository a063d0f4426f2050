"""The decoder's repair path, edge by edge: every range ends where the docs say, every
cap keeps exactly its cap, and each repair touches only what was wrong.

Written against a mutation pass over ``gputui/wire/messages.py``: each test here fails
for at least one small change to the decoder that the broader suites let through.
"""

from __future__ import annotations

import json
import re
from typing import Any

import hostile
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from gputui.wire.decode import ProtocolError, decode_helper_line
from gputui.wire.messages import (
    MAX_ERRORS,
    MAX_GPUS,
    MAX_LINE_BYTES,
    MAX_NOTES,
    MAX_THROTTLE_REASONS,
    Event,
    GpuInfo,
    GpuSample,
    Hello,
    HelperError,
    NvLinkSample,
    ProcessSample,
    Sample,
    UnknownMessage,
)

BIG = 2**63 - 1


def gpu(**fields: Any) -> dict[str, Any]:
    return {"index": 0, "uuid": "GPU-0", **fields}


def decode_sample(*gpus: Any, **top: Any) -> Sample:
    message = decode_helper_line(
        json.dumps({"type": "sample", "seq": 1, "gpus": list(gpus), **top})
    )
    assert isinstance(message, Sample)
    return message


def decode_hello(*gpus: dict[str, Any]) -> Hello:
    obj = {"type": "hello", "protocol": 1, "helper_version": "x", "hostname": "h", "gpus": gpus}
    message = decode_helper_line(json.dumps(obj))
    assert isinstance(message, Hello)
    return message


def decoded_with(where: str, name: str, value: Any) -> tuple[Any, dict[str, str] | None]:
    """The object that holds ``name`` after decoding ``value`` there, and its errors map."""
    if where == "gpu":
        obj: Any = decode_sample(gpu(**{name: value})).gpus[0]
        assert isinstance(obj, GpuSample)
    elif where == "process":
        obj = decode_sample(gpu(processes=[{"pid": 7, name: value}])).gpus[0].processes[0]
        assert isinstance(obj, ProcessSample)
    elif where == "info":
        obj = decode_hello(gpu(**{name: value})).gpus[0]
        assert isinstance(obj, GpuInfo)
    elif where == "hello":
        raw = {"type": "hello", "protocol": 1, "helper_version": "x", "hostname": "h", name: value}
        obj = decode_helper_line(json.dumps(raw))
        assert isinstance(obj, Hello)
    elif where == "nvlink":
        obj = decode_sample(gpu(nvlinks=[{"link": 2, name: value}])).gpus[0].nvlinks[0]
        assert isinstance(obj, NvLinkSample)
    else:
        obj = decode_helper_line(json.dumps({"type": "event", "kind": "xid", name: value}))
        assert isinstance(obj, Event)
    return obj, getattr(obj, "errors", None)


# (where, field, lowest, highest): the documented range of every number in the protocol.
RANGES = [
    ("gpu", "util_gpu", 0, 100),
    ("gpu", "fan_pct", 0, 100),
    ("gpu", "mem_used_mib", 0, 2**24),
    ("gpu", "temp_c", -40, 200),
    ("gpu", "clock_sm_mhz", 0, 100_000),
    ("gpu", "pcie_gen", 0, 16),
    ("gpu", "pcie_width", 0, 64),
    ("gpu", "ecc_corrected", 0, BIG),
    ("gpu", "power_w", 0, 10_000),
    ("process", "uid", 0, 2**32 - 2),
    ("process", "gpu_mem_mib", 0, 2**24),
    ("process", "start_time", 0, 1e10),
    ("gpu", "remapped_correctable", 0, BIG),
    ("gpu", "remapped_uncorrectable", 0, BIG),
    ("gpu", "retired_sbe", 0, BIG),
    ("gpu", "retired_dbe", 0, BIG),
    ("gpu", "ecc_corrected_total", 0, BIG),
    ("gpu", "ecc_uncorrected_total", 0, BIG),
    ("gpu", "pcie_replays", 0, BIG),
    ("nvlink", "replay_errors", 0, BIG),
    ("nvlink", "crc_flit_errors", 0, BIG),
    ("nvlink", "crc_data_errors", 0, BIG),
    ("nvlink", "recovery_errors", 0, BIG),
    ("info", "temp_slowdown_c", -40, 200),
    ("info", "temp_shutdown_c", -40, 200),
    ("hello", "boot_time", 0, 1e10),
    ("info", "pcie_max_gen", 0, 16),
    ("info", "power_limit_w", 0, 10_000),
    ("event", "xid", 0, 100_000),
    ("event", "gpu_index", 0, MAX_GPUS - 1),
    ("event", "time", 0, 1e10),
]


def beyond(value: float, step: int) -> float:
    return value + step if isinstance(value, int) else value * (1 + step * 1e-9) + step


@pytest.mark.parametrize(("where", "name", "low", "high"), RANGES)
def test_every_number_is_kept_up_to_its_limits_and_refused_one_past(
    where: str, name: str, low: float, high: float
) -> None:
    for good in (low, high):
        obj, errors = decoded_with(where, name, good)
        assert getattr(obj, name) == good
        assert not errors
    for bad in (beyond(low, -1), beyond(high, 1)):
        obj, errors = decoded_with(where, name, bad)
        assert getattr(obj, name) is None, bad
        if errors is not None:
            assert errors == {name: "OutOfRange"}


@pytest.mark.parametrize(("where", "name", "low", "high"), RANGES)
@pytest.mark.parametrize("value", [True, "1", [1]])
def test_a_bool_a_numeric_string_or_a_list_is_not_a_number(
    where: str, name: str, low: float, high: float, value: Any
) -> None:
    obj, errors = decoded_with(where, name, value)
    assert getattr(obj, name) is None
    if errors is not None:
        assert errors == {name: "WrongType"}


@pytest.mark.parametrize(
    ("where", "name"),
    [
        ("info", "mig_mode"),
        ("gpu", "remap_pending"),
        ("gpu", "remap_failed"),
        ("gpu", "retired_pending"),
        ("gpu", "persistence"),
        ("nvlink", "active"),
    ],
)
@pytest.mark.parametrize("value", [1, "yes", "true"])
def test_a_flag_is_a_json_bool_only(where: str, name: str, value: Any) -> None:
    obj, errors = decoded_with(where, name, value)
    assert getattr(obj, name) is None
    assert errors == {name: "WrongType"}


def test_a_health_read_flag_that_is_not_a_bool_reads_as_no_health_reading() -> None:
    got = decode_sample(gpu(health_read=1, remap_pending=True)).gpus[0]
    assert got.health_read is False and got.errors == {"health_read": "WrongType"}
    assert got.remap_pending is True


def test_a_fabric_state_outside_its_words_is_unknown_and_its_status_cleaned() -> None:
    got = decode_sample(gpu(fabric_state="melting", fabric_status="\x1b[31mNotReady")).gpus[0]
    assert got.fabric_state is None and got.errors == {"fabric_state": "WrongType"}
    assert got.fabric_status == "NotReady"


def test_nvlinks_past_the_cap_are_cut_and_a_bad_link_dropped_alone() -> None:
    links = [{"link": i % 18, "active": True} for i in range(40)]
    got = decode_sample(gpu(nvlinks=links))
    assert len(got.gpus[0].nvlinks or ()) == 18
    assert got.notes == ("40 NVLink entries sent; kept the first 18",)
    got = decode_sample(gpu(nvlinks=[{"link": 99}, {"link": 1, "crc_flit_errors": -4}]))
    (link,) = got.gpus[0].nvlinks or ()
    assert link.link == 1 and link.crc_flit_errors is None
    assert link.errors == {"crc_flit_errors": "OutOfRange"}
    assert got.notes == ("dropped NVLink entry 0: link: OutOfRange",)


def test_identities_have_ranges_too() -> None:
    """A GPU index or pid outside its range drops the entry; at the limit it is kept."""
    sample = decode_sample(
        gpu(index=MAX_GPUS - 1, processes=[{"pid": 2**22}, {"pid": 2**22 + 1}, {"pid": 0}]),
        gpu(index=MAX_GPUS),
    )
    assert [g.index for g in sample.gpus] == [MAX_GPUS - 1]
    assert [p.pid for p in sample.gpus[0].processes] == [2**22]
    assert sample.notes == (
        "dropped process entry 1: pid: OutOfRange",
        "dropped process entry 2: pid: OutOfRange",
        "dropped GPU entry 1: index: OutOfRange",
    )


def test_a_state_or_kind_outside_its_words_is_a_wrong_type() -> None:
    got = decode_sample(gpu(state="melted", processes=[{"pid": 3, "kind": "quantum"}])).gpus[0]
    assert got.errors == {"state": "WrongType"}
    assert got.processes[0].errors == {"kind": "WrongType"}
    assert got.processes[0].kind == "compute"


def test_a_missing_identity_drops_the_entry_as_invalid() -> None:
    sample = decode_sample({"index": 0}, gpu(index=1))
    assert [g.index for g in sample.gpus] == [1]
    assert sample.notes == ("dropped GPU entry 0: uuid: Invalid",)


def test_strings_are_cleaned_to_their_cells() -> None:
    sample = decode_sample(
        gpu(uuid="\x1b[31m" + "u" * 300, processes=[{"pid": 3, "command": "\x07c" * 2000}])
    )
    assert sample.gpus[0].uuid == "u" * 127 + "…"
    assert sample.gpus[0].processes[0].command == "c" * 511 + "…"
    hello = decode_hello(gpu(uuid="\x1b]0;t\x07" + "u" * 300, serial=5))
    assert hello.gpus[0].uuid == "u" * 127 + "…"


def test_a_line_of_exactly_the_limit_is_decoded() -> None:
    body = json.dumps({"type": "error", "message": "m"})
    message = decode_helper_line(body + " " * (MAX_LINE_BYTES - len(body)))
    assert isinstance(message, HelperError) and message.message == "m"
    with pytest.raises(ProtocolError, match="over the"):
        decode_helper_line(body + " " * (MAX_LINE_BYTES - len(body) + 1))


def test_a_throttle_list_over_its_cap_keeps_exactly_the_cap() -> None:
    reasons = [f"r{i}" for i in range(MAX_THROTTLE_REASONS + 8)]
    got = decode_sample(gpu(throttle=reasons, temp_c=50)).gpus[0]
    assert got.throttle == tuple(reasons[:MAX_THROTTLE_REASONS])
    assert got.temp_c == 50 and got.errors == {}
    at_cap = decode_sample(gpu(throttle=reasons[:MAX_THROTTLE_REASONS])).gpus[0]
    assert at_cap.throttle == tuple(reasons[:MAX_THROTTLE_REASONS])


def test_a_list_over_its_cap_with_a_bad_item_takes_two_repairs() -> None:
    """pydantic reports a list's length before its items: cut first, then null it."""
    reasons: list[Any] = [f"r{i}" for i in range(MAX_THROTTLE_REASONS + 8)]
    reasons[3] = 17
    got = decode_sample(gpu(throttle=reasons, temp_c=50)).gpus[0]
    assert got.throttle is None
    assert got.errors == {"throttle": "WrongType"}
    assert got.temp_c == 50


def test_an_errors_map_over_its_cap_keeps_the_first_entries() -> None:
    sent = {f"field{i}": "NotSupported" for i in range(MAX_ERRORS + 10)}
    got = decode_sample(gpu(errors=sent, temp_c=50)).gpus[0]
    assert got.errors == dict(list(sent.items())[:MAX_ERRORS])
    assert got.temp_c == 50


def test_an_errors_map_that_is_not_a_map_is_replaced_by_an_empty_one() -> None:
    got = decode_sample(gpu(errors="everything broke", temp_c=50)).gpus[0]
    assert got.errors == {}
    assert got.temp_c == 50


def test_the_helpers_own_reasons_are_kept_beside_the_decoders() -> None:
    got = decode_sample(gpu(errors={"fan_pct": "NotSupported"}, temp_c=-300)).gpus[0]
    assert got.errors == {"fan_pct": "NotSupported", "temp_c": "OutOfRange"}


@pytest.mark.parametrize("sent", [["helper said"], "helper said", {}, [5, None], ["x"] * 99])
def test_a_helper_cannot_write_the_decoders_notes(sent: Any) -> None:
    assert decode_sample(gpu(), notes=sent).notes == ()
    sample = decode_sample(gpu(), gpu(index=10**6), notes=sent)
    assert sample.notes == ("dropped GPU entry 1: index: OutOfRange",)


def test_each_note_is_said_once_whatever_the_rounds() -> None:
    many = [gpu(index=i % MAX_GPUS) for i in range(MAX_GPUS + 1)]
    many[3]["uuid"] = 12
    hello = decode_hello(*many)
    assert hello.notes == (
        f"{MAX_GPUS + 1} GPU entries sent; kept the first {MAX_GPUS}",
        "dropped GPU entry 3: uuid: WrongType",
    )
    assert len(hello.gpus) == MAX_GPUS - 1


def test_a_full_list_on_the_repair_path_is_not_called_cut() -> None:
    hello = decode_hello(*[gpu(index=i, mig_mode="on") for i in range(MAX_GPUS)])
    assert len(hello.gpus) == MAX_GPUS
    assert hello.notes == ()
    assert all(g.errors == {"mig_mode": "WrongType"} for g in hello.gpus)


@pytest.mark.parametrize("dropped", [MAX_NOTES - 1, MAX_NOTES, MAX_NOTES + 1, MAX_NOTES + 9])
def test_notes_past_the_cap_end_in_a_count_of_the_rest(dropped: int) -> None:
    processes = [{"pid": -i} for i in range(dropped)] + [{"pid": 1}]
    sample = decode_sample(gpu(processes=processes))
    assert [p.pid for p in sample.gpus[0].processes] == [1]
    said = [f"dropped process entry {i}: pid: OutOfRange" for i in range(dropped)]
    if dropped <= MAX_NOTES:
        assert sample.notes == tuple(said)
    else:
        rest = dropped - (MAX_NOTES - 1)
        assert sample.notes == (*said[: MAX_NOTES - 1], f"and {rest} more problems")


def test_an_entry_that_is_not_an_object_is_dropped_alone() -> None:
    sample = decode_sample(5, gpu(index=1, processes=["x", {"pid": 4}]), gpu(index=2))
    assert [g.index for g in sample.gpus] == [1, 2]
    assert [p.pid for p in sample.gpus[0].processes] == [4]
    assert set(sample.notes) == {
        "dropped GPU entry 0: not an object",
        "dropped process entry 0: not an object",
    }


@pytest.mark.parametrize("bad", [{"index": -1, "uuid": "x"}, "not a GPU"])
def test_neighbouring_bad_entries_are_all_dropped_and_only_they(bad: Any) -> None:
    sample = decode_sample(bad, bad, gpu(index=2), bad, gpu(index=4))
    assert [g.index for g in sample.gpus] == [2, 4]


@pytest.mark.parametrize("bad_gpu", [{"index": -1, "uuid": "x"}, "not a GPU"])
@pytest.mark.parametrize("bad_process", [{"pid": -1}, "not a process"])
def test_drops_in_different_lists_do_not_mix(bad_gpu: Any, bad_process: Any) -> None:
    """GPU 0 and process 1 of GPU 1 are bad: GPU 1 and process 0 stay."""
    sample = decode_sample(
        bad_gpu, gpu(index=1, processes=[{"pid": 10}, bad_process]), gpu(index=2)
    )
    assert [g.index for g in sample.gpus] == [1, 2]
    assert [p.pid for p in sample.gpus[0].processes] == [10]


def test_an_unknown_type_never_carries_the_hosts_control_characters() -> None:
    for tag in ("\x1b]0;pwned\x07", "\x1b[2J" + "t" * 1000, "\u202e\x9b31m"):
        message = decode_helper_line(json.dumps({"type": tag, "seq": 1}))
        assert isinstance(message, UnknownMessage)
        assert hostile.is_safe_text(message.type) and cell_len(message.type) <= 40, message.type


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_an_unknown_message_type_is_named_safely_not_refused(tag: str) -> None:
    message = decode_helper_line(json.dumps({"type": "x" + tag, "id": 1}))
    assert isinstance(message, UnknownMessage)
    assert hostile.is_safe_text(message.type) and 1 <= cell_len(message.type) <= 40
    assert len(message.type) <= 3 * 40  # at most two combining marks on a character
    assert message.type.startswith("x")


def test_the_caps_are_the_documented_ones_and_above_what_a_real_helper_sends() -> None:
    from pathlib import Path

    from gputui.remote import gpus as helper_gpus
    from gputui.remote import procs as helper_procs
    from gputui.wire.messages import MAX_PROCESSES

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    documented = re.search(r"at most (\d+) GPUs a host, (\d+) processes a GPU", readme)
    assert documented is not None
    assert (int(documented[1]), int(documented[2])) == (MAX_GPUS, MAX_PROCESSES)
    # What our own helper sends is never cut by our own decoder.
    assert helper_gpus.MAX_PROCESSES <= MAX_PROCESSES
    long_command = decode_sample(
        gpu(processes=[{"pid": 3, "command": "c" * helper_procs.COMMAND_MAX}])
    )
    assert long_command.gpus[0].processes[0].command == "c" * helper_procs.COMMAND_MAX
