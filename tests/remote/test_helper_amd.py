"""The helper against a fake amdsmi: the real amdsmi package's functions stubbed with
realistic readings and its real ``AmdSmiLibraryException`` codes (``amdsmikit``),
alone and beside a fake NVML (``nvmlkit``) on a mixed host."""

from __future__ import annotations

import io
import json
from types import ModuleType
from typing import Any

import pynvml
import pytest
from amdsmikit import MIB, FakeAmdGpu, FakeAmdSmi, amdsmi_module, mi210
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nvmlkit import FakeNvml, three_gpus

from gputui.remote import procs
from gputui.remote.amd import AmdGpu
from gputui.remote.gpuops import reset
from gputui.remote.helper import Helper, run
from gputui.remote.procs import ProcessTable
from gputui.remote.signals import RequestError
from gputui.remote.wire import Output
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Hello, Sample

__all__ = ["amdsmi_module"]  # the fixture, used by name

RunOnce = Any


def _no_nvidia_driver(mp: pytest.MonkeyPatch) -> None:
    """pynvml installed, no NVIDIA driver: nvmlInit answers LibraryNotFound."""

    def init() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    mp.setattr(pynvml, "nvmlInit", init)


def _once() -> tuple[int, list[dict[str, Any]]]:
    out = io.BytesIO()
    code = run(["--once"], io.BytesIO(), out)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def _status(module: ModuleType, name: str) -> int:
    code: int = getattr(module.amdsmi_wrapper, name)
    return code


