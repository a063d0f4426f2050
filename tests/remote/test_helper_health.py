"""The health readings against the real pynvml functions, stubbed with real errors.

The stubs (conftest ``FakeNvml``) answer in pynvml's own shapes: a tuple from
``nvmlDeviceGetRemappedRows``, address lists from ``nvmlDeviceGetRetiredPages``,
a struct filled through ``ctypes.byref`` by ``nvmlDeviceGetGpuFabricInfo[V]``.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pynvml
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nvmlkit import ERRORS, FakeGpu, FakeNvml

from gputui.remote.gpu_health import HealthClock
from gputui.remote.helper import Helper, _parse_args, run
from gputui.remote.wire import Output
from gputui.wire.decode import decode_helper_line
from gputui.wire.fields import wire_fields
from gputui.wire.messages import GpuSample, Hello, Sample

HEALTH_FIELDS = (
    "remapped_correctable",
    "remapped_uncorrectable",
    "remap_pending",
    "remap_failed",
    "retired_sbe",
    "retired_dbe",
    "retired_pending",
    "ecc_corrected_total",
    "ecc_uncorrected_total",
    "persistence",
    "pcie_replays",
    "nvlinks",
    "fabric_state",
)


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def _helper(every: float = 10.0) -> tuple[Helper, Clock]:
    clock = Clock()
    helper = Helper(
        pynvml, Output(io.BytesIO()), "host", simulated=False, health=HealthClock(every, clock)
    )
    helper.hello()
    return helper, clock


def _decoded(msg: dict[str, Any]) -> Any:
    return decode_helper_line(json.dumps(msg, separators=(",", ":")))


def _sample(helper: Helper) -> Sample:
    sample = _decoded(helper.sample())
    assert isinstance(sample, Sample)
    return sample


def test_each_reading_from_realistic_structures(fake_nvml: FakeNvml) -> None:
    h100, v100, _ = fake_nvml.gpus
    h100.remap = (3, 1, 1, 0)  # corrRows, uncRows, isPending, failureOccurred
    h100.ecc_total = (120, 2)
    h100.nvlink_down = {5}
    h100.nvlink_errors = {(5, 2): 7, (5, 3): 1, (0, 0): 4, (0, 1): 2}
    h100.fabric = (3, pynvml.NVML_ERROR_NOT_READY)  # completed, but failed
    v100.name, v100.remap, v100.nvlinks, v100.fabric = "Tesla V100-SXM2-32GB", None, 6, None
    v100.retired = ([0x3F000, 0x3F100], [0x4F000], 1)
    v100.persistence, v100.replays = 0, 0
    helper, _ = _helper()
    hello = _decoded(helper.hello())
    assert isinstance(hello, Hello)
    assert hello.boot_time is not None and hello.boot_time > 1e9
    thresholds = [(g.temp_slowdown_c, g.temp_shutdown_c) for g in hello.gpus]
    assert thresholds == [(89, 95), (89, 95), (95, 98)]
    first, second, third = _sample(helper).gpus
    assert first.health_read and second.health_read and third.health_read
    assert (first.remapped_correctable, first.remapped_uncorrectable) == (3, 1)
    assert (first.remap_pending, first.remap_failed) == (True, False)
    assert (first.ecc_corrected_total, first.ecc_uncorrected_total) == (120, 2)
    assert first.retired_sbe is None and first.errors["retired_sbe"] == "NotSupported"
    assert first.persistence is True and first.pcie_replays == 9
    assert first.nvlinks is not None and len(first.nvlinks) == 18
    assert [link.link for link in first.nvlinks] == list(range(18))
    assert [link.link for link in first.nvlinks if not link.active] == [5]
    link0, link5 = first.nvlinks[0], first.nvlinks[5]
    assert (link0.replay_errors, link0.recovery_errors, link0.crc_flit_errors) == (4, 2, 0)
    assert (link5.crc_flit_errors, link5.crc_data_errors, link5.replay_errors) == (7, 1, 0)
    assert first.fabric_state == "completed" and first.fabric_status == "NotReady"
    # A V100: page retirement, no remapping, six links, no fabric, persistence off.
    assert (second.retired_sbe, second.retired_dbe, second.retired_pending) == (2, 1, True)
    assert second.remapped_correctable is None and second.remap_pending is None
    assert second.errors["remap_pending"] == "NotSupported"
    assert second.nvlinks is not None and len(second.nvlinks) == 6
    assert second.fabric_state is None and second.errors["fabric_state"] == "NotSupported"
    assert second.persistence is False
    # GeForce: no ECC, no remapping, no NVLink, no fabric; replays and persistence are there.
    for name in ("remap_pending", "retired_dbe", "ecc_uncorrected_total", "nvlinks"):
        assert getattr(third, name) is None and third.errors[name] == "NotSupported", name
    assert third.persistence is False and third.pcie_replays == 0


def test_a_completed_fabric_with_success_has_no_status(fake_nvml: FakeNvml) -> None:
    helper, _ = _helper()
    first = _sample(helper).gpus[0]
    assert first.fabric_state == "completed" and first.fabric_status is None
    fake_nvml.gpus[0].fabric = (2, pynvml.NVML_ERROR_NOT_READY)
    helper.health.xid_seen()
    again = _sample(helper).gpus[0]
    assert again.fabric_state == "in-progress" and again.fabric_status is None


def test_fabric_falls_back_to_the_v1_call_on_an_older_driver(fake_nvml: FakeNvml) -> None:
    fake_nvml.gpus[0].fail["nvmlDeviceGetGpuFabricInfoV"] = "FunctionNotFound"
    fake_nvml.gpus[0].fabric = (1, 0)
    helper, clock = _helper()
    assert _sample(helper).gpus[0].fabric_state == "not-started"
    clock.now += 10
    assert _sample(helper).gpus[0].fabric_state == "not-started"
    assert fake_nvml.calls[("nvmlDeviceGetGpuFabricInfoV", 0)] == 1  # not asked again
    assert fake_nvml.calls[("nvmlDeviceGetGpuFabricInfo", 0)] == 2


def test_a_binding_without_the_functions_names_them_function_not_found(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetGpuFabricInfoV",
        "nvmlDeviceGetGpuFabricInfo",
        "nvmlDeviceGetNvLinkState",
    ):
        monkeypatch.delattr(pynvml, name)
    helper, _ = _helper()
    first = _sample(helper).gpus[0]
    assert first.state == "ok"
    for name in ("remap_failed", "fabric_state", "nvlinks"):
        assert getattr(first, name) is None and first.errors[name] == "FunctionNotFound"
    assert first.persistence is True  # the rest still read


@pytest.mark.parametrize(
    "where",
    [
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetNvLinkErrorCounter",
        "nvmlDeviceGetGpuFabricInfoV",
        "nvmlDeviceGetPcieReplayCounter",
    ],
)
def test_gpu_lost_in_the_middle_of_the_health_readings(fake_nvml: FakeNvml, where: str) -> None:
    fake_nvml.gpus[0].fail[where] = "GpuIsLost"
    helper, clock = _helper()
    sample = _sample(helper)
    assert [g.state for g in sample.gpus] == ["lost", "ok", "ok"]
    assert sample.gpus[0].errors == {"gpu": "GpuIsLost"}
    assert sample.gpus[1].health_read and sample.gpus[1].nvlinks is not None
    used = fake_nvml.uses(0)
    clock.now += 60
    assert _sample(helper).gpus[0].state == "lost"
    assert fake_nvml.uses(0) == used  # the lost handle is not touched again


def test_an_nvlink_that_fails_after_the_first_keeps_the_others(fake_nvml: FakeNvml) -> None:
    """Only NotSupported / InvalidArgument end the links; another error is that link's."""
    h100 = fake_nvml.gpus[0]
    h100.nvlinks = 4
    original = pynvml.nvmlDeviceGetNvLinkState

    def state(handle: Any, link: int) -> int:
        if handle.index == 0 and link == 2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        result: int = original(handle, link)
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pynvml, "nvmlDeviceGetNvLinkState", state)
        helper, _ = _helper()
        links = _sample(helper).gpus[0].nvlinks
    assert links is not None and [link.link for link in links] == [0, 1, 2, 3]
    assert links[2].active is None and links[2].errors == {"active": "Unknown"}
    assert links[3].active is True and links[3].crc_flit_errors == 0


