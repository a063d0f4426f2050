"""The helper against a fake NVML: the real pynvml functions stubbed with real errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gputui.remote import procs
from gputui.remote.gpus import Gpu
from gputui.remote.helper import Helper
from gputui.remote.procs import ProcessTable
from gputui.remote.wire import Output
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Hello, Sample

RESERVED_MIB = 615  # the fake driver's reserved memory (conftest)
RunOnce = Any
FakeNvml = Any


def test_three_gpu_host_hello_and_sample(run_once: RunOnce, fake_nvml: FakeNvml) -> None:
    code, msgs = run_once()
    assert code == 0
    hello, sample = msgs
    assert hello["type"] == "hello" and hello["protocol"] == 1
    assert hello["driver"] == "535.161.08"  # bytes from an old binding, decoded
    assert hello["cuda"] == "12.2"
    assert [g["uuid"] for g in hello["gpus"]] == [
        "GPU-aaaaaaaa-0000-0000-0000-000000000000",
        "GPU-bbbbbbbb-0000-0000-0000-000000000000",
        "GPU-cccccccc-0000-0000-0000-000000000000",
    ]
    h100 = hello["gpus"][0]
    assert h100["memory_total_mib"] == 81559
    assert h100["power_limit_w"] == 700.0
    assert (h100["pcie_max_gen"], h100["pcie_max_width"]) == (5, 16)
    assert h100["mig_mode"] is False
    assert h100["pci_bus_id"] == "00000000:18:00.0"
    busy, idle, geforce = sample["gpus"]
    assert sample["seq"] == 1
    assert busy["state"] == "ok"
    assert busy["util_gpu"] == 100 and busy["mem_used_mib"] == 19818
    assert busy["power_w"] == 631.95 and busy["temp_c"] == 59
    assert busy["clock_sm_mhz"] == 1980 and busy["throttle"] == []
    # An H100 remaps rows rather than retiring pages: only those (and the fan) are N/A.
    assert busy["fan_pct"] is None and busy["errors"] == {
        "fan_pct": "NotSupported",
        "retired_sbe": "NotSupported",
        "retired_dbe": "NotSupported",
        "retired_pending": "NotSupported",
    }
    assert idle["throttle"] == []  # gpu_idle is not a limit worth flagging
    assert geforce["fan_pct"] == 41
    assert geforce["ecc_uncorrected"] is None
    assert geforce["errors"]["ecc_uncorrected"] == "NotSupported"
    # The client's own decoder accepts every line.
    assert isinstance(decode_helper_line(_line(hello)), Hello)
    assert isinstance(decode_helper_line(_line(sample)), Sample)


def _line(obj: dict[str, object]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _helper() -> Helper:
    helper = Helper(pynvml, Output(io.BytesIO()), "host", simulated=False)
    helper.hello()
    return helper


def test_one_gpu_lost_others_keep_streaming(fake_nvml: FakeNvml) -> None:
    helper = _helper()
    first = helper.sample()
    assert [g["state"] for g in first["gpus"]] == ["ok", "ok", "ok"]
    fake_nvml.gpus[1].fail["nvmlDeviceGetPowerUsage"] = "GpuIsLost"
    second = helper.sample()
    assert [g["state"] for g in second["gpus"]] == ["ok", "lost", "ok"]
    assert "GpuIsLost" in second["gpus"][1]["message"]
    used = fake_nvml.uses(1)
    for _ in range(3):
        later = helper.sample()
        assert [g["state"] for g in later["gpus"]] == ["ok", "lost", "ok"]
        assert later["gpus"][2]["util_gpu"] == 100
    assert fake_nvml.uses(1) == used  # the lost handle is never touched again
    assert helper.gpu_pids(fake_nvml.gpus[1].uuid) is None
    assert decode_helper_line(_line(later)).gpus[1].state == "lost"  # type: ignore[union-attr]


def test_handle_acquisition_failure_is_lost_gpu(run_once: RunOnce, fake_nvml: FakeNvml) -> None:
    fake_nvml.gpus[0].fail["nvmlDeviceGetHandleByIndex"] = "GpuIsLost"
    _, (hello, sample) = run_once()
    assert hello["gpus"][0]["errors"] == {"handle": "GpuIsLost"}
    assert sample["gpus"][0]["state"] == "lost"
    assert [g["state"] for g in sample["gpus"][1:]] == ["ok", "ok"]


def test_unknown_error_on_one_field(run_once: RunOnce, fake_nvml: FakeNvml) -> None:
    fake_nvml.gpus[0].fail["nvmlDeviceGetTemperature"] = "Unknown"
    _, (_, sample) = run_once()
    gpu = sample["gpus"][0]
    assert gpu["state"] == "ok"
    assert gpu["temp_c"] is None and gpu["errors"]["temp_c"] == "Unknown"
    assert gpu["power_w"] == 631.95


def test_geforce_power_and_fan_not_supported(run_once: RunOnce, fake_nvml: FakeNvml) -> None:
    g = fake_nvml.gpus[2]
    g.fail["nvmlDeviceGetPowerUsage"] = "NotSupported"
    g.fan = None
    _, (_, sample) = run_once()
    gpu = sample["gpus"][2]
    assert gpu["power_w"] is None and gpu["fan_pct"] is None
    assert gpu["errors"]["power_w"] == "NotSupported"
    assert gpu["errors"]["fan_pct"] == "NotSupported"
    assert gpu["power_limit_w"] == 350.0


def test_function_missing_on_old_driver(
    run_once: RunOnce, fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons")
    fake_nvml.gpus[0].fail["nvmlDeviceGetCurrPcieLinkGeneration"] = "FunctionNotFound"
    _, (_, sample) = run_once()
    gpu = sample["gpus"][0]
    assert gpu["state"] == "ok"
    assert gpu["throttle"] is None and gpu["errors"]["throttle"] == "FunctionNotFound"
    assert gpu["errors"]["pcie_gen"] == "FunctionNotFound"


def test_process_that_vanished(run_once: RunOnce, fake_nvml: FakeNvml) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    me = os.getpid()
    fake_nvml.gpus[0].procs = [(me, 1024), (gone.pid, 512)]
    _, (_, sample) = run_once()
    procs = {p["pid"]: p for p in sample["gpus"][0]["processes"]}
    assert procs[me]["uid"] == os.getuid() and procs[me]["gpu_mem_mib"] == 1024
    assert procs[me]["start_ticks"] and procs[me]["command"]
    assert procs[gone.pid]["gpu_mem_mib"] == 512
    assert procs[gone.pid]["uid"] is None and procs[gone.pid]["start_ticks"] is None


def test_unexpected_exception_is_gpu_error_state(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(handle: object) -> object:
        raise RuntimeError("ctypes surprise")

    monkeypatch.setattr(pynvml, "nvmlDeviceGetUtilizationRates", broken)
    helper = _helper()
    sample = helper.sample()
    assert all(g["state"] == "error" for g in sample["gpus"])
    assert "ctypes surprise" in sample["gpus"][0]["message"]


def test_nvml_init_driver_mismatch(run_once: RunOnce, fake_nvml: FakeNvml) -> None:
    fake_nvml.init_error = "LibRmVersionMismatch"
    code, msgs = run_once()
    assert code != 0
    hello, error = msgs
    assert hello["type"] == "hello" and hello["gpus"] == []
    assert hello["errors"]["nvml"].startswith("LibRmVersionMismatch: ")
    assert error["type"] == "error" and error["fatal"] is True
    assert "version mismatch" in error["message"]
    decode_helper_line(_line(hello))
    decode_helper_line(_line(error))


def test_event_registration_unsupported_is_recorded(run_once: RunOnce, fake_nvml: FakeNvml) -> None:
    fake_nvml.gpus[2].fail["nvmlDeviceRegisterEvents"] = "NotSupported"
    _, (hello, sample) = run_once()
    assert hello["gpus"][2]["errors"]["xid_events"] == "NotSupported"
    assert sample["gpus"][2]["state"] == "ok"


def _fake_proc(root: Path, pid: int, start_ticks: int, command: str) -> None:
    """What the process table reads of ``pid`` under a fake /proc at ``root``."""
    (root / "stat").write_text("cpu  1 2 3 4\nbtime 1700000000\n")
    entry = root / str(pid)
    entry.mkdir(exist_ok=True)
    fields = ["S", *["0"] * 18, str(start_ticks), "0", "0"]  # field 22 is the start time
    (entry / "stat").write_text(f"{pid} (a (tricky) name) {' '.join(fields)}\n")
    (entry / "status").write_text(f"Name:\tpython\nUid:\t{os.getuid()}\t0\t0\t0\n")
    (entry / "cmdline").write_bytes(command.replace(" ", "\0").encode() + b"\0")


def test_gpu_reader_direct_table_cache(
    fake_nvml: FakeNvml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each sample re-reads only a pid's start time; a reused pid is described afresh."""
    described: list[int] = []
    describe = procs.describe
    monkeypatch.setattr(
        procs,
        "describe",
        lambda pid, proc, **kw: described.append(pid) or describe(pid, proc, **kw),
    )
    _fake_proc(tmp_path, 4242, 1000, "python train.py")
    gpu = Gpu(pynvml, 0)
    gpu.inventory()
    fake_nvml.gpus[0].procs = [(4242, 100)]
    table = ProcessTable(str(tmp_path))
    first = gpu.sample(table)["processes"][0]
    assert first["command"] == "python train.py" and first["start_ticks"] == 1000
    assert first["uid"] == os.getuid()
    (tmp_path / "4242" / "cmdline").write_bytes(b"renamed\0")  # not read again: cached
    second = gpu.sample(table)["processes"][0]
    assert second == first and described == [4242]
    # The pid now belongs to another process (new start time): read it all again.
    _fake_proc(tmp_path, 4242, 2000, "sleep 60")
    third = gpu.sample(table)["processes"][0]
    assert third["command"] == "sleep 60" and third["start_ticks"] == 2000
    assert described == [4242, 4242]
    # A pid gone from every GPU is forgotten, so the cache stays the size of the GPUs' load.
    table.keep_only([])
    assert gpu.sample(table)["processes"][0]["command"] == "sleep 60"
    assert described == [4242, 4242, 4242]


def test_memory_used_matches_nvidia_smi_v2_and_falls_back_to_v1(
    run_once: RunOnce, fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, (_, sample) = run_once()
    used = {g["index"]: g["mem_used_mib"] for g in sample["gpus"]}
    assert used == {i: g.used_mib for i, g in enumerate(fake_nvml.gpus)}
    # An old binding without the version argument: v1, reserved memory counted as used.
    monkeypatch.delattr(pynvml, "nvmlMemory_v2")
    _, (_, sample) = run_once()
    assert sample["gpus"][0]["mem_used_mib"] == fake_nvml.gpus[0].used_mib + RESERVED_MIB
