"""The health checks and the board that ranks and remembers them (pure: built samples).

Each fault is a reading a real card gives in that trouble; each problem must appear
with its severity and action, and clear when the reading does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.models import HealthThresholds
from gputui.health.board import HealthBoard
from gputui.health.fencing import FENCE_XIDS, fence_reasons
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import Event, GpuInfo, GpuSample, Hello, NvLinkSample, Sample

NOW = 1_800_000_000.0
UUID = "GPU-0000aaaa-0000-0000-0000-000000000000"


def gpu(**fields: Any) -> GpuSample:
    base: dict[str, Any] = {
        "index": 0,
        "uuid": UUID,
        "util_gpu": 0,
        "mem_used_mib": 0,
        "mem_total_mib": 81920,
        "temp_c": 40,
        "throttle": (),
        "ecc_uncorrected": 0,
        "pcie_gen": 4,
        "pcie_width": 16,
    }
    base.update(fields)
    return GpuSample(**base)


def snap(
    *gpus: GpuSample,
    status: HostStatus = HostStatus.LIVE,
    at: float = NOW,
    events: tuple[Event, ...] = (),
    count: int | None = None,
    nvml_error: str | None = None,
) -> HostSnapshot:
    infos = tuple(
        GpuInfo(
            index=i,
            uuid=g.uuid if i < len(gpus) else f"GPU-{i}",
            pcie_max_gen=4,
            pcie_max_width=16,
            temp_slowdown_c=87,
        )
        for i, g in enumerate(gpus or (gpu(),))
    )
    infos = infos[: count if count is not None else len(infos)]
    hello = Hello(
        protocol=1,
        helper_version="t",
        hostname="h1",
        driver="550.54.15",
        nvml="12.550.54.15",
        gpus=infos,
        errors={"nvml": nvml_error} if nvml_error else {},
    )
    sample = Sample(seq=1, time=at, gpus=gpus)
    return HostSnapshot(
        name="h1",
        address="h1",
        status=status,
        hello=hello,
        sample=sample,
        received_at=at,
        events=events,
    )


def codes(board: HealthBoard) -> dict[str, str]:
    return {p.finding.code: p.finding.severity for p in board.problems()}


def seen(board: HealthBoard, *snaps: HostSnapshot, now: float = NOW) -> dict[str, str]:
    for s in snaps:
        board.observe(s, now)
    return codes(board)


def board(**thresholds: Any) -> HealthBoard:
    return HealthBoard(HealthThresholds(**thresholds), {"h1": None})


def test_a_healthy_gpu_has_no_problem() -> None:
    b = board()
    assert seen(b, snap(gpu())) == {}
    assert b.worst() == "ok"


FAULTS: list[tuple[str, dict[str, Any], str, str]] = [
    ("lost", {"state": "lost"}, "lost", "crit"),
    ("ecc", {"ecc_uncorrected": 3}, "ecc-uncorrected", "crit"),
    ("remap pending", {"health_read": True, "remap_pending": True}, "remap-pending", "warn"),
    ("remap failed", {"health_read": True, "remap_failed": True}, "remap-failed", "crit"),
    ("retire pending", {"health_read": True, "retired_pending": True}, "retire-pending", "warn"),
    ("retired pages", {"health_read": True, "retired_dbe": 2}, "retired-pages", "warn"),
    ("pcie down", {"util_gpu": 95, "pcie_gen": 3, "pcie_width": 8}, "pcie-downgrade", "warn"),
    ("pcie replays", {"health_read": True, "pcie_replays": 50_000}, "pcie-replays", "warn"),
    (
        "nvlink down",
        {
            "health_read": True,
            "nvlinks": (NvLinkSample(link=0, active=True), NvLinkSample(link=1, active=False)),
        },
        "nvlink-down",
        "crit",
    ),
    ("fabric", {"health_read": True, "fabric_state": "in-progress"}, "fabric", "crit"),
    (
        "fabric failed",
        {"health_read": True, "fabric_state": "completed", "fabric_status": "Unknown"},
        "fabric",
        "crit",
    ),
    ("orphan", {"mem_used_mib": 20_000, "processes": ()}, "orphan-memory", "warn"),
    ("hot", {"temp_c": 84}, "near-slowdown", "warn"),
    ("hw thermal", {"throttle": ("hw_thermal",)}, "throttle-hw_thermal", "warn"),
    ("power brake", {"throttle": ("hw_power_brake",)}, "throttle-hw_power_brake", "warn"),
    ("sw power cap", {"throttle": ("sw_power_cap",)}, "throttle-sw_power_cap", "info"),
]


@pytest.mark.parametrize(("what", "fields", "code", "severity"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_shows_with_its_severity_and_clears(
    what: str, fields: dict[str, Any], code: str, severity: str
) -> None:
    b = board()
    found = seen(b, snap(gpu(**fields)))
    assert found.get(code) == severity, found
    problem = next(p for p in b.problems() if p.finding.code == code)
    assert problem.finding.action and problem.finding.meaning and "\n" not in problem.finding.title
    assert problem.finding.gpu == 0
    # The reading back to normal (a health reading for those read less often).
    healthy = gpu(health_read=True) if fields.get("health_read") else gpu()
    assert code not in seen(b, snap(healthy, at=NOW + 60), now=NOW + 60)


def test_persistence_off_only_where_config_expects_it_on() -> None:
    off = gpu(health_read=True, persistence=False)
    assert "persistence-off" not in seen(board(), snap(off))
    assert seen(board(expect_persistence=True), snap(off))["persistence-off"] == "warn"


def test_pcie_below_its_maximum_counts_only_under_load() -> None:
    assert "pcie-downgrade" not in seen(board(), snap(gpu(util_gpu=0, pcie_gen=1, pcie_width=16)))


def test_hw_slowdown_in_6_of_the_last_10_minutes_is_critical() -> None:
    """On a fake clock, one sample a minute: HW slowdown in minutes 0-5, then not."""
    b = board()
    levels = []
    for minute in range(14):
        at = NOW + minute * 60
        slow = minute <= 5
        b.observe(snap(gpu(throttle=("hw_slowdown",) if slow else ()), at=at), at)
        levels.append(codes(b).get("hw-slowdown-sustained"))
    # Five slow minutes are not enough; six are, until minute 0 leaves the window
    # (at minute 10 the last ten are 1..10, five of them slow).
    assert levels == [None] * 5 + ["crit"] * 5 + [None] * 4
    # While it is sustained, the plain HW slowdown line is not shown as well.
    b.observe(snap(gpu(throttle=("hw_slowdown",)), at=NOW + 14 * 60), NOW + 14 * 60)
    assert codes(b) == {"throttle-hw_slowdown": "warn"}


def test_nvlink_errors_that_grow_between_readings() -> None:
    def links(crc: int) -> GpuSample:
        return gpu(
            health_read=True, nvlinks=(NvLinkSample(link=3, active=True, crc_flit_errors=crc),)
        )

    b = board()
    assert "nvlink-errors" not in seen(b, snap(links(10)))
    assert seen(b, snap(links(15), at=NOW + 10), now=NOW + 10)["nvlink-errors"] == "warn"
    assert "nvlink-errors" not in seen(b, snap(links(15), at=NOW + 20), now=NOW + 20)


def test_host_level_problems() -> None:
    b = board()
    down = HostSnapshot(name="h1", address="h1", status=HostStatus.UNREACHABLE, message="no route")
    assert seen(b, down) == {"unreachable": "crit"}
    assert seen(b, snap(gpu())) == {}  # back: cleared
    stale = snap(gpu(), at=NOW - 60)
    assert seen(b, stale) == {"stale": "warn"}
    assert (
        seen(board(), snap(gpu(), nvml_error="LibRmVersionMismatch"))["driver-mismatch"] == "crit"
    )
    assert seen(board(), snap(gpu(), nvml_error="DriverNotLoaded"))["nvml-failed"] == "crit"


def test_a_gpu_missing_from_the_count() -> None:
    configured = HealthBoard(HealthThresholds(), {"h1": 8})
    assert seen(configured, snap(gpu()))["gpu-missing"] == "crit"
    b = board()
    two = snap(gpu(), gpu(index=1, uuid="GPU-1"))
    assert "gpu-missing" not in seen(b, two)
    assert seen(b, snap(gpu()))["gpu-missing"] == "crit"  # one fewer than before


def xid(code: int, at: float, index: int = 0) -> Event:
    return Event(time=at, kind="xid", gpu_uuid=UUID, gpu_index=index, xid=code, text="")


@pytest.mark.parametrize("code", [13, 31, 43, 45, 68])
def test_application_xids_are_warnings_to_restart_the_application(code: int) -> None:
    b = board()
    found = seen(b, snap(gpu(), events=(xid(code, NOW - 5),)))
    assert found == {f"xid-{code}": "warn"}
    assert b.problems()[0].finding.action.startswith("restart the application")


@pytest.mark.parametrize("code", [48, 63, 64, 74, 79, 92, 94, 95, 119, 120])
def test_hardware_and_driver_xids_are_critical(code: int) -> None:
    assert seen(board(), snap(gpu(), events=(xid(code, NOW - 5),))) == {f"xid-{code}": "crit"}


def test_a_repeated_xid_escalates_restart_reset_reboot_inspect() -> None:
    actions = []
    for n in (1, 4, 7, 10, 40):
        b = board(xid_escalate_after=3)
        events = tuple(xid(13, NOW - 100 + i) for i in range(n))
        b.observe(snap(gpu(), events=events), NOW)
        (problem,) = b.problems()
        assert problem.count == n and problem.first_seen == NOW - 100
        actions.append(problem.finding.action)
    assert [a.split(" (seen")[0] for a in actions] == [
        "restart the application",
        "reset the GPU (nvidia-smi -r) once it is idle",
        "reboot the host",
        "have the hardware inspected (RMA if it keeps happening)",
        "have the hardware inspected (RMA if it keeps happening)",
    ]


def test_an_xid_out_of_its_window_clears_and_one_seen_twice_counts_once() -> None:
    old = xid(79, NOW - 25 * 3600)
    assert seen(board(), snap(gpu(), events=(old,))) == {}
    twice = (
        xid(79, NOW - 10),
        Event(time=NOW - 10, kind="xid", source="kernel-log", gpu_index=0, xid=79),
    )
    b = board()
    seen(b, snap(gpu(), events=twice))
    assert b.problems()[0].count == 1


def test_nvswitch_sxids_are_host_problems_fatal_ones_critical() -> None:
    def sxid(code: int, text: str, switch: str = "0000:c5:00.0") -> Event:
        return Event(
            time=NOW - 30, kind="sxid", source="kernel-log", pci_bus_id=switch, sxid=code, text=text
        )

    events = (
        sxid(24007, "Fatal, Link 34 sourcetrack TCEN0 crumbstore ECC DBE Error"),
        sxid(12028, "Non-fatal, Link 32 egress non-posted PRIV error (First)", "0000:07:00.0"),
        sxid(12028, "Non-fatal, Link 32 egress non-posted PRIV error", "0000:07:00.0"),
    )
    b = board()
    b.observe(snap(gpu(), events=events), NOW)
    found = {p.finding.code: p for p in b.problems()}
    assert found["sxid-24007-0000:c5:00.0"].finding.severity == "crit"
    assert found["sxid-24007-0000:c5:00.0"].finding.gpu is None
    assert found["sxid-12028-0000:07:00.0"].finding.severity == "warn"
    assert found["sxid-12028-0000:07:00.0"].count == 2


def test_ranked_worst_first_and_the_exit_code_word() -> None:
    b = board()
    seen(b, snap(gpu(throttle=("sw_power_cap",))))
    assert b.worst() == "ok"  # info only
    seen(b, snap(gpu(throttle=("sw_power_cap",), temp_c=85)))
    assert b.worst() == "warn"
    seen(b, snap(gpu(throttle=("sw_power_cap",), temp_c=85, ecc_uncorrected=1)))
    assert b.worst() == "crit"
    assert [p.finding.severity for p in b.problems()] == ["crit", "warn", "info"]


def test_an_acknowledgement_holds_until_the_problem_changes() -> None:
    b = board()
    seen(b, snap(gpu(ecc_uncorrected=2)))
    key = b.problems()[0].key
    assert b.acknowledge(key, "root", "RMA opened", NOW)
    assert not b.acknowledge("h1:0:nothing", "root", "x", NOW)
    seen(b, snap(gpu(ecc_uncorrected=2), at=NOW + 5), now=NOW + 5)
    assert b.problems()[0].ack is not None and b.problems()[0].ack.note == "RMA opened"
    seen(b, snap(gpu(ecc_uncorrected=9), at=NOW + 10), now=NOW + 10)
    assert b.problems()[0].ack is None  # the count changed


def test_a_reading_the_card_does_not_support_is_unknown_not_ok() -> None:
    geforce = dataclasses.replace(
        gpu(
            ecc_uncorrected=None,
            errors={"ecc_uncorrected": "NotSupported"},
            health_read=True,
            remap_pending=None,
        ),
        errors={"ecc_uncorrected": "NotSupported", "remap_pending": "NotSupported"},
    )
    b = board()
    assert seen(b, snap(geforce)) == {}
    assert b.unknown() == {"h1": [(0, "ECC", "NotSupported"), (0, "row remapping", "NotSupported")]}


@pytest.mark.parametrize(
    "status", [HostStatus.UNREACHABLE, HostStatus.NVML_ERROR], ids=lambda s: s.value
)
def test_a_host_that_cannot_be_read_lists_no_checks_its_cards_could_not_answer(
    status: HostStatus,
) -> None:
    """What its last sample could not answer goes with the host's readings: the board
    says why the host cannot be read instead, and lists them again once it can."""
    geforce = gpu(ecc_uncorrected=None, errors={"ecc_uncorrected": "NotSupported"})
    b = board()
    seen(b, snap(geforce))
    assert (0, "ECC", "NotSupported") in b.unknown()["h1"]
    down = snap(geforce, status=status, nvml_error="Driver/library version mismatch")
    b.observe(down, NOW + 5)
    assert b.findings_of("h1") and b.unknown() == {} and b.not_applicable() == {}
    seen(b, snap(geforce, at=NOW + 10), now=NOW + 10)
    assert (0, "ECC", "NotSupported") in b.unknown()["h1"]


def test_two_cards_a_sample_names_by_one_uuid_each_list_what_they_could_not_answer() -> None:
    """A helper's sample is not trusted to name each card once: the board lists each
    card's unanswered checks, as it was sent."""
    first = gpu(ecc_uncorrected=None, errors={"ecc_uncorrected": "NotSupported"})
    second = gpu(index=1, temp_c=None, errors={"temp_c": "NotSupported"})
    b = board()
    seen(b, snap(first, second))
    listed = b.unknown()["h1"]
    assert (0, "ECC", "NotSupported") in listed and (1, "temperature", "NotSupported") in listed


