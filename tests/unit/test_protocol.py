"""Decoding helper lines: valid messages, garbage, and hostile strings."""

from __future__ import annotations

import json

import pytest

from gputui.wire.decode import ProtocolError, decode_helper_line
from gputui.wire.messages import (
    MAX_LINE_BYTES,
    Event,
    Hello,
    HelperError,
    IntervalRequest,
    Result,
    Sample,
    SignalRequest,
)


def line(obj: dict[str, object]) -> str:
    return json.dumps(obj)


def test_hello_and_inventory() -> None:
    msg = decode_helper_line(
        line(
            {
                "type": "hello",
                "protocol": 1,
                "helper_version": "0.1.0",
                "hostname": "gpu01",
                "driver": "535.129.03",
                "gpus": [
                    {"index": 0, "uuid": "GPU-1", "name": "NVIDIA A10", "memory_total_mib": 23028}
                ],
                "future_field": "ignored",
            }
        )
    )
    assert isinstance(msg, Hello)
    assert msg.gpus[0].memory_total_mib == 23028


def test_sample_with_null_fields_and_errors() -> None:
    msg = decode_helper_line(
        line(
            {
                "type": "sample",
                "seq": 3,
                "time": 1.5,
                "gpus": [
                    {
                        "index": 0,
                        "uuid": "GPU-1",
                        "power_w": None,
                        "fan_pct": None,
                        "errors": {"power_w": "NotSupported", "fan_pct": "NotSupported"},
                    },
                    {"index": 1, "uuid": "GPU-2", "state": "lost", "message": "GPU is lost"},
                ],
            }
        )
    )
    assert isinstance(msg, Sample)
    assert msg.gpus[0].errors == {"power_w": "NotSupported", "fan_pct": "NotSupported"}
    assert msg.gpus[1].state == "lost"


def test_hostile_strings_are_cleaned_at_decode() -> None:
    msg = decode_helper_line(
        line(
            {
                "type": "sample",
                "seq": 1,
                "time": 0,
                "gpus": [
                    {
                        "index": 0,
                        "uuid": "GPU-1",
                        "processes": [
                            {
                                "pid": 7,
                                "user": "\x1b[2Jroot",
                                "command": "\x1b]0;owned\x07python " + "A" * 5000,
                            }
                        ],
                    }
                ],
            }
        )
    )
    assert isinstance(msg, Sample)
    proc = msg.gpus[0].processes[0]
    assert proc.user == "root"
    assert proc.command.startswith("python AAA") and len(proc.command) <= 512
    assert "\x1b" not in proc.command


def test_event_result_error() -> None:
    assert isinstance(
        decode_helper_line(line({"type": "event", "time": 1, "kind": "xid", "xid": 79})), Event
    )
    res = decode_helper_line(
        line({"type": "result", "id": 4, "ok": False, "code": "pid-reused", "error": "x"})
    )
    assert isinstance(res, Result) and res.code == "pid-reused"
    assert isinstance(
        decode_helper_line(line({"type": "error", "message": "m", "fatal": True})), HelperError
    )


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("Traceback (most recent call last):", "Invalid JSON"),
        ('{"type": "sample", "seq": "x", "time": 0}', "sample.seq"),
        ('{"type": 5}', "type"),
        ('{"seq": 1}', "type"),
        ("[1, 2]", ""),
        (b"\xff\xfe", ""),
    ],
)
def test_garbage_is_a_one_line_protocol_error(raw: str | bytes, fragment: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_helper_line(raw)
    text = str(info.value)
    assert "\n" not in text and fragment in text


def test_oversized_line() -> None:
    with pytest.raises(ProtocolError, match="over the"):
        decode_helper_line("x" * (MAX_LINE_BYTES + 1))


def test_requests_are_single_json_lines() -> None:
    signal = SignalRequest(pid=42, signal="KILL", gpu_uuid="GPU-1", uid=1000, start_ticks=123)
    req = signal.line(5)
    assert req.endswith("\n") and req.count("\n") == 1
    assert json.loads(req) == {
        "type": "request",
        "id": 5,
        "op": "signal",
        "pid": 42,
        "signal": "KILL",
        "gpu_uuid": "GPU-1",
        "uid": 1000,
        "start_ticks": 123,
    }
    assert json.loads(IntervalRequest(seconds=0.5).line(6))["seconds"] == 0.5


def test_gpu_vendor_defaults_to_nvidia_and_any_other_is_named() -> None:
    """An older helper names no vendor (its GPUs are NVIDIA's); a vendor this client
    does not know is kept out, named in the GPU's errors, not the GPU dropped."""
    line = json.dumps(
        {
            "type": "hello",
            "protocol": 1,
            "helper_version": "0.1.0",
            "hostname": "mix",
            "gpus": [
                {"index": 0, "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000"},
                {"index": 1, "uuid": "GPU-8462ddc1f77ce939", "vendor": "amd", "vendor_index": 0},
                {"index": 2, "uuid": "GPU-1", "vendor": "intel", "vendor_index": 99},
            ],
        }
    )
    msg = decode_helper_line(line)
    assert isinstance(msg, Hello)
    old, amd, other = msg.gpus
    assert (old.vendor, old.vendor_index) == ("nvidia", None)
    assert (amd.vendor, amd.vendor_index) == ("amd", 0)
    assert other.errors == {"vendor": "WrongType", "vendor_index": "OutOfRange"}
