"""The simulator's health readings and faults, seen as a client sees them: each fault
shows in a decoded sample, and reads as before once cleared."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from gputui.remote.gpu_health import HealthClock
from gputui.remote.helper import Helper
from gputui.remote.sim.engine import SimNvml
from gputui.remote.sim.env import EnvScanner, SimProc
from gputui.remote.sim.spec import FAULT_HELP, FAULT_KINDS, HEALTH, MODELS, parse_spec
from gputui.remote.wire import Output
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import GpuSample, Hello, Sample


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


class SimHost:
    """A helper on a simulated NVML, every sample with the health readings, decoded."""

    def __init__(self, spec: str) -> None:
        self.clock, self.scanner = Clock(), FakeScanner()
        self.nvml = SimNvml(parse_spec(spec), clock=self.clock, scanner=self.scanner)
        self.nvml.nvmlInit()
        self.helper = Helper(
            self.nvml, Output(io.BytesIO()), "simhost", True, HealthClock(1.0, self.clock)
        )
        hello = decode_helper_line(json.dumps(self.helper.hello()))
        assert isinstance(hello, Hello)
        self.hello = hello

    def load(self, gpu: int) -> None:
        self.scanner.procs = [SimProc(4242, (str(gpu),), 8000, 95)]

    def sample(self) -> tuple[GpuSample, ...]:
        self.clock.now += 1.0
        sample = decode_helper_line(json.dumps(self.helper.sample()))
        assert isinstance(sample, Sample) and not sample.notes
        assert all(g.health_read for g in sample.gpus if g.state == "ok")
        return sample.gpus


def test_per_model_support_is_realistic() -> None:
    host = SimHost("rtx3090+a10+a100-80gb+h100+h200+l40s+v100")
    geforce, a10, a100, h100, h200, l40s, v100 = host.sample()
    for gpu in (geforce, a10, a100, h100, h200, l40s, v100):
        assert gpu.state == "ok" and gpu.pcie_replays == 0
        assert gpu.remap_pending in (False, None) and gpu.retired_pending in (False, None)
    for name in (
        "remap_pending",
        "retired_sbe",
        "ecc_uncorrected_total",
        "nvlinks",
        "fabric_state",
    ):
        assert getattr(geforce, name) is None and geforce.errors[name] == "NotSupported", name
    assert geforce.persistence is False
    for gpu in (a10, a100, h100, h200, l40s):  # remapping, no page retirement
        assert gpu.remapped_uncorrectable == 0 and gpu.remap_failed is False
        assert gpu.errors["retired_dbe"] == "NotSupported"
        assert gpu.persistence is True and gpu.ecc_uncorrected_total == 0
    assert v100.retired_dbe == 0 and v100.errors["remap_pending"] == "NotSupported"
    links = {g.index: len(g.nvlinks) if g.nvlinks is not None else None for g in host.sample()}
    assert links == {0: None, 1: None, 2: 12, 3: 18, 4: 18, 5: None, 6: 6}
    assert a10.errors["nvlinks"] == "NotSupported"
    assert (h100.fabric_state, h200.fabric_state) == ("completed", "completed")
    assert a100.fabric_state is None and a100.errors["fabric_state"] == "NotSupported"
    thresholds = {g.index: (g.temp_slowdown_c, g.temp_shutdown_c) for g in host.hello.gpus}
    assert thresholds[0] == (95, 98) and thresholds[3] == (89, 95)
    assert all(slow < shut for slow, shut in thresholds.values())  # type: ignore[operator]


# kind, spec, the GPU it is on, whether it needs load, and what shows while armed.
Check = Callable[[list[GpuSample]], bool]
FAULTS: list[tuple[str, str, bool, Check, Check]] = [
    (
        "remap-pending",
        "h100",
        False,
        lambda s: s[-1].remap_pending is True and s[-1].remapped_uncorrectable == 1,
        lambda s: s[-1].remap_pending is False and s[-1].remapped_uncorrectable == 0,
    ),
    (
        "remap-failed",
        "a100-80gb",
        False,
        lambda s: s[-1].remap_failed is True and (s[-1].remapped_uncorrectable or 0) >= 1,
        lambda s: s[-1].remap_failed is False,
    ),
    (
        "retired",
        "v100",
        False,
        lambda s: (s[-1].retired_sbe, s[-1].retired_dbe, s[-1].retired_pending) == (2, 1, True),
        lambda s: (s[-1].retired_sbe, s[-1].retired_dbe, s[-1].retired_pending) == (0, 0, False),
    ),
    (
        "ecc",
        "h200",
        False,
        lambda s: (
            (s[-1].ecc_uncorrected_total or 0) >= 1
            and s[-1].ecc_uncorrected_total == s[-1].ecc_uncorrected
            and (s[-1].ecc_corrected_total or 0) > (s[-1].ecc_uncorrected_total or 0)
        ),
        lambda s: (s[-1].ecc_uncorrected, s[-1].ecc_uncorrected_total) == (0, 0),
    ),
    (
        "hw-slowdown",
        "h100",
        True,
        lambda s: "hw_slowdown" in (s[-1].throttle or ()) and (s[-1].clock_sm_mhz or 0) <= 990,
        lambda s: "hw_slowdown" not in (s[-1].throttle or ()) and (s[-1].clock_sm_mhz or 0) > 1900,
    ),
    (
        "pcie-down",
        "h100",
        True,
        lambda s: (
            (s[-1].pcie_gen, s[-1].pcie_width) == (3, 8)
            and (s[-1].pcie_replays or 0) > (s[0].pcie_replays or 0)
        ),
        lambda s: (s[-1].pcie_gen, s[-1].pcie_width, s[-1].pcie_replays) == (5, 16, 0),
    ),
    (
        "nvlink-down",
        "h200",
        False,
        lambda s: (
            s[-1].nvlinks is not None
            and [link.link for link in s[-1].nvlinks if not link.active] == [0]
            and (s[-1].nvlinks[0].crc_flit_errors or 0) > (s[0].nvlinks or ())[0].crc_flit_errors  # type: ignore[operator]
            and (s[-1].nvlinks[0].crc_data_errors or 0) > 0
        ),
        lambda s: (
            s[-1].nvlinks is not None
            and all(link.active and link.crc_flit_errors == 0 for link in s[-1].nvlinks)
        ),
    ),
    (
        "persistence-off",
        "a10",
        False,
        lambda s: s[-1].persistence is False,
        lambda s: s[-1].persistence is True,
    ),
    (
        "orphan",
        "l40s",
        False,
        lambda s: (s[-1].mem_used_mib or 0) >= 20000 and s[-1].processes == (),
        lambda s: (s[-1].mem_used_mib or 0) < 1024,
    ),
]


@pytest.mark.parametrize(("kind", "model", "loaded", "shows", "cleared"), FAULTS)
@pytest.mark.parametrize("how", ["-KIND@INDEX", "clear@INDEX"])
def test_each_fault_shows_in_a_decoded_sample_and_clears(
    kind: str, model: str, loaded: bool, shows: Check, cleared: Check, how: str
) -> None:
    host = SimHost(f"rtx3090+{model}")
    if loaded:
        host.load(1)
    samples = [host.sample() for _ in range(12)]  # warmed up under its load
    before = [gpus[1] for gpus in samples]
    assert cleared(before), before[-1]
    host.nvml.inject(f"{kind}@1")
    armed = [host.sample()[1] for _ in range(6)]
    assert shows(armed), armed[-1]
    assert not cleared(armed)
    other = host.sample()[0]  # the other GPU: untouched
    assert other.errors == samples[-1][0].errors and other.throttle == samples[-1][0].throttle
    result = host.nvml.inject(how.replace("KIND", kind).replace("INDEX", "1"))
    assert result.cleared and result.gpu == 1
    after = [host.sample()[1] for _ in range(12)]
    assert cleared(after), after[-1]
    assert not shows(after)


def test_a_fault_in_the_spec_is_there_from_the_first_sample() -> None:
    host = SimHost("2xh100,fault=remap-failed@1,fault=persistence-off@0")
    first = host.sample()
    assert first[1].remap_failed is True and first[0].remap_failed is False
    assert first[0].persistence is False and first[1].persistence is True


def test_fabric_reads_in_progress_then_not_started_then_completed_once_cleared() -> None:
    host = SimHost("h100+h100")
    assert host.sample()[0].fabric_state == "completed"
    host.nvml.inject("fabric@0")
    states = [host.sample()[0].fabric_state for _ in range(6)]
    assert states[:2] == ["in-progress", "in-progress"]
    assert states[-2:] == ["not-started", "not-started"]
    assert host.sample()[1].fabric_state == "completed"
    host.nvml.inject("-fabric@0")
    assert host.sample()[0].fabric_state == "completed"


def test_a_missing_gpu_is_absent_from_the_count_and_the_others_keep_their_identity() -> None:
    whole = SimHost("4xh100,name=node7")
    short = SimHost("4xh100,name=node7,fault=missing@1,fault=ecc@2")
    assert len(short.hello.gpus) == 3
    assert [g.index for g in short.hello.gpus] == [0, 1, 2]
    uuids = [g.uuid for g in whole.hello.gpus]
    assert [g.uuid for g in short.hello.gpus] == [uuids[0], uuids[2], uuids[3]]
    for _ in range(4):
        gpus = short.sample()
    assert (gpus[1].ecc_uncorrected or 0) >= 1  # the fault went to the card named, GPU 2
    assert gpus[1].uuid == uuids[2] and gpus[0].ecc_uncorrected == 0
    with pytest.raises(ValueError, match="put fault=missing@INDEX in the spec"):
        short.nvml.inject("missing@0")
    # An Xid event names the card by its new NVML index.
    nvml = short.nvml
    events = nvml.nvmlEventSetCreate()
    for index in range(3):
        nvml.nvmlDeviceRegisterEvents(nvml.nvmlDeviceGetHandleByIndex(index), 8, events)
    nvml.inject("xid:79@2")
    data = nvml.nvmlEventSetWait(events, 1000)
    assert nvml.nvmlDeviceGetUUID(data.device) == uuids[3]


def test_lost_and_xid_clear_too() -> None:
    host = SimHost("2xh100")
    host.nvml.inject("xid:79@0")
    assert host.nvml.kernel_log_lines()
    host.nvml.inject("lost@1")
    assert host.sample()[1].state == "lost"
    host.nvml.inject("clear@1")
    host.nvml.inject("-xid@0")
    assert host.nvml.kernel_log_lines() == []
    # NVML answers again; the running helper keeps the handle it dropped (a real one
    # would need a restart to see the card again).
    handle = host.nvml.nvmlDeviceGetHandleByIndex(1)
    assert host.nvml.nvmlDeviceGetUUID(handle) == host.hello.gpus[1].uuid


def test_a_hung_call_returns_once_the_hang_is_cleared() -> None:
    host = SimHost("h100")
    host.nvml.inject("hang@0")
    handle = host.nvml.nvmlDeviceGetHandleByIndex(0)
    done = threading.Event()

    def call() -> None:
        host.nvml.nvmlDeviceGetUtilizationRates(handle)
        done.set()

    threading.Thread(target=call, daemon=True).start()
    assert not done.wait(0.2)  # stuck, as a hung driver call is
    host.nvml.inject("-hang@0")
    assert done.wait(10)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-melt@0", "kind must be one of"),
        ("retired@0", "h100 does not retire pages"),
        ("-lost@3", "GPU 3 does not exist"),
        ("clear@", "expected KIND@INDEX"),
        ("\x1b[31m" + "x" * 500 + "@0", "kind must be one of"),
    ],
)
def test_a_bad_change_is_one_clear_error(text: str, message: str) -> None:
    host = SimHost("2xh100")
    with pytest.raises(ValueError, match=message) as info:
        host.nvml.inject(text)
    assert len(str(info.value)) < 300


def test_every_fault_kind_is_described_and_every_model_has_health_facts() -> None:
    assert set(FAULT_HELP) == set(FAULT_KINDS)
    assert all(0 < len(line) <= 90 for line in FAULT_HELP.values())
    assert set(HEALTH) == set(MODELS)


def test_the_sim_request_clears_a_fault_over_the_wire(start_helper: Any) -> None:
    helper = start_helper(["--sim", "2xh100", "--interval", "0.1", "--health-every", "1"])
    helper.expect(lambda m: m["type"] == "sample")
    helper.send({"id": 1, "op": "sim", "fault": "remap-pending@1"})
    assert helper.result(1)["value"] == {
        "fault": "remap-pending",
        "gpu": 1,
        "xid": None,
        "cleared": False,
    }

    def health(pending: bool) -> Callable[[dict[str, Any]], bool]:
        def match(m: dict[str, Any]) -> bool:
            if m["type"] != "sample" or not m["gpus"][1].get("health_read"):
                return False
            gpu = decode_helper_line(json.dumps(m)).gpus[1]  # type: ignore[union-attr]
            return bool(gpu.remap_pending is pending)

        return match

    helper.expect(health(True))
    helper.send({"id": 2, "op": "sim", "fault": "-remap-pending@1"})
    assert helper.result(2)["value"]["cleared"] is True
    helper.expect(health(False))
    helper.send({"id": 3, "op": "sim", "fault": "missing@0"})
    refused = helper.result(3)
    assert refused["ok"] is False and "in the spec" in refused["error"]
