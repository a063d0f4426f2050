"""The simulator: spec parsing, plausible and changing readings, processes from env."""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gputui.remote.gpus import Gpu
from gputui.remote.nvml import NA, query
from gputui.remote.procs import ProcessTable, read_start_ticks
from gputui.remote.sim import engine as simmod
from gputui.remote.sim.engine import SimNvml
from gputui.remote.sim.env import EnvScanner, SimProc
from gputui.remote.sim.spec import Fault, parse_spec


def test_parse_valid_specs() -> None:
    spec = parse_spec("4xrtx3090")
    assert spec.models == ("rtx3090",) * 4 and spec.faults == ()
    spec = parse_spec("2xA100-80GB+2xh100, name=gpu-a.lab ,seed=7,fault=lost@1,fault=xid:79@3")
    assert spec.models == ("a100-80gb", "a100-80gb", "h100", "h100")
    assert spec.hostname == "gpu-a.lab" and spec.seed == 7
    assert spec.faults == (Fault("lost", 1), Fault("xid", 3, 79))
    assert parse_spec("l40s,fault=phantom@0").faults == (Fault("phantom", 0),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty sim spec: expected e.g. 4xrtx3090 or 2xa100-80gb+2xh100"),
        (
            "4xrtx9090",
            "unknown GPU model 'rtx9090' in '4xrtx9090' (known: a10, a100-40gb, "
            "a100-80gb, a100-80gb-mig, a100-80gb-migmix, a40, h100, h100-mig, h100-migmix, "
            "h200, l40s, mi210, mi300x, rtx2080super, rtx3090, rtx4080super, rtx4090, "
            "v100)",
        ),
        ("0xh100", "bad GPU count in '0xh100': must be at least 1"),
        ("2*h100", "bad GPU group '2*h100': expected [COUNT x]MODEL, e.g. 4xrtx3090"),
        ("h100+", "bad GPU group '': expected [COUNT x]MODEL, e.g. 4xrtx3090"),
        ("65xh100", "too many GPUs in '65xh100': at most 64 per host"),
        ("h100,seed=x", "bad seed 'x': expected an integer"),
        ("h100,name=bad host", "bad name 'bad host': use letters, digits, '-' and '.' (max 63)"),
        (
            "h100,color=red",
            "unknown option 'color=red': expected name=, seed=, cluster= or fault=",
        ),
        (
            "h100,fault",
            "bad option 'fault': expected name=HOST, seed=N, cluster=ID or fault=KIND@INDEX",
        ),
        ("h100,cluster=a/b", "bad cluster 'a/b': use letters, digits and '-' (max 32)"),
        (
            "h100,cluster=" + "a" * 33,
            f"bad cluster '{'a' * 33}': use letters, digits and '-' (max 32)",
        ),
        (
            "h100,fault=melt@0",
            "bad fault 'melt@0': kind must be one of lost, notsupported, "
            "unknown, xid:NN, ecc, throttle, phantom, orphan, hang, remap-pending, "
            "remap-failed, retired, hw-slowdown, pcie-down, nvlink-down, fabric, "
            "persistence-off, missing",
        ),
        ("h100,fault=lost", "bad fault 'lost': expected KIND@INDEX, e.g. lost@0"),
        (
            "h100,fault=lost@1",
            "bad fault 'lost@1': GPU 1 does not exist (the spec has 1 GPUs, 0..0)",
        ),
        (
            "h100,fault=xid:abc@0",
            "bad fault 'xid:abc@0': Xid must be a number 1..999, e.g. xid:79@0",
        ),
        ("rtx3090,fault=ecc@0", "bad fault 'ecc@0': rtx3090 has no ECC memory"),
        (
            "h100,fault=retired@0",
            "bad fault 'retired@0': h100 does not retire pages (it remaps rows, or has no ECC)",
        ),
        (
            "v100,fault=remap-pending@0",
            "bad fault 'remap-pending@0': v100 does not remap rows "
            "(retired pages instead, or no ECC)",
        ),
        ("a10,fault=nvlink-down@0", "bad fault 'nvlink-down@0': a10 has no NVLink"),
        ("a100-80gb,fault=fabric@0", "bad fault 'fabric@0': a100-80gb has no NVSwitch fabric"),
        (
            "h100,fault=-ecc@0",
            "bad fault '-ecc@0': a spec arms faults, clearing is at run time",
        ),
    ],
)
def test_parse_invalid_specs(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_spec(text)
    assert str(info.value) == message


class FakeScanner(EnvScanner):
    def __init__(self) -> None:
        super().__init__()
        self.procs: list[SimProc] = []

    def snapshot(self) -> list[SimProc]:
        return self.procs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _sim(spec: str) -> tuple[SimNvml, Clock, FakeScanner]:
    clock, scanner = Clock(), FakeScanner()
    nvml = SimNvml(parse_spec(spec), clock=clock, scanner=scanner)
    nvml.nvmlInit()
    return nvml, clock, scanner


def _read(gpu: Gpu) -> dict[str, Any]:
    return gpu.sample(ProcessTable())


def test_idle_readings_plausible_for_each_model() -> None:
    for model in (
        "rtx3090",
        "rtx4090",
        "rtx2080super",
        "rtx4080super",
        "a10",
        "a100-40gb",
        "a100-80gb",
        "h100",
        "h200",
        "l40s",
        "v100",
    ):
        nvml, _, _ = _sim(model)
        gpu = Gpu(nvml, 0)
        info = gpu.inventory()
        s = _read(gpu)
        assert s["state"] == "ok", model
        assert s["util_gpu"] == 0 and 20 <= s["power_w"] <= 80, (model, s)
        assert 25 <= s["temp_c"] <= 42, (model, s)
        assert s["mem_used_mib"] < 1024
        assert info["memory_total_mib"] == nvml.devices[0].model.memory_mib
        if model.startswith("rtx"):
            assert s["errors"].get("ecc_uncorrected") == "NotSupported"
            assert info["serial"] is None and s["fan_pct"] is not None
        else:
            assert s["ecc_uncorrected"] == 0


def test_readings_follow_load_and_change() -> None:
    nvml, clock, scanner = _sim("h100")
    gpu = Gpu(nvml, 0)
    gpu.inventory()
    idle = _read(gpu)
    scanner.procs = [SimProc(4242, ("0",), 30000, 100)]
    seen = []
    for _ in range(60):
        clock.now += 1.0
        seen.append(_read(gpu))
    busy = seen[-1]
    assert busy["util_gpu"] >= 90
    assert 550 <= busy["power_w"] <= 700
    assert 55 <= busy["temp_c"] <= 66 and busy["temp_c"] > idle["temp_c"]
    assert busy["mem_used_mib"] == 30000
    assert busy["clock_sm_mhz"] > 1900
    assert len({s["power_w"] for s in seen}) > 10  # noise: the numbers move
    temps = [s["temp_c"] for s in seen]
    assert temps[0] < temps[-1]  # the card warms up gradually
    assert [p["pid"] for p in busy["processes"]] == [4242]


def test_faults_in_sim() -> None:
    nvml, clock, _ = _sim(
        "rtx3090+h100+h100+a10,fault=notsupported@0,fault=lost@1,"
        "fault=throttle@2,fault=phantom@3,fault=ecc@2"
    )
    gpus = [Gpu(nvml, i) for i in range(4)]
    for g in gpus:
        g.inventory()
    states = []
    for _ in range(5):
        clock.now += 1
        states.append([_read(g) for g in gpus])
    last = states[-1]
    assert last[0]["errors"]["power_w"] == "NotSupported" and last[0]["power_w"] is None
    assert [s[1]["state"] for s in states] == ["ok", "ok", "ok", "lost", "lost"]
    assert last[2]["throttle"] == ["hw_slowdown", "hw_power_brake"]
    assert last[2]["ecc_uncorrected"] >= 1
    assert last[3]["mem_used_mib"] >= 11000  # memory held by no process
    assert last[3]["processes"] == []


def test_inject_and_xid_event() -> None:
    nvml, _, _ = _sim("2xh200")
    event_set = nvml.nvmlEventSetCreate()
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.nvmlDeviceRegisterEvents(handle, 8, event_set)
    with pytest.raises(Exception) as info:
        nvml.nvmlEventSetWait(event_set, 1)
    assert type(info.value).__name__ == "NVMLError_Timeout"
    nvml.inject("xid:48@1")
    data = nvml.nvmlEventSetWait(event_set, 1000)
    assert data.eventData == 48 and nvml.nvmlDeviceGetUUID(data.device) == nvml.devices[1].uuid
    nvml.inject("unknown@0")
    value = query(nvml, "nvmlDeviceGetTemperature", nvml.nvmlDeviceGetHandleByIndex(0), 0)
    assert isinstance(value, NA) and value.error == "Unknown"
    with pytest.raises(ValueError, match="GPU 5 does not exist"):
        nvml.inject("lost@5")


def test_uuids_deterministic_per_host_and_index() -> None:
    a = SimNvml(parse_spec("2xh100,name=node1"))
    b = SimNvml(parse_spec("2xh100,name=node1"))
    c = SimNvml(parse_spec("2xh100,name=node2"))
    assert [d.uuid for d in a.devices] == [d.uuid for d in b.devices]
    assert a.devices[0].uuid != a.devices[1].uuid != c.devices[1].uuid
    assert all(len(d.uuid) == 40 and d.uuid.startswith("GPU-") for d in a.devices)


@given(
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,31}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,31}", fullmatch=True),
)
def test_a_cluster_id_gives_every_card_an_identity_of_its_own(one: str, two: str) -> None:
    """Two simulated clusters (two demos) with the same host names: same place, same
    model, yet no UUID or serial in common; the same cluster id, the same cards."""
    assume(one != two)
    a = SimNvml(parse_spec(f"3xh100,name=gpu01,cluster={one}"))
    b = SimNvml(parse_spec(f"3xh100,name=gpu01,cluster={two}"))
    again = SimNvml(parse_spec(f"3xh100,name=gpu01,cluster={one}"))
    plain = SimNvml(parse_spec("3xh100,name=gpu01"))
    assert {d.uuid for d in a.devices}.isdisjoint({d.uuid for d in b.devices})
    assert {d.uuid for d in a.devices}.isdisjoint({d.uuid for d in plain.devices})
    assert {d.serial for d in a.devices}.isdisjoint({d.serial for d in b.devices})
    assert [d.uuid for d in a.devices] == [d.uuid for d in again.devices]
    assert all(len(d.uuid) == 40 and d.uuid.startswith("GPU-") for d in a.devices)


