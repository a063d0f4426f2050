"""Each health check, driven by a fault injected into a real helper on simulated NVML.

The helper runs for real (as a client starts it); its lines are decoded the way the
fleet decodes them, made into a host snapshot and given to the health board. Each
fault must show as its problem with the right severity and an action, and clear
when the ``sim`` request clears the fault.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from gputui.config.models import HealthThresholds
from gputui.health.board import HealthBoard
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Event, Hello, Sample


class Watched:
    """A helper's messages turned into snapshots for one board."""

    def __init__(self, helper: Any, board: HealthBoard) -> None:
        self.helper, self.board = helper, board
        self.hello: Hello | None = None
        self.events: list[Event] = []

    def next_health(self, timeout: float = 15.0) -> dict[str, str]:
        """Read up to the next sample with health readings; the board's problems then."""

        def take(m: dict[str, Any]) -> bool:
            message = decode_helper_line(json.dumps(m))
            if isinstance(message, Hello):
                self.hello = message
            elif isinstance(message, Event):
                self.events.append(message)
            elif isinstance(message, Sample) and all(g.health_read for g in message.gpus):
                snap = HostSnapshot(
                    name="h",
                    address="h",
                    status=HostStatus.LIVE,
                    hello=self.hello,
                    sample=message,
                    received_at=time.time(),
                    events=tuple(self.events),
                )
                self.board.observe(snap, time.time())
                return True
            return False

        self.helper.expect(take, timeout)
        return {p.finding.code: p.finding.severity for p in self.board.problems()}

    def sim(self, rid: int, fault: str) -> None:
        self.helper.send({"id": rid, "op": "sim", "fault": fault})
        answer = self.helper.result(rid)
        assert answer["ok"], answer


FAULTS = [
    # (model, fault, problem, severity)
    ("a100-80gb", "ecc@0", "ecc-uncorrected", "crit"),
    ("a100-80gb", "remap-pending@0", "remap-pending", "warn"),
    ("a100-80gb", "remap-failed@0", "remap-failed", "crit"),
    ("v100", "retired@0", "retire-pending", "warn"),
    ("h100", "hw-slowdown@0", "throttle-hw_slowdown", "warn"),
    ("h100", "nvlink-down@0", "nvlink-down", "crit"),
    ("h100", "fabric@0", "fabric", "crit"),
    ("a100-80gb", "persistence-off@0", "persistence-off", "warn"),
    ("a100-80gb", "orphan@0", "orphan-memory", "warn"),
    ("a100-80gb", "pcie-down@0", "pcie-replays", "warn"),
]


@pytest.mark.parametrize(("model", "fault", "code", "severity"), FAULTS, ids=[f[1] for f in FAULTS])
def test_a_fault_shows_as_its_problem_and_clears(
    start_helper: Callable[..., Any], model: str, fault: str, code: str, severity: str
) -> None:
    thresholds = HealthThresholds(expect_persistence=True, pcie_replays_max=0)
    helper = start_helper(["--sim", f"2x{model}", "--interval", "0.1", "--health-every", "1"])
    watch = Watched(helper, HealthBoard(thresholds))
    assert code not in watch.next_health()
    watch.sim(1, fault)
    found = watch.next_health()
    if code not in found:  # some faults count up over a reading or two
        found = watch.next_health()
    assert found.get(code) == severity, found
    problem = next(p for p in watch.board.problems() if p.finding.code == code)
    assert problem.finding.gpu == 0 and problem.finding.action
    watch.sim(2, "-" + fault)
    watch.next_health()
    assert code not in watch.next_health()


def test_a_lost_gpu(start_helper: Callable[..., Any]) -> None:
    helper = start_helper(["--sim", "2xh100", "--interval", "0.1", "--health-every", "1"])
    watch = Watched(helper, HealthBoard(HealthThresholds()))
    watch.next_health()
    watch.sim(1, "lost@1")

    def lost() -> bool:
        watch.helper.expect(lambda m: m["type"] == "sample" and m["gpus"][1].get("state") == "lost")
        return True

    lost()
    board = watch.board
    # The lost GPU's sample carries no health readings: feed the next samples as they are.
    watch.helper.expect(lambda m: m["type"] == "sample")
    for _ in range(3):
        message = decode_helper_line(
            json.dumps(watch.helper.expect(lambda m: m["type"] == "sample"))
        )
        assert isinstance(message, Sample)
        board.observe(
            HostSnapshot(
                name="h",
                address="h",
                status=HostStatus.LIVE,
                hello=watch.hello,
                sample=message,
                received_at=time.time(),
            ),
            time.time(),
        )
    assert {p.finding.code: p.finding.severity for p in board.problems()}.get("lost") == "crit"


@pytest.mark.parametrize(
    ("xid", "severity"), [(13, "warn"), (43, "warn"), (79, "crit"), (48, "crit")]
)
def test_an_xid_of_each_class(start_helper: Callable[..., Any], xid: int, severity: str) -> None:
    helper = start_helper(["--sim", "2xh100", "--interval", "0.1", "--health-every", "1"])
    watch = Watched(helper, HealthBoard(HealthThresholds()))
    watch.next_health()
    watch.sim(1, f"xid:{xid}@1")
    found = watch.next_health()
    assert found.get(f"xid-{xid}") == severity, found


def test_a_gpu_missing_from_the_count(start_helper: Callable[..., Any]) -> None:
    helper = start_helper(
        ["--sim", "4xh100,fault=missing@2", "--interval", "0.1", "--health-every", "1"]
    )
    watch = Watched(helper, HealthBoard(HealthThresholds(), {"h": 4}))
    found = watch.next_health()
    assert found.get("gpu-missing") == "crit", found
    assert "3 of 4 GPUs" in next(
        p.finding.title for p in watch.board.problems() if p.finding.code == "gpu-missing"
    )
