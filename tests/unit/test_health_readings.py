"""Health checks that were blind or counted twice: a GPU with no health reading is
unknown (not ok), a narrow PCIe link is a fault at any load, the same Xid from the
kernel log and from NVML is one, and every health setting is in hosts.example.yaml."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st
from test_health_board import NOW, UUID, board, gpu, seen, snap

from gputui.config.models import HealthThresholds
from gputui.health.xid import SAME_XID_S, XidDedupe
from gputui.wire.messages import Event

REPO = Path(__file__).resolve().parents[2]


def test_a_gpu_with_no_health_reading_is_unknown_not_ok() -> None:
    b = board()
    assert seen(b, snap(gpu())) == {}
    assert b.unknown() == {"h1": [(0, "health readings", "none taken")]}
    assert seen(b, snap(gpu(health_read=True, remap_pending=False, remap_failed=False))) == {}
    assert b.unknown() == {}
    assert seen(b, snap(gpu())) == {} and b.unknown() == {}  # the reading is kept


def test_a_narrow_pcie_link_is_a_fault_at_any_load_a_slow_one_only_under_load() -> None:
    idle_narrow = gpu(util_gpu=0, pcie_gen=4, pcie_width=8)
    assert seen(board(), snap(idle_narrow)) == {"pcie-downgrade": "warn"}
    assert seen(board(), snap(gpu(util_gpu=0, pcie_gen=1, pcie_width=16))) == {}
    busy_slow = gpu(util_gpu=95, pcie_gen=3, pcie_width=16)
    assert seen(board(), snap(busy_slow)) == {"pcie-downgrade": "warn"}


def _xid(at: float, source: str) -> Event:
    return Event(time=at, kind="xid", source=source, gpu_uuid=UUID, gpu_index=0, xid=79)  # type: ignore[arg-type]


def test_an_xid_from_the_kernel_log_and_from_nvml_a_second_apart_counts_once() -> None:
    b = board()
    events = (_xid(NOW - 10.4, "nvml"), _xid(NOW - 9.4, "kernel-log"))
    assert seen(b, snap(gpu(), events=events)) == {"xid-79": "crit"}
    (problem,) = b.problems()
    assert problem.count == 1
    # Two real ones (one source, a minute apart) are two.
    b = board()
    seen(b, snap(gpu(), events=(_xid(NOW - 70, "nvml"), _xid(NOW - 10, "nvml"))))
    assert b.problems()[0].count == 2


@given(
    st.lists(
        st.tuples(st.floats(0, 100, allow_nan=False), st.sampled_from(["nvml", "kernel-log"])),
        max_size=12,
    )
)
def test_each_event_seen_twice_counts_once(times: list[tuple[float, str]]) -> None:
    dedupe = XidDedupe()
    kept = [(t, s) for t, s in times if not dedupe.seen(0, 79, t, s)]
    again = XidDedupe()
    for t, s in kept:
        assert not again.seen(0, 79, t, s)  # what was kept is all distinct
    for t, s in kept:
        other = "nvml" if s == "kernel-log" else "kernel-log"
        assert again.seen(0, 79, t + SAME_XID_S / 2, other)  # its echo from the other source
        assert not again.seen(1, 79, t, s)  # another GPU's is its own


def test_every_health_setting_is_in_hosts_example_yaml() -> None:
    example = yaml.safe_load((REPO / "hosts.example.yaml").read_text())
    documented = set(example["health"])
    assert documented == set(HealthThresholds.model_fields)
    # ... with its default, so the file reads as the defaults.
    assert HealthThresholds(**example["health"]) == HealthThresholds()


def test_a_stale_host_keeps_its_last_known_criticals_marked_stale() -> None:
    """A hung NVML call stops the samples: the link calls the host stale, and the board
    keeps what the last sample showed (a lost card stays critical), marked so."""
    from gputui.health.board import STALE_MARK
    from gputui.telemetry import HostStatus

    b = board()
    seen(b, snap(gpu(state="lost")))
    stale = snap(gpu(state="lost"), status=HostStatus.STALE, at=NOW - 60)
    assert seen(b, stale) == {"lost": "crit", "stale": "warn"}
    lost = next(p for p in b.problems() if p.finding.code == "lost")
    assert lost.finding.title.endswith(STALE_MARK) and lost.count == 1
    # Fresh again: the mark goes, the problem is the same one.
    assert seen(b, snap(gpu(state="lost"))) == {"lost": "crit"}
    assert b.problems()[0].finding.title == "GPU lost"