# Each health function and the sample fields it fills when it fails.
FILLS: dict[str, tuple[str, ...]] = {
    "nvmlDeviceGetRemappedRows": (
        "remapped_correctable",
        "remapped_uncorrectable",
        "remap_pending",
        "remap_failed",
    ),
    "nvmlDeviceGetRetiredPages": ("retired_sbe", "retired_dbe"),
    "nvmlDeviceGetRetiredPagesPendingStatus": ("retired_pending",),
    "nvmlDeviceGetTotalEccErrors": (
        "ecc_corrected_total",
        "ecc_uncorrected_total",
        "ecc_corrected",
        "ecc_uncorrected",
    ),
    "nvmlDeviceGetPersistenceMode": ("persistence",),
    "nvmlDeviceGetPcieReplayCounter": ("pcie_replays",),
    "nvmlDeviceGetNvLinkState": ("nvlinks",),
}
ERROR_NAMES = ("NotSupported", "FunctionNotFound", "Unknown", "NoPermission")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(failing=st.dictionaries(st.sampled_from(sorted(FILLS)), st.sampled_from(ERROR_NAMES)))
def test_any_set_of_failing_readings_is_null_with_its_error_and_nothing_else(
    fake_nvml: FakeNvml, failing: dict[str, str]
) -> None:
    h100 = FakeGpu(retired=([0x1000], [], 0))  # an H100 that answers every reading
    fake_nvml.gpus[:] = [h100]
    h100.fail.update(failing)
    helper, _ = _helper()
    (gpu,) = _sample(helper).gpus
    assert gpu.state == "ok" and gpu.health_read
    broken = {name: failing[fn] for fn, names in FILLS.items() if fn in failing for name in names}
    for name in (*HEALTH_FIELDS, "ecc_corrected", "ecc_uncorrected"):
        if name in broken:
            assert getattr(gpu, name) is None and gpu.errors[name] == broken[name], name
        else:
            assert getattr(gpu, name) is not None and name not in gpu.errors, name
    assert gpu.retired_sbe in (None, 1) and gpu.temp_c == 59  # the live readings unharmed


