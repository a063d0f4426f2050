"""A driver/library mismatch is named: the helper's real ``hello`` (on pynvml's own
error for it, raised by the stubbed ``nvmlInit``) reaches the health board as the
fleet's link reports it (status ``nvml error``), and the board says what it is."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gputui.config.models import HealthThresholds
from gputui.health.board import HealthBoard
from gputui.health.problems import nvml_error_name
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Hello

from nvmlkit import FakeNvml  # isort: skip

RunOnce = Callable[..., tuple[int, list[dict[str, Any]]]]


def test_a_driver_library_mismatch_is_named_on_the_board(
    run_once: RunOnce, fake_nvml: FakeNvml
) -> None:
    fake_nvml.init_error = "LibRmVersionMismatch"
    _, (hello_msg, error) = run_once()
    hello = decode_helper_line(json.dumps(hello_msg).encode())
    assert isinstance(hello, Hello)
    snap = HostSnapshot(
        name="gpu01",
        address="gpu01",
        status=HostStatus.NVML_ERROR,
        message=f"NVML: {hello.errors['nvml']}",
        hello=hello,
    )
    board = HealthBoard(HealthThresholds())
    board.observe(snap, 1_800_000_000.0)
    (problem,) = board.problems()
    assert problem.finding.code == "driver-mismatch" and problem.finding.severity == "crit"
    assert problem.finding.title == "NVML library and kernel driver versions differ"
    assert "reboot" in problem.finding.action
    assert error["fatal"] is True


def test_the_error_name_is_read_from_each_way_it_is_written() -> None:
    for text in (
        "LibRmVersionMismatch",
        "LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.",
        "NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.",
    ):
        assert nvml_error_name(text) == "LibRmVersionMismatch"
    assert nvml_error_name(None) is None and nvml_error_name("DriverNotLoaded") == "DriverNotLoaded"
