"""The board ends a host's problems from that host's own index, not a walk over every
problem of every host: one snapshot costs the same with 1 host or 1,000 in trouble
(the walk made the console's checks of 4,096 GPUs take ~300 ms every 2 s, and the
head's every snapshot ~2.5 ms). And what it ends is exactly what stopped showing.
"""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from test_health_board import NOW, gpu, snap

from gputui.config.models import HealthThresholds
from gputui.health import outside
from gputui.health.board import HealthBoard
from gputui.telemetry import HostSnapshot

HOSTS = ("h1", "h2", "h3")
FAULTS = ({"temp_c": 84}, {"ecc_uncorrected": 3}, {"throttle": ("hw_thermal",)})


def host_snap(name: str, faults: list[set[int]], at: float = NOW) -> HostSnapshot:
    gpus = []
    for index, which in enumerate(faults):
        fields: dict[str, object] = {}
        for f in sorted(which):
            fields.update(FAULTS[f])
        gpus.append(gpu(index=index, uuid=f"GPU-{name}-{index}", **fields))
    return snap(*gpus, at=at).with_changes(name=name, address=name)


def active(board: HealthBoard) -> set[str]:
    return {k for k, t in board.tracks().items() if t.active}


def showing(board: HealthBoard) -> set[str]:
    return {p.key for p in board.problems()}


step = st.one_of(
    st.tuples(
        st.just("observe"),
        st.sampled_from(HOSTS),
        st.lists(st.sets(st.integers(0, len(FAULTS) - 1)), min_size=1, max_size=3),
    ),
    st.tuples(st.just("outside"), st.sets(st.tuples(st.sampled_from(HOSTS), st.integers(0, 2)))),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(step, min_size=1, max_size=25))
def test_a_problem_is_active_exactly_while_it_shows(steps: list[tuple[object, ...]]) -> None:
    board = HealthBoard(HealthThresholds(), dict.fromkeys(HOSTS))
    for host in HOSTS:  # every host seen once: no problem left from before
        board.observe(host_snap(host, [set()]), NOW)
    for n, item in enumerate(steps):
        now = NOW + n
        if item[0] == "observe":
            _, host, faults = item
            board.observe(host_snap(str(host), list(faults), now), now)  # type: ignore[arg-type]
        else:
            drained = sorted(item[1])  # type: ignore[arg-type]
            board.set_outside([outside.drained(h, g, f"GPU-{h}-{g}", "x") for h, g in drained], now)
        assert active(board) == showing(board)


def test_restored_problems_end_when_their_host_shows_them_gone() -> None:
    first = HealthBoard(HealthThresholds(), {"h1": None})
    first.observe(host_snap("h1", [{0}, {1}]), NOW)
    kept = first.tracks()
    assert len(kept) == 2
    board = HealthBoard(HealthThresholds(), {"h1": None})
    board.restore(kept, {})
    board.observe(host_snap("h1", [{0}, set()], NOW + 60), NOW + 60)
    ((key, track),) = ((k, t) for k, t in board.tracks().items() if t.active)
    assert track.first == NOW and key.endswith("near-slowdown")  # kept its first seen
    board.observe(host_snap("h1", [set(), set()], NOW + 120), NOW + 120)
    assert active(board) == set()


def _observe_cost(board: HealthBoard, one: HostSnapshot) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(20):
            board.observe(one, NOW)
        best = min(best, time.perf_counter() - start)
    return best


def test_one_hosts_snapshot_costs_the_same_however_many_hosts_are_in_trouble() -> None:
    alone = HealthBoard(HealthThresholds(), {})
    crowded = HealthBoard(HealthThresholds(), {})
    for i in range(1000):  # 1,000 other hosts with 8 problems each: 8,000 tracks
        crowded.observe(host_snap(f"n{i:04d}", [{0}] * 8), NOW)
    one = host_snap("h1", [{0}] * 8)
    alone.observe(one, NOW)
    crowded.observe(one, NOW)
    # The walk over every track made this ~15x; the index keeps it near 1x.
    assert _observe_cost(crowded, one) < 3 * _observe_cost(alone, one)


def test_one_problem_a_key_so_the_header_and_the_list_agree() -> None:
    """Two findings of one key (a process the head flags twice, its name or owner read
    differently by two samples; a host's own finding and the head's) are one problem:
    the console's header counts keys, its health view lists problems."""
    board = HealthBoard(HealthThresholds())
    board.set_outside(
        [
            outside.process_flag("gpu01", 1, "GPU-1", 4242, "alice", "python", "no-allocation"),
            outside.process_flag("gpu01", 1, "GPU-1", 4242, "alice", "train.py", "no-allocation"),
            outside.drained("gpu01", 1, "GPU-1", "loud fan"),
        ],
        1000.0,
    )
    problems = board.problems()
    assert len(problems) == len({p.key for p in problems}) == 2
