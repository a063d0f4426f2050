"""Unknown apart from not applicable: which checks a card could not answer matter.

Per model, the readings are what the helper itself reads from the simulator's
stubbed NVML (the same ``Gpu.sample`` a real host runs; each model answers
NotSupported where the real card does, as the captured nvidia-smi output of A100,
H100, L40S, RTX 2080/3090/4080 and V100 cards shows). Then hand-built readings for
what a model should have and did not answer, and a hypothesis property over any
errors and readings.
"""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from gputui.cli.health import as_json, as_text
from gputui.config.models import HealthThresholds
from gputui.health.applicable import SHOULD_HAVE_IT, ampere_or_later, verdict
from gputui.health.board import HealthBoard
from gputui.health.problems import _CHECKED, not_applicable_checks, unknown_checks
from gputui.remote.helper import Helper
from gputui.remote.sim.engine import SimNvml
from gputui.remote.sim.spec import parse_spec
from gputui.remote.wire import Output
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import GpuInfo, GpuSample, Hello, Sample

NOW = 1_800_000_000.0
UUID = "GPU-9402681f-397d-7f4f-8b6c-d4783a3a11d5"


def _cards(model: str, count: int = 1) -> list[tuple[GpuSample, GpuInfo]]:
    lib = SimNvml(parse_spec(f"{count}x{model},name=na-{model}"))
    lib.nvmlInit()
    helper = Helper(lib, Output(io.BytesIO()), f"na-{model}", simulated=True)
    helper.hello()
    return [
        (
            TypeAdapter(GpuSample).validate_python(gpu.sample(helper.table, health=True)),
            GpuInfo.model_validate(gpu.inventory()),
        )
        for gpu in helper.gpus
    ]


def _readings(model: str) -> tuple[GpuSample, GpuInfo]:
    return _cards(model)[0]


# model: (unknown, not applicable)
MODELS: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "a100-80gb": ([], ["retired pages", "NVSwitch fabric"]),
    "h100": ([], ["retired pages"]),
    "h200": ([], ["retired pages"]),
    "l40s": ([], ["retired pages", "NVLink", "NVSwitch fabric"]),
    "a10": ([], ["retired pages", "NVLink", "NVSwitch fabric"]),
    "v100": ([], ["row remapping", "NVSwitch fabric"]),
    "rtx3090": (
        [("ECC", "NotSupported")],
        ["row remapping", "retired pages", "NVLink", "NVSwitch fabric"],
    ),
    "rtx2080super": (
        [("ECC", "NotSupported")],
        ["row remapping", "retired pages", "NVLink", "NVSwitch fabric"],
    ),
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_model_lists_only_what_applies_to_it_as_not_checked(model: str) -> None:
    sample, info = _readings(model)
    unknown, moot = MODELS[model]
    assert unknown_checks(sample, sample, info) == unknown
    assert not_applicable_checks(sample, sample, info) == moot


def _health(name: str, **fields: Any) -> tuple[GpuSample, GpuInfo]:
    errors = fields.pop("errors", {})
    sample = GpuSample(index=0, uuid=UUID, health_read=True, errors=errors, **fields)
    return sample, GpuInfo(index=0, uuid=UUID, name=name)


def test_a_feature_the_model_has_and_did_not_answer_stays_unknown_and_says_so() -> None:
    # An SXM H100 on an NVSwitch fabric has NVLinks: NotSupported there is a gap.
    h100, info = _health(
        "NVIDIA H100 80GB HBM3", fabric_state="completed", errors={"nvlinks": "NotSupported"}
    )
    assert unknown_checks(h100, None, info) == [("NVLink", SHOULD_HAVE_IT)]
    # An A100 remaps rows; a V100 retires pages.
    a100, info = _health("NVIDIA A100-SXM4-80GB", errors={"remap_pending": "NotSupported"})
    assert unknown_checks(a100, None, info) == [("row remapping", SHOULD_HAVE_IT)]
    # A V100 does not remap rows, whatever its retired pages read.
    v100, info = _health(
        "Tesla V100-SXM2-32GB",
        errors={"remap_pending": "NotSupported", "retired_pending": "Unknown"},
    )
    assert unknown_checks(v100, None, info) == [("retired pages", "Unknown")]
    assert not_applicable_checks(v100, None, info) == ["row remapping"]
    v100, info = _health("Tesla V100-SXM2-32GB", errors={"retired_pending": "NotSupported"})
    assert unknown_checks(v100, None, info) == [("retired pages", SHOULD_HAVE_IT)]
    assert not_applicable_checks(v100, None, info) == []


def test_a_model_not_known_is_judged_by_its_other_readings() -> None:
    remaps, info = _health(
        "Acme X1", remap_pending=False, errors={"retired_pending": "NotSupported"}
    )
    assert unknown_checks(remaps, None, info) == []
    assert not_applicable_checks(remaps, None, info) == ["retired pages"]
    neither, info = _health(
        "Acme X1", errors={"retired_pending": "NotSupported", "remap_pending": "NotSupported"}
    )
    assert unknown_checks(neither, None, info) == [
        ("row remapping", "NotSupported"), ("retired pages", "NotSupported"),
    ]  # fmt: skip


