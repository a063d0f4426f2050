"""Hostile MIG slice lists from a helper: the GPU is kept, each slice is an entry of its
own (one with a bad identity goes alone, with a note), a bad profile is not one."""

from __future__ import annotations

import json
from typing import Any

import hostile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_decode import assert_sound, decode_sample, gpu

from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Hello
from gputui.wire.mig import MAX_SLICES

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GOOD = {"index": 1, "uuid": "MIG-4c3b0a2e-0000-4000-8000-000000000001", "mem_used_mib": 13}


def _sound_slice(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and type(entry.get("index")) is int
        and 0 <= entry["index"] < MAX_SLICES
        and isinstance(entry.get("uuid"), str)
        and entry["uuid"].startswith("MIG-")
    )


@SETTINGS
@given(st.lists(hostile.any_json | st.just(GOOD), max_size=80))
def test_hostile_slice_lists_keep_the_gpu_and_only_sound_slices(slices: list[Any]) -> None:
    (mended,) = decode_sample(gpu(temp_c=40, mig=slices)).gpus
    assert mended.temp_c == 40 and mended.state == "ok"
    assert_sound(mended)
    assert len(mended.mig) <= MAX_SLICES
    kept = [s["index"] for s in slices[:MAX_SLICES] if _sound_slice(s)]
    assert [s.index for s in mended.mig] == kept


def test_a_slice_that_is_not_a_mig_device_or_names_no_profile() -> None:
    info = {
        "index": 0,
        "uuid": "GPU-0",
        "name": "NVIDIA A100-SXM4-80GB",
        "mig_mode": True,
        "mig": [
            {"index": 0, "uuid": "GPU-not-a-slice", "profile": "1g.10gb"},
            {"index": 1, "uuid": "MIG-1", "profile": "1g.10gb; rm -rf /"},
            {"index": 2, "uuid": "MIG-2", "profile": "2g.20gb"},
        ],
    }
    hello = decode_helper_line(
        json.dumps(
            {"type": "hello", "protocol": 1, "helper_version": "x", "hostname": "h", "gpus": [info]}
        )
    )
    assert isinstance(hello, Hello)
    (card,) = hello.gpus
    assert [(s.index, s.profile) for s in card.mig] == [(1, None), (2, "2g.20gb")]
    assert card.mig[0].errors["profile"] in ("Invalid", "WrongType", "OutOfRange")
    assert hello.notes  # the slice that was no MIG device was dropped, with a note
