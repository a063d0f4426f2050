"""The simulator's AMD models: read through the simulated amdsmi with the helper's own
AMD code, faults on them, and mixed hosts."""

from __future__ import annotations

import io

import pytest

from gputui.remote.helper import Helper
from gputui.remote.procs import ProcessTable
from gputui.remote.sim.amdsmi import SimAmdSmi
from gputui.remote.sim.engine import SimNvml
from gputui.remote.sim.spec import parse_spec
from gputui.remote.wire import Output


def _helper(spec: str) -> tuple[Helper, SimNvml]:
    nvml = SimNvml(parse_spec(spec), scanner=None)
    amd = SimAmdSmi(nvml)
    nvml.nvmlInit()
    amd.amdsmi_init()
    helper = Helper(nvml, Output(io.BytesIO()), nvml.hostname, True, amd=amd)
    helper.table = ProcessTable(proc="/nonexistent")
    return helper, nvml


def test_a_mixed_simulated_host() -> None:
    helper, _ = _helper("2xh100+1xmi300x+1xmi210,name=mix")
    gpus = helper.hello()["gpus"]
    assert [(g["index"], g["vendor"], g["vendor_index"]) for g in gpus] == [
        (0, "nvidia", 0),
        (1, "nvidia", 1),
        (2, "amd", 0),
        (3, "amd", 1),
    ]
    assert [g["name"] for g in gpus[2:]] == ["AMD Instinct MI300X", "AMD Instinct MI210"]
    assert (gpus[2]["memory_total_mib"], gpus[2]["power_limit_w"]) == (196592, 750.0)
    sample = helper.sample()["gpus"]
    assert [g["state"] for g in sample] == ["ok"] * 4
    mi300x, mi210 = sample[2:]
    assert mi300x["power_w"] == pytest.approx(140, abs=10)  # idle
    assert mi210["temp_c"] == 36  # its edge sensor; an MI300X reads its hotspot
    assert mi300x["temp_c"] > 40


def test_a_lost_amd_card_errors_alone_and_faults_inject_by_host_index() -> None:
    helper, nvml = _helper("1xh100+2xmi210,fault=lost@1")
    helper.hello()
    for _ in range(4):
        states = [g["state"] for g in helper.sample()["gpus"]]
    assert states == ["ok", "error", "ok"]
    nvml.inject("notsupported@2")  # the host's index: the second AMD card
    last = helper.sample()["gpus"][2]
    assert last["state"] == "ok" and last["errors"]["power_w"] == "NotSupported"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("2xmi300x,fault=xid:79@0", "mi300x is an AMD card"),
        ("1xh100+1xmi210,fault=nvlink-down@1", "mi210 is an AMD card"),
    ],
)
def test_nvml_only_faults_are_refused_on_amd_models(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_spec(spec)