def test_fencing_rules() -> None:
    th = HealthThresholds()

    def worst(s: HostSnapshot) -> Any:
        return fence_reasons(s, NOW, th)[UUID].worst

    assert {48, 64, 74, 79, 95, 140} == FENCE_XIDS
    assert worst(snap(gpu(health_read=True))) is None
    lost = worst(snap(gpu(state="lost")))
    assert lost.code == "lost" and lost.clears == "condition"
    x = worst(snap(gpu(), events=(xid(79, NOW),)))
    assert x.code == "xid-79" and x.clears == "reboot"
    assert worst(snap(gpu(), events=(xid(13, NOW),))) is None
    assert worst(snap(gpu(health_read=True, remap_pending=True, util_gpu=90))) is None
    assert worst(snap(gpu(health_read=True, remap_pending=True))).code == "remap-pending"


_NUMBERS = st.none() | st.integers(0, 2**40)


@settings(max_examples=200)
@given(
    st.fixed_dictionaries(
        {
            "state": st.sampled_from(["ok", "lost", "error"]),
            "util_gpu": st.none() | st.integers(0, 100),
            "mem_used_mib": st.none() | st.integers(0, 2**24),
            "temp_c": st.none() | st.integers(-40, 200),
            "throttle": st.none()
            | st.lists(st.sampled_from(["hw_slowdown", "sw_thermal", "x"]), max_size=4).map(tuple),
            "ecc_uncorrected": _NUMBERS,
            "pcie_gen": st.none() | st.integers(0, 16),
            "pcie_width": st.none() | st.integers(0, 64),
            "health_read": st.booleans(),
            "remap_pending": st.none() | st.booleans(),
            "remap_failed": st.none() | st.booleans(),
            "retired_dbe": _NUMBERS,
            "pcie_replays": _NUMBERS,
            "fabric_state": st.none()
            | st.sampled_from(["not-supported", "not-started", "in-progress", "completed"]),
        }
    ),
    st.lists(st.integers(0, 200), max_size=6),
)
def test_any_readings_give_well_formed_problems(fields: dict[str, Any], xids: list[int]) -> None:
    b = board()
    events = tuple(xid(code, NOW - i) for i, code in enumerate(xids))
    b.observe(snap(gpu(**fields), events=events), NOW)
    for problem in b.problems():
        f = problem.finding
        assert f.severity in ("crit", "warn", "info")
        for text in (f.title, f.meaning, f.action):
            assert text and "\n" not in text and len(text) < 200
        assert problem.first_seen <= problem.last_seen and problem.count >= 1
    assert b.worst() in ("ok", "warn", "crit")
