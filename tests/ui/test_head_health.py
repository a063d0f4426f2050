"""What the head knows (fences, drains, flagged processes, idle jobs) in the health view."""

from __future__ import annotations

from typing import Any

from gputui.config import HealthThresholds
from gputui.health.board import HealthBoard
from gputui.protocol import GpuInfo, GpuSample, Hello, Sample
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.head_health import head_findings
from gputui.ui.head_view import HeadView

NOW = 10_000.0


def state(**parts: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"me": {"uid": 0, "user": "root", "admin": True}, "idle_after_s": 3600}
    base.update(parts)
    return base


def gpu(index: int, state: str, reason: str = "") -> dict[str, Any]:
    return {
        "uuid": f"GPU-{index}",
        "host": "gpu01",
        "index": index,
        "pool": "a100",
        "state": state,
        "state_reason": reason,
    }


def test_fences_drains_flags_and_idle_jobs_become_problems_and_clear() -> None:
    view = HeadView.parse(
        state(
            gpus=[
                gpu(0, "ok"),
                gpu(1, "unhealthy", "Xid 79: GPU has fallen off the bus"),
                gpu(2, "drained", "RMA 77"),
            ],
            flags=[
                {
                    "host": "gpu01",
                    "gpu_uuid": "GPU-0",
                    "gpu_index": 0,
                    "pid": 4242,
                    "uid": 1001,
                    "user": "bob",
                    "name": "python x.py",
                    "kind": "no-allocation",
                }
            ],
            jobs=[
                {
                    "id": 7,
                    "user": "alice",
                    "state": "running",
                    "host": "gpu01",
                    "started_at": 1.0,
                    "idle_since": NOW - 7200,
                }
            ],
        )
    )
    board = HealthBoard(HealthThresholds())
    board.set_outside(head_findings(view, NOW), NOW)
    found = {p.finding.code: p for p in board.problems()}
    assert set(found) == {"fenced", "drained", "rogue-process", "idle-job"}
    assert found["fenced"].finding.severity == "crit" and found["fenced"].finding.gpu == 1
    assert "fallen off the bus" in found["fenced"].finding.title
    assert "unfence gpu01:1" in found["fenced"].finding.action
    assert (
        found["drained"].finding.severity == "info" and "RMA 77" in found["drained"].finding.title
    )
    assert (
        found["rogue-process"].finding.severity == "warn"
        and "pid 4242" in found["rogue-process"].finding.title
    )
    assert found["idle-job"].finding.title.startswith("job 7 (alice) idle for 2.0 h")
    # The host's own readings, fine, do not clear what the head says of it.
    live = HostSnapshot(
        name="gpu01",
        address="gpu01",
        status=HostStatus.LIVE,
        hello=Hello(
            protocol=1, helper_version="t", hostname="gpu01", gpus=(GpuInfo(index=0, uuid="GPU-0"),)
        ),
        sample=Sample(seq=2, time=NOW, gpus=(GpuSample(index=0, uuid="GPU-0"),)),
        received_at=NOW,
    )
    board.observe(live, NOW + 1)
    board.set_outside(head_findings(view, NOW + 2), NOW + 2)
    assert {p.finding.code: p.count for p in board.problems()}["fenced"] == 1
    # The next state has none of them: they clear, and come back counted twice.
    board.set_outside(head_findings(HeadView.parse(state(gpus=[gpu(1, "ok")])), NOW + 5), NOW + 5)
    assert board.problems() == []
    board.set_outside(head_findings(view, NOW + 9), NOW + 9)
    assert {p.finding.code: p.count for p in board.problems()}["fenced"] == 2


def test_two_flagged_processes_on_one_gpu_are_two_problems() -> None:
    flag = {"host": "gpu01", "gpu_uuid": "GPU-0", "gpu_index": 0, "uid": 1, "user": "bob"}
    view = HeadView.parse(
        state(
            flags=[
                {**flag, "pid": 11, "name": "a", "kind": "no-allocation"},
                {**flag, "pid": 12, "name": "b", "kind": "no-allocation"},
            ],
            jobs=[
                {
                    "id": i,
                    "user": "al",
                    "state": "running",
                    "host": "gpu01",
                    "started_at": 1.0,
                    "idle_since": NOW - 9000,
                }
                for i in (1, 2)
            ],
        )
    )
    board = HealthBoard(HealthThresholds())
    board.set_outside(head_findings(view, NOW), NOW)
    keys = [p.key for p in board.problems()]
    assert len(keys) == len(set(keys)) == 4


def test_idle_claims_from_the_pushed_state() -> None:
    def claim(claim_id: int, **extra: Any) -> dict[str, Any]:
        return {
            "id": claim_id,
            "user": "carol\x1b[2J",
            "state": "active",
            "host": "gpu01",
            "granted_at": 1.0,
            "idle_release_s": 1800,
            **extra,
        }

    view = HeadView.parse(
        state(
            claims=[claim(4), claim(5, session=True), claim(6), claim(7, state="waiting")],
            idle_claims=[
                {"id": 4, "idle_since": NOW - 900},
                {"id": 5, "idle_since": NOW - 4000},
                {"id": 6, "idle_since": NOW - 60},  # not long enough yet
                {"id": 7, "idle_since": NOW - 9000},  # not active
                {"id": 8, "idle_since": "soon"},
            ],
            claim_idle_after_s=600,
        )
    )
    found = {f.subject: f for f in head_findings(view, NOW) if f.code == "idle-claim"}
    assert sorted(found) == ["4", "5"]
    assert found["4"].severity == "info"
    assert found["4"].title == "claim 4 (carol) idle for 15m, released in 15m"  # cleaned
    assert found["5"].severity == "warn" and "gputui run session" in found["5"].meaning
    # Without the head's threshold, nothing is judged idle.
    quiet = HeadView.parse(state(claims=[claim(4)], idle_claims=[{"id": 4, "idle_since": 1.0}]))
    assert [f for f in head_findings(quiet, NOW) if f.code == "idle-claim"] == []
