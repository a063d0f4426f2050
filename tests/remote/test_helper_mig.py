"""The helper reads MIG slices through the real pynvml functions (stubbed, ``migkit``):
inventory in ``hello``, readings in ``sample``, one slot failing while others work."""

from __future__ import annotations

import json
from typing import Any

import pynvml
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migkit import FakeSlice, install_mig, mig_uuid
from nvmlkit import FakeNvml, three_gpus

from gputui.remote.gpus import Gpu
from gputui.remote.procs import ProcessTable
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Hello, Sample

RunOnce = Any


def _mixed() -> list[FakeSlice]:
    """An A100 80GB as an admin split it: 3g.40gb + 2x 2g.20gb, slots 0, 1 and 2."""
    return [
        FakeSlice(0, mig_uuid(0, 0), "3g.40gb", used_mib=20480, pids=[4242]),
        FakeSlice(1, mig_uuid(0, 1), "2g.20gb"),
        FakeSlice(2, mig_uuid(0, 2), "2g.20gb", used_mib=512, pids=[4343, 4344]),
    ]


def test_hello_lists_slices_under_their_gpu_and_samples_read_them(
    run_once: RunOnce, fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_mig(fake_nvml, monkeypatch, {0: _mixed()})
    code, (hello, sample) = run_once()
    assert code == 0
    parent = hello["gpus"][0]
    assert parent["mig_mode"] is True and parent["errors"] == {}
    assert [(s["index"], s["uuid"], s["profile"]) for s in parent["mig"]] == [
        (0, mig_uuid(0, 0), "3g.40gb"),
        (1, mig_uuid(0, 1), "2g.20gb"),
        (2, mig_uuid(0, 2), "2g.20gb"),
    ]
    first = parent["mig"][0]
    assert first["parent_uuid"] == parent["uuid"]
    assert (first["gpu_instance"], first["compute_instance"]) == (1, 0)
    assert first["memory_total_mib"] == 40192 and first["errors"] == {}
    assert all("mig" not in g for g in hello["gpus"][1:])  # MIG off: no slices read
    slices = sample["gpus"][0]["mig"]
    assert [(s["uuid"], s["mem_used_mib"], s["mem_total_mib"]) for s in slices] == [
        (mig_uuid(0, 0), 20480, 40192),
        (mig_uuid(0, 1), 13, 19968),
        (mig_uuid(0, 2), 512, 19968),
    ]
    # NVML gives no utilisation for a MIG device: null, with the reason.
    assert all(s["util_gpu"] is None for s in slices)
    assert all(s["errors"] == {"util_gpu": "NotSupported"} for s in slices)
    assert [s["pids"] for s in slices] == [[4242], [], [4343, 4344]]
    # The client decodes both as the wire models.
    decoded = decode_helper_line(json.dumps(hello))
    assert isinstance(decoded, Hello) and decoded.gpus[0].mig[2].profile == "2g.20gb"
    samples = decode_helper_line(json.dumps(sample))
    assert isinstance(samples, Sample) and samples.gpus[0].mig[0].pids == (4242,)
    assert samples.gpus[1].mig == ()


def test_profile_from_attributes_when_the_name_lacks_it(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces = [FakeSlice(0, mig_uuid(0, 0), "1g.10gb", name_has_profile=False)]
    install_mig(fake_nvml, monkeypatch, {0: pieces})
    info = Gpu(pynvml, 0).inventory()
    assert info["mig"][0]["profile"] == "1g.10gb"  # ceil(9728 MiB / 1024) GB, 1 slice


def test_one_slice_failing_others_still_listed(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces = _mixed()
    pieces[1].fail["nvmlDeviceGetUUID"] = "Unknown"
    pieces[2].fail["nvmlDeviceGetMemoryInfo"] = "NoPermission"
    install_mig(fake_nvml, monkeypatch, {0: pieces})
    gpu = Gpu(pynvml, 0)
    info = gpu.inventory()
    assert [s["index"] for s in info["mig"]] == [0, 2]
    assert info["errors"] == {"mig.1": "Unknown"}
    assert info["mig"][1]["memory_total_mib"] is None
    assert info["mig"][1]["errors"] == {"memory_total_mib": "NoPermission"}
    out = gpu.sample(ProcessTable("/nonexistent"))
    assert out["state"] == "ok"
    assert [s["mem_used_mib"] for s in out["mig"]] == [20480, None]
    assert out["mig"][1]["errors"]["mem_used_mib"] == "NoPermission"


def test_count_not_supported_is_named_once(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_mig(fake_nvml, monkeypatch, {0: _mixed()})
    fake_nvml.gpus[0].fail["nvmlDeviceGetMaxMigDeviceCount"] = "NotSupported"
    info = Gpu(pynvml, 0).inventory()
    assert info["mig"] == [] and info["errors"] == {"mig": "NotSupported"}


SLOT_ERRORS = ("NotFound", "InvalidArgument", "Unknown", "NoPermission", "Timeout")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    filled=st.sets(st.integers(0, 6)),
    broken=st.dictionaries(st.integers(0, 6), st.sampled_from(SLOT_ERRORS)),
)
def test_any_layout_lists_exactly_the_readable_slices(
    monkeypatch: pytest.MonkeyPatch, filled: set[int], broken: dict[int, str]
) -> None:
    """Whatever slots an admin filled and whichever answer errors: the readable ones
    are listed, an empty slot is never an error, every other failure is named."""
    with monkeypatch.context() as mp:
        fake = FakeNvml(three_gpus()).install(mp)
        pieces = [FakeSlice(slot, mig_uuid(0, slot)) for slot in sorted(filled)]
        for slot, error in broken.items():
            fake.gpus[0].fail[f"nvmlDeviceGetMigDeviceHandleByIndex@{slot}"] = error
        install_mig(fake, mp, {0: pieces})
        info = Gpu(pynvml, 0).inventory()
    failing = {s: e for s, e in broken.items() if s in filled}
    assert [s["index"] for s in info["mig"]] == sorted(filled - set(failing))
    named = {s: e for s, e in failing.items() if e not in ("NotFound", "InvalidArgument")}
    assert info["errors"] == {f"mig.{s}": e for s, e in named.items()}


def test_the_helpers_copies_of_the_profile_rule_and_cap_agree_with_the_clients() -> None:
    """The helper is shipped alone, so it keeps its own copies: held equal here."""
    from gputui.common.mig_profile import PROFILE
    from gputui.remote import mig
    from gputui.wire import mig as wire_mig

    assert mig._PROFILE.pattern == PROFILE.pattern
    assert mig.MAX_SLICES == wire_mig.MAX_SLICES
    assert mig.MAX_SLICE_PIDS == wire_mig.MAX_SLICE_PIDS