def test_cadence_first_sample_then_every_interval_and_right_after_an_xid(
    fake_nvml: FakeNvml,
) -> None:
    helper, clock = _helper(every=10.0)

    def read() -> list[bool]:
        sample = _sample(helper)
        for gpu in sample.gpus:
            if not gpu.health_read:  # left out: null, and not named as an error
                assert all(getattr(gpu, n) is None for n in HEALTH_FIELDS)
                assert not set(HEALTH_FIELDS) & set(gpu.errors)
        return [g.health_read for g in sample.gpus]

    assert read() == [True, True, True]
    remaps = fake_nvml.calls[("nvmlDeviceGetRemappedRows", 0)]
    clock.now += 1
    assert read() == [False] * 3
    clock.now += 8.9
    assert read() == [False] * 3
    assert fake_nvml.calls[("nvmlDeviceGetRemappedRows", 0)] == remaps  # no cost between
    clock.now += 0.2  # 10.1 s after the first
    assert read() == [True] * 3
    clock.now += 1
    helper.health.xid_seen()
    assert read() == [True] * 3
    clock.now += 1
    assert read() == [False] * 3  # and the interval starts again from there


def test_the_helper_reads_health_right_after_an_nvml_xid(
    start_helper: Any,
) -> None:
    helper = start_helper(["--sim", "2xh100", "--interval", "0.1", "--health-every", "3600"])
    helper.expect(lambda m: m["type"] == "sample" and m["gpus"][0].get("health_read"))
    helper.expect(lambda m: m["type"] == "sample" and not m["gpus"][0].get("health_read"))
    helper.send({"id": 1, "op": "sim", "fault": "xid:79@1"})
    helper.expect(lambda m: m["type"] == "event" and m.get("source") == "nvml")
    after = helper.expect(lambda m: m["type"] == "sample")
    assert after["gpus"][1]["health_read"] is True
    later = helper.expect(lambda m: m["type"] == "sample")
    assert later["gpus"][1].get("health_read") is not True


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--health-every", "0.5"], "--health-every must be 1 to 3600 seconds"),
        (["--health-every=3601"], "--health-every must be 1 to 3600 seconds"),
        (["--health-every=nan"], "--health-every must be 1 to 3600 seconds"),
        (["--health-every", "often"], "could not convert"),
        (["--health-every"], "--health-every needs a value"),
    ],
)
def test_a_bad_health_interval_is_one_fatal_line(argv: list[str], why: str) -> None:
    out = io.BytesIO()
    assert run(argv, io.BytesIO(), out) == 2
    (message,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert message["fatal"] is True and why in message["message"]


def test_the_health_interval_reaches_the_helper() -> None:
    assert _parse_args(["--health-every", "1"]).health_every == 1.0
    assert _parse_args(["--health-every=3600"]).health_every == 3600.0
    assert _parse_args([]).health_every == 10.0


def test_every_health_field_is_in_the_wire_model() -> None:
    assert set(HEALTH_FIELDS) | {"health_read", "fabric_status"} <= set(wire_fields(GpuSample))
    assert set(ERRORS) >= {"NotSupported", "GpuIsLost", "FunctionNotFound"}