def test_real_process_with_env_is_on_sim_gpu(
    sim_process: Callable[..., subprocess.Popen[bytes]], wait_for: Callable[..., None]
) -> None:
    proc = sim_process("0", mem_mib=6000, util=70)
    nvml = SimNvml(parse_spec("2xa100-80gb,name=simhost"))
    nvml.nvmlInit()
    gpu0, gpu1 = Gpu(nvml, 0), Gpu(nvml, 1)
    gpu0.inventory()
    gpu1.inventory()
    table = ProcessTable()
    found: dict[str, Any] = {}

    def seen() -> bool:
        nvml.scanner._last = -1e18  # force a rescan on every poll
        procs = {p["pid"]: p for p in gpu0.sample(table)["processes"]}
        found.update(procs.get(proc.pid, {}))
        return proc.pid in procs

    wait_for(seen)
    assert found["uid"] == os.getuid()
    assert found["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert found["command"] == "sleep 120"
    assert found["start_ticks"] == read_start_ticks(proc.pid)
    assert found["gpu_mem_mib"] == 6000
    assert proc.pid not in {p["pid"] for p in gpu1.sample(table)["processes"]}


def test_scanner_reads_environ_once_per_pid(
    sim_process: Callable[..., subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = sim_process("1")
    scanner = EnvScanner(min_interval=0)
    assert any(p.pid == proc.pid for p in scanner.snapshot())
    calls = []
    original = scanner._classify
    monkeypatch.setattr(scanner, "_classify", lambda pid: calls.append(pid) or original(pid))
    scanner.snapshot()
    assert proc.pid not in calls
    assert simmod.ENV_GPU == "GPUTUI_SIM_GPU"


def test_mig_models_show_their_slices_through_the_helper() -> None:
    """The MIG-enabled sim models: MIG mode on, the admin's slices under each card, and
    a process that names a slice's MIG- UUID counted on that slice and on its card."""
    from gputui.remote.gpus import Gpu
    from gputui.remote.procs import ProcessTable
    from gputui.remote.sim.engine import SimNvml

    lib = SimNvml(parse_spec("a100-80gb-migmix+h100-mig+a100-80gb,name=m"))
    lib.nvmlInit()
    gpus = [Gpu(lib, i) for i in range(3)]
    infos = [g.inventory() for g in gpus]
    assert [s["profile"] for s in infos[0]["mig"]] == ["3g.40gb", "2g.20gb", "2g.20gb"]
    assert [s["profile"] for s in infos[1]["mig"]] == ["1g.10gb"] * 7
    assert infos[2]["mig_mode"] is False and "mig" not in infos[2]
    assert {s["parent_uuid"] for s in infos[0]["mig"]} == {infos[0]["uuid"]}
    out = gpus[1].sample(ProcessTable())
    assert [s["mem_total_mib"] for s in out["mig"]] == [9984] * 7
    assert {s["errors"]["util_gpu"] for s in out["mig"]} == {"NotSupported"}


def test_every_model_has_an_architecture() -> None:
    """A model without one cannot be simulated at all (``SimGpu`` reads it)."""
    from gputui.remote.sim.spec import ARCH, MODELS

    assert set(MODELS) <= set(ARCH)