def test_amd_only_host_maps_every_reading(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_nvidia_driver(monkeypatch)
    busy = FakeAmdGpu(procs=[(4242, 140_000 * MIB)])
    fake = FakeAmdSmi(amdsmi_module, [busy, mi210()]).install(monkeypatch)
    monkeypatch.setattr(procs.ProcessTable, "lookup", lambda self, pid: {"pid": pid})
    code, msgs = _once()
    assert code == 0
    hello, sample = msgs
    # NVML failing is a note, not the helper failing: "nvml" would say that.
    assert "nvml" not in hello["errors"]
    assert hello["errors"]["nvml_start"].startswith("LibraryNotFound")
    mi300x, small = hello["gpus"]
    assert mi300x == {
        "index": 0,
        "uuid": "GPU-8462ddc1f77ce939",  # as rocminfo names it: ROCR_VISIBLE_DEVICES takes it
        "name": "AMD Instinct MI300X",
        "serial": "692251001124",
        "pci_bus_id": "0000:05:00.0",
        "memory_total_mib": 196592,
        "power_limit_w": 750.0,  # 750,000,000 microwatts
        "temp_slowdown_c": 105,  # hotspot CRITICAL: an MI300X has no edge sensor
        "temp_shutdown_c": 110,
        "pcie_max_gen": None,
        "pcie_max_width": None,
        "mig_mode": None,
        "vendor": "amd",
        "vendor_index": 0,
        "errors": {
            "pcie_max_gen": "NotSupported",
            "pcie_max_width": "NotSupported",
            "mig_mode": "NotSupported",
        },
    }
    assert (small["index"], small["vendor_index"], small["temp_slowdown_c"]) == (1, 1, 100)
    one, two = sample["gpus"]
    assert one["state"] == "ok"
    assert (one["util_gpu"], one["util_mem"]) == (97, 41)
    assert (one["mem_used_mib"], one["mem_total_mib"]) == (147210, 196592)
    assert (one["temp_c"], one["power_w"], one["power_limit_w"]) == (71, 702.0, 750.0)
    assert (one["clock_sm_mhz"], one["clock_mem_mhz"]) == (2100, 1300)
    assert (one["ecc_corrected"], one["ecc_uncorrected"]) == (0, 0)
    assert one["processes"] == [{"pid": 4242, "gpu_mem_mib": 140_000, "kind": "compute"}]
    assert one["errors"] == {
        "fan_pct": "NotSupported",
        "throttle": "NotSupported",
        "pcie_gen": "NotSupported",
        "pcie_width": "NotSupported",
    }
    # An MI210 has an edge sensor and only the average socket power.
    assert (two["temp_c"], two["power_w"], two["util_gpu"]) == (36, 42.0, 0)
    # The client's decoder takes both messages whole.
    decoded = decode_helper_line(json.dumps(hello))
    assert isinstance(decoded, Hello) and not decoded.notes
    assert [g.vendor for g in decoded.gpus] == ["amd", "amd"]
    assert isinstance(decode_helper_line(json.dumps(sample)), Sample)
    assert fake.calls[("amdsmi_get_gpu_activity", 1)] == 1


def test_one_card_failing_leaves_the_others_reading(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_nvidia_driver(monkeypatch)
    drm, unsupported = (
        _status(amdsmi_module, "AMDSMI_STATUS_DRM_ERROR"),
        _status(amdsmi_module, "AMDSMI_STATUS_NOT_SUPPORTED"),
    )
    good = FakeAmdGpu()
    wedged = mi210(serial="0x1111222233334444", bdf="0000:d1:00.0")
    partial = mi210(serial="0x5555666677778888", bdf="0000:e1:00.0")
    partial.gfx = "N/A"  # amdsmi's own sentinel for a reading it has not
    partial.fail = {"amdsmi_get_power_info": unsupported}
    FakeAmdSmi(amdsmi_module, [good, wedged, partial]).install(monkeypatch)
    code, msgs = _once()  # the wedged card still answers its inventory
    assert code == 0
    wedged.fail = {"*": drm}
    code, msgs = _once()
    assert code == 0
    hello, sample = msgs
    assert [g["index"] for g in hello["gpus"]] == [0, 1, 2]
    assert hello["gpus"][1]["errors"]["name"] == "DrmError"
    first, second, third = sample["gpus"]
    assert first["state"] == "ok" and first["util_gpu"] == 97
    assert second["state"] == "error"
    assert "DrmError" in second["message"]
    assert third["state"] == "ok"
    assert third["util_gpu"] is None and third["errors"]["util_gpu"] == "NotSupported"
    assert third["power_w"] is None and third["errors"]["power_w"] == "NotSupported"
    assert third["mem_used_mib"] == 10  # the rest of that card reads on
    assert isinstance(decode_helper_line(json.dumps(sample)), Sample)


def test_mixed_host_numbers_amd_after_nvidia(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeNvml(three_gpus()).install(monkeypatch)
    FakeAmdSmi(amdsmi_module, [FakeAmdGpu(), mi210()]).install(monkeypatch)
    code, msgs = _once()
    assert code == 0
    hello, sample = msgs
    assert hello["driver"] == "535.161.08" and not hello["errors"]
    rows = [(g["index"], g["vendor"], g["vendor_index"]) for g in hello["gpus"]]
    assert rows == [
        (0, "nvidia", 0),
        (1, "nvidia", 1),
        (2, "nvidia", 2),
        (3, "amd", 0),
        (4, "amd", 1),
    ]
    assert [g["state"] for g in sample["gpus"]] == ["ok"] * 5
    # NVML's health readings are NVIDIA cards' only.
    assert all("health_read" not in g for g in sample["gpus"][3:])
    decoded = decode_helper_line(json.dumps(hello))
    assert isinstance(decoded, Hello)
    assert [g.vendor for g in decoded.gpus] == ["nvidia"] * 3 + ["amd"] * 2


def test_a_failing_amdsmi_init_leaves_nvidia_working(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeNvml(three_gpus()).install(monkeypatch)
    fake = FakeAmdSmi(amdsmi_module, [FakeAmdGpu()]).install(monkeypatch)
    fake.init_error = _status(amdsmi_module, "AMDSMI_STATUS_DRIVER_NOT_LOADED")
    code, msgs = _once()
    assert code == 0
    hello, sample = msgs
    assert [g["vendor"] for g in hello["gpus"]] == ["nvidia"] * 3
    assert [g["state"] for g in sample["gpus"]] == ["ok"] * 3
    assert hello["errors"]["amdsmi_start"].startswith("amdsmi_init failed: DriverNotLoaded")
    assert "nvml" not in hello["errors"]


def test_neither_library_starting_is_fatal(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_nvidia_driver(monkeypatch)
    fake = FakeAmdSmi(amdsmi_module, []).install(monkeypatch)
    fake.init_error = _status(amdsmi_module, "AMDSMI_STATUS_NO_PERM")
    code, msgs = _once()
    assert code == 2
    assert msgs[0]["errors"]["nvml"].startswith("LibraryNotFound")
    assert "NoPermission" in msgs[0]["errors"]["nvml"]
    assert msgs[-1]["type"] == "error" and msgs[-1]["fatal"]


def test_older_amdsmi_reads_processes_one_by_one(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_nvidia_driver(monkeypatch)
    fake = FakeAmdSmi(amdsmi_module, [FakeAmdGpu(procs=[(77, 3 * 1024 * MIB), (78, MIB)])])
    fake.install(monkeypatch).install_old_process_api(monkeypatch)
    monkeypatch.setattr(procs.ProcessTable, "lookup", lambda self, pid: {"pid": pid})
    code, (_, sample) = _once()
    assert code == 0
    assert [(p["pid"], p["gpu_mem_mib"]) for p in sample["gpus"][0]["processes"]] == [
        (77, 3072),
        (78, 1),
    ]
    assert fake.calls[("amdsmi_get_gpu_process_info", 0)] == 2


def test_an_amd_card_is_never_reset(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeAmdSmi(amdsmi_module, [FakeAmdGpu()]).install(monkeypatch)
    amdsmi_module.amdsmi_init()
    helper = Helper(None, Output(io.BytesIO()), "h", False, amd=amdsmi_module)
    helper.hello()
    with pytest.raises(RequestError) as info:
        reset(helper, {"index": 0, "uuid": helper.gpus[0].uuid})
    assert info.value.code == "unsupported"
    assert helper.amd_cards() == {"GPU-8462ddc1f77ce939": "GPU-8462ddc1f77ce939"}


def test_a_card_without_serial_falls_back_to_amdsmis_uuid(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = FakeAmdGpu(asic_serial="N/A")
    FakeAmdSmi(amdsmi_module, [card]).install(monkeypatch)
    amdsmi_module.amdsmi_init()
    helper = Helper(None, Output(io.BytesIO()), "h", False, amd=amdsmi_module)
    info = helper.hello()["gpus"][0]
    assert info["uuid"] == "GPU-5cff74a1-0000-1000-8084-62ddc1f77ce9"
    # ROCm would not take that form: the card goes by its index among AMD cards.
    assert helper.amd_cards() == {info["uuid"]: "0"}


_DECODER_WORDS = {"NotFinite", "OutOfRange", "TooMany", "WrongType", "Invalid"}
"""What the client's decoder names a bad value it had to drop (``wire.decode``)."""
_ODD = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["N/A", "", "0x", None, True, [], {}]),
    st.text(max_size=20),
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    gfx=_ODD,
    umc=_ODD,
    vram_used=_ODD,
    power=_ODD,
    serial=st.one_of(st.text(max_size=24), st.sampled_from(["0x0", "0xFFFFFFFFFFFFFFFF"])),
    pid=_ODD,
    name=st.text(max_size=300),
)
def test_any_values_amdsmi_gives_make_a_sample_the_client_takes(
    amdsmi_module: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    gfx: Any,
    umc: Any,
    vram_used: Any,
    power: Any,
    serial: str,
    pid: Any,
    name: str,
) -> None:
    card = FakeAmdGpu(gfx=gfx, umc=umc, socket_power=power, asic_serial=serial, market_name=name)
    card.vram_used = vram_used
    with monkeypatch.context() as mp:
        fake = FakeAmdSmi(amdsmi_module, [card, mi210()]).install(mp)
        mp.setattr(fake, "_process_list", lambda g: [{"pid": pid, "mem": 5 * MIB}])
        mp.setattr(
            amdsmi_module,
            "amdsmi_get_gpu_process_list",
            lambda handle: fake._process_list(fake._gpu("amdsmi_get_gpu_process_list", handle)),
        )
        amdsmi_module.amdsmi_init()
        helper = Helper(None, Output(io.BytesIO()), "h", False, amd=amdsmi_module)
        helper.table = ProcessTable(proc="/nonexistent")
        hello = decode_helper_line(json.dumps(helper.hello()))
        sample = decode_helper_line(json.dumps(helper.sample()))
    assert isinstance(hello, Hello) and isinstance(sample, Sample)
    assert len(hello.gpus) == 2 and len(sample.gpus) == 2  # nothing dropped
    first = sample.gpus[0]
    assert first.state == "ok"
    for key in ("util_gpu", "util_mem", "mem_used_mib", "power_w"):
        value = getattr(first, key)
        assert value is not None or key in first.errors  # a value, or why there is none
        # The helper checked every value itself: none reached the client's decoder bad.
        assert first.errors.get(key) not in _DECODER_WORDS
    for info in hello.gpus:
        assert not set(info.errors.values()) & _DECODER_WORDS, info.errors
    assert sample.gpus[1].util_gpu == 0


def test_amd_gpu_is_a_gpu_for_the_helper(amdsmi_module: ModuleType) -> None:
    """The request paths (signal checks, holders, resets) take any Gpu: AmdGpu is one,
    and answers an NVML name as a missing function, never a call into amdsmi."""
    card = AmdGpu(amdsmi_module, 3, 0, object())
    assert card.read("nvmlDeviceGetMinorNumber").error == "FunctionNotFound"


def test_a_card_whose_activity_fails_reads_its_memory_once_a_sample(
    amdsmi_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Activity failing alone is a reading lost, not a failed card: the sample goes on
    with the memory, read once (it was read twice, once to judge the card)."""
    _no_nvidia_driver(monkeypatch)
    card = FakeAmdGpu()
    card.fail = {"amdsmi_get_gpu_activity": _status(amdsmi_module, "AMDSMI_STATUS_DRM_ERROR")}
    fake = FakeAmdSmi(amdsmi_module, [card]).install(monkeypatch)
    code, msgs = _once()
    assert code == 0
    (gpu,) = msgs[1]["gpus"]
    assert gpu["state"] == "ok" and gpu["util_gpu"] is None and gpu["mem_used_mib"] is not None
    assert fake.calls[("amdsmi_get_gpu_vram_usage", 0)] == 2  # the hello's total, the sample