@pytest.mark.parametrize("error", ["Unknown", "GpuIsLost", "Timeout", "NoPermission"])
def test_any_other_error_is_unknown_even_for_a_feature_the_card_lacks(error: str) -> None:
    pcie, info = _health("NVIDIA L40S", errors={"nvlinks": error, "fabric_state": error})
    assert unknown_checks(pcie, None, info) == [("NVLink", error), ("NVSwitch fabric", error)]
    assert not_applicable_checks(pcie, None, info) == []


@pytest.mark.parametrize(
    ("name", "modern"),
    [
        ("NVIDIA A100-SXM4-80GB", True), ("NVIDIA A100 80GB PCIe", True), ("NVIDIA A10", True),
        ("NVIDIA H100 80GB HBM3", True), ("NVIDIA H200", True), ("NVIDIA GH200 480GB", True),
        ("NVIDIA L40S", True), ("NVIDIA B200", True), ("NVIDIA RTX A6000", True),
        ("NVIDIA GeForce RTX 3090", True), ("NVIDIA GeForce RTX 4080 SUPER", True),
        ("Tesla V100-SXM2-32GB", False), ("Tesla T4", False), ("Tesla P100-PCIE-16GB", False),
        ("NVIDIA GeForce RTX 2080 SUPER", False), ("Quadro RTX 8000", False),
        ("NVIDIA TITAN V", False), ("NVIDIA GeForce GTX 1080 Ti", False),
        ("Acme X1", None), ("", None),
    ],
)  # fmt: skip
def test_architecture_by_name(name: str, modern: bool | None) -> None:
    assert ampere_or_later(name) is modern


def test_the_cli_and_json_say_not_checked_only_for_what_applies() -> None:
    cards = _cards("rtx3090", 2)
    hello = Hello(protocol=1, helper_version="t", hostname="h1", gpus=[i for _, i in cards])
    snapshot = HostSnapshot(
        name="h1", address="h1", status=HostStatus.LIVE, hello=hello,
        sample=Sample(seq=1, time=NOW, gpus=[g for g, _ in cards]), received_at=NOW,
    )  # fmt: skip
    board = HealthBoard(HealthThresholds(), {"h1": None})
    board.observe(snapshot, NOW)
    text = as_text(board, 1, 200)
    assert text.splitlines()[-1] == "not checked (unknown, not ok): h1: ECC (NotSupported)"
    report = as_json(board, 1)
    assert report["unknown"] == [
        {"host": "h1", "gpu": gpu, "check": "ECC", "reason": "NotSupported"} for gpu in (0, 1)
    ]
    assert report["not_applicable"] == {
        "NVLink": 2, "NVSwitch fabric": 2, "retired pages": 2, "row remapping": 2,
    }  # fmt: skip
    assert board.not_applicable()["h1"][0][0] == 0
    json.dumps(report)


_ERRORS = st.sampled_from(
    ["NotSupported", "Unknown", "GpuIsLost", "Timeout", "NoPermission", "FunctionNotFound",
     "InvalidArgument", "NotFound"]
)  # fmt: skip
_NAMES = st.one_of(
    st.sampled_from([
        "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 3090",
        "Tesla V100-SXM2-32GB", "NVIDIA L40S", "unknown",
    ]),
    st.text(max_size=40),
)  # fmt: skip
_FIELDS = [*_CHECKED, "retired_sbe", "remap_failed", "fan_pct"]


@given(
    errors=st.dictionaries(st.sampled_from(_FIELDS), _ERRORS, max_size=8),
    later=st.none() | st.dictionaries(st.sampled_from(_FIELDS), _ERRORS, max_size=8),
    fabric=st.sampled_from([None, "not-supported", "not-started", "in-progress", "completed"]),
    remap=st.sampled_from([None, True, False]),
    retired=st.sampled_from([None, True, False]),
    name=_NAMES,
)
def test_a_check_is_unknown_only_when_a_reading_failed_and_always_for_a_real_failure(
    errors: dict[str, str], later: dict[str, str] | None, fabric: str | None,
    remap: bool | None, retired: bool | None, name: str,
) -> None:  # fmt: skip
    sample = GpuSample(
        index=0, uuid=UUID, health_read=True, errors=errors, fabric_state=fabric,
        remap_pending=remap, retired_pending=retired,
    )  # fmt: skip
    health = None if later is None else dataclasses.replace(sample, errors=later)
    info = GpuInfo(index=0, uuid=UUID, name=name)
    unknown = {check for check, _ in unknown_checks(sample, health, info)}
    moot = set(not_applicable_checks(sample, health, info))
    assert not unknown & moot  # never both
    every = {**(later or {}), **errors}
    failed = {check for field, check in _CHECKED.items() if field in every}
    assert unknown | moot == failed  # a check whose reading came is never unknown
    for field, error in [*errors.items(), *(later or {}).items()]:
        if field in _CHECKED and error != "NotSupported":
            assert _CHECKED[field] in unknown  # a real failure is always unknown
            assert verdict(field, error, name, every, {}) == ("unknown", error)
    assert moot <= {"NVLink", "NVSwitch fabric", "retired pages", "row remapping"}
