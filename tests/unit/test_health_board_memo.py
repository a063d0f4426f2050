"""The board runs a GPU's checks again only when what they read changed
(``problems.gpu_findings_key``): a board that keeps its answers and one that runs every
check on every sample must agree on everything, sample after sample, whatever the
readings do. (The head's health board was ~35% of its CPU per sample before.)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_health_board import NOW, gpu, snap

from gputui.config.models import HealthThresholds
from gputui.health import board as board_module
from gputui.health.board import HealthBoard
from gputui.health.finding import Finding
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import NvLinkSample, ProcessSample

_PROC = ProcessSample(pid=4242, uid=1000, user="alice", command="python train.py")


def _links(counter: int, active: bool | None) -> tuple[NvLinkSample, ...]:
    return tuple(
        NvLinkSample(link=i, active=active if i == 0 else True, replay_errors=counter)
        for i in range(2)
    )


# Each reading from a few values either side of where a check decides (the default
# thresholds: slowdown 87 °C less 5, PCIe load 50 %, orphan memory 1,024 MiB...).
_HEALTH: dict[str, st.SearchStrategy[Any]] = {
    "remap_pending": st.none() | st.booleans(),
    "remap_failed": st.none() | st.booleans(),
    "remapped_uncorrectable": st.none() | st.integers(0, 3),
    "retired_pending": st.none() | st.booleans(),
    "retired_dbe": st.none() | st.sampled_from([0, 1, 500]),
    "persistence": st.none() | st.booleans(),
    "pcie_replays": st.none() | st.sampled_from([0, 5, 10_000]),
    "fabric_state": st.none()
    | st.sampled_from(["not-supported", "not-started", "in-progress", "completed"]),
    "fabric_status": st.none() | st.just("NVML_ERROR_UNKNOWN"),
    "nvlinks": st.none() | st.builds(_links, st.integers(0, 3), st.none() | st.booleans()),
}
_READINGS: dict[str, st.SearchStrategy[Any]] = {
    "state": st.sampled_from(["ok", "ok", "lost", "error"]),
    "util_gpu": st.sampled_from([None, 0, 49, 50, 51, 99]),
    "temp_c": st.sampled_from([None, 40, 76, 81, 82, 83, 86, 90]),
    "mem_used_mib": st.sampled_from([None, 0, 1023, 1024, 1500, 61_440]),
    "power_w": st.sampled_from([None, 60.5, 310.25]),
    "processes": st.sampled_from([(), (_PROC,)]),
    "throttle": st.sampled_from([None, (), ("hw_slowdown",), ("sw_thermal", "hw_thermal")]),
    "ecc_uncorrected": st.sampled_from([None, 0, 3]),
    "pcie_gen": st.sampled_from([None, 3, 4]),
    "pcie_width": st.sampled_from([None, 8, 16]),
    "message": st.sampled_from([None, "NVML timed out"]),
    "errors": st.sampled_from(
        [
            {},
            {"fan_pct": "NotSupported"},
            {"nvlinks": "NotSupported"},
            {"remap_pending": "NotSupported", "retired_pending": "Unknown"},
            {"fabric_state": "NotSupported", "persistence": "GpuIsLost"},
        ]
    ),
    "health_read": st.sampled_from([False, False, False, True]),  # a reading now and then
}
_FIELDS = {**_READINGS, **_HEALTH}
_start = st.fixed_dictionaries(_READINGS, optional=_HEALTH)
_MOVING = ("util_gpu", "temp_c", "mem_used_mib", "power_w")
"""What moves every second on a busy card: in the key only as far as a check decides."""


@st.composite
def _change(draw: st.DrawFn) -> tuple[int, str, object]:
    """A GPU's reading changed: half the time a moving one."""
    moving = draw(st.booleans())
    name = draw(st.sampled_from(_MOVING if moving else sorted(set(_FIELDS) - set(_MOVING))))
    return draw(st.integers(0, 1)), name, draw(_FIELDS[name])


# A step changes a field or two of one GPU, or none (most samples change little:
# the kept answers must be right exactly where one reading moves), half the time
# one of the moving readings.
_step = st.tuples(
    st.lists(_change(), max_size=2),
    st.sampled_from([0, 1, 1, 1, 30, 61, 400]),  # seconds since the last sample
    st.sampled_from([HostStatus.LIVE] * 5 + [HostStatus.STALE]),
)


def _snap(gpus: list[dict[str, Any]], at: float, status: HostStatus) -> HostSnapshot:
    made = []
    for index, fields in enumerate(gpus):
        kept = {k: v for k, v in fields.items() if fields["health_read"] or k not in _HEALTH}
        made.append(gpu(index=index, uuid=f"GPU-{index}", **kept))
    return snap(*made, at=at, status=status)


def _everything(board: HealthBoard) -> tuple[object, ...]:
    problems = [(p.finding, p.first_seen, p.last_seen, p.count) for p in board.problems()]
    return (problems, board.findings_of("h1"), board.unknown(), board.not_applicable())


@settings(max_examples=500, deadline=None)
@given(
    st.lists(_start, min_size=1, max_size=2),
    st.lists(_step, min_size=1, max_size=30),
    st.fixed_dictionaries(
        {
            "expect_persistence": st.booleans(),
            "hw_slowdown_minutes": st.sampled_from([1, 2, 6]),
            "hw_slowdown_window_minutes": st.sampled_from([6, 10]),
        }
    ),
)
def test_kept_answers_are_the_answers_every_check_gives(
    start: list[dict[str, Any]], steps: list[Any], thresholds: dict[str, Any]
) -> None:
    kept = HealthBoard(HealthThresholds(**thresholds), {"h1": None})
    every = HealthBoard(HealthThresholds(**thresholds), {"h1": None})
    now = NOW
    gpus = [dict(g) for g in start]
    with pytest.MonkeyPatch.context() as patch:
        for changes, gap, status in steps:
            for index, name, value in changes:
                gpus[index % len(gpus)][name] = value
            now += gap
            one = _snap(gpus, now, status)
            kept.observe(one, now)
            # No two keys equal: every check runs on every sample.
            patch.setattr(board_module, "gpu_findings_key", lambda *_, **__: object())
            every.observe(one, now)
            patch.undo()
            assert _everything(kept) == _everything(every)


def _both(gpus_then: list[dict[str, Any]], gap: float, thresholds: HealthThresholds) -> None:
    """Each of the samples ``gpus_then`` into a board that keeps its answers and one
    that runs every check each time; they agree after each."""
    kept = HealthBoard(thresholds, {"h1": None})
    every = HealthBoard(thresholds, {"h1": None})
    now = NOW
    for fields in gpus_then:
        one = _snap([fields], now, HostStatus.LIVE)
        kept.observe(one, now)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(board_module, "gpu_findings_key", lambda *_, **__: object())
            every.observe(one, now)
        assert _everything(kept) == _everything(every)
        now += gap


@settings(max_examples=1000, deadline=None)
@given(
    _start,
    st.lists(_change(), min_size=1, max_size=3),
    st.sampled_from([1, 61]),
    st.booleans(),
)
def test_one_reading_changed_between_two_samples(
    start: dict[str, Any], changes: list[Any], gap: float, expect_persistence: bool
) -> None:
    """The sharpest case: the next sample differs from the last in a reading or
    three of one GPU, whatever they are."""
    then = dict(start)
    for _, name, value in changes:
        then[name] = value
    _both([start, start, then, then], gap, HealthThresholds(expect_persistence=expect_persistence))


def test_a_busy_gpus_moving_readings_reuse_its_answers() -> None:
    """Utilisation, temperature, memory and power move every second on a busy card;
    while none crosses a limit, its checks do not run again."""
    board = HealthBoard(HealthThresholds(), {"h1": None})
    busy = {"util_gpu": 90, "temp_c": 60, "mem_used_mib": 61_440, "processes": (_PROC,)}
    board.observe(snap(gpu(**busy)), NOW)
    before = board._checked["h1"]["GPU-0000aaaa-0000-0000-0000-000000000000"]
    moved = {**busy, "util_gpu": 85, "temp_c": 61, "mem_used_mib": 60_000, "power_w": 310.5}
    board.observe(snap(gpu(**moved), at=NOW + 1), NOW + 1)
    assert board._checked["h1"]["GPU-0000aaaa-0000-0000-0000-000000000000"] is before
    hot = {**moved, "temp_c": 86}  # near its slowdown temperature: a finding
    board.observe(snap(gpu(**hot), at=NOW + 2), NOW + 2)
    assert [f.code for f in board.findings_of("h1")] == ["near-slowdown"]


def test_memory_held_with_no_process_shows_each_samples_figure_without_the_checks() -> None:
    """A stuck context's memory moves (the render benchmark moves it every second on
    every card): the checks are not run again for it, and the one finding that shows
    the figure is made again, with this sample's."""
    board = HealthBoard(HealthThresholds(), {"h1": None})
    uuid = "GPU-0000aaaa-0000-0000-0000-000000000000"
    board.observe(snap(gpu(mem_used_mib=20_480)), NOW)
    before = board._checked["h1"][uuid]
    board.observe(snap(gpu(mem_used_mib=30_000), at=NOW + 1), NOW + 1)
    assert board._checked["h1"][uuid] is before
    (held,) = [f for f in board.findings_of("h1") if f.code == "orphan-memory"]
    assert "30000 MiB" in held.title and held.detail == "30000 MiB"
    _both(
        [
            {"mem_used_mib": m, "state": "ok", "processes": (), "health_read": False}
            for m in (20_480, 30_000, 30_000, 1_500, 61_440, 0)
        ],
        1,
        HealthThresholds(),
    )


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 40), st.integers(1, 4))
def test_a_host_naming_new_uuids_every_sample_does_not_grow_the_board(
    samples: int, cards: int
) -> None:
    """Every per-card memory (health readings, slowdown minutes, NVLink counters, the
    checks' answers) keeps only the cards of the host's last sample: a hostile host
    that names fresh uuids each time holds at most its cards' worth."""
    board = HealthBoard(HealthThresholds())
    links = _links(1, True)
    for n in range(samples):
        gpus = [
            gpu(
                index=i,
                uuid=f"GPU-{n:04d}{i:04d}-0000-0000-0000-000000000000",
                throttle=("hw_slowdown",),
                health_read=True,
                nvlinks=links,
            )
            for i in range(cards)
        ]
        board.observe(snap(*gpus, at=NOW + n), NOW + n)
    held = [
        board._health,
        board._facts,
        board._slow_minutes,
        board._links,
        board._checked,
        board._checked_before,
    ]
    assert all(sum(len(per) for per in m.values()) <= cards for m in held), held
    board.forget("h1")
    assert not any(m for m in held)


# A health reading now and then, plain samples in between: each reading changes a
# health field or two of the last (or none), and the moving readings move on every
# sample.
_health_change = st.sampled_from(sorted(_HEALTH)).flatmap(
    lambda name: st.tuples(st.just(name), _HEALTH[name])
)
_reading_step = st.tuples(
    st.booleans(),  # a health reading
    st.lists(_health_change, max_size=1),
    st.none() | st.fixed_dictionaries({name: _READINGS[name] for name in _MOVING}),
    st.none() | st.sampled_from([{}, {"fan_pct": "NotSupported"}, {"nvlinks": "NotSupported"}]),
)
"""(a health reading, its changes, the moving readings and the errors (None: as
before))."""


@settings(max_examples=500, deadline=None)
@given(st.lists(_reading_step, min_size=2, max_size=25), st.booleans())
def test_answers_kept_for_both_kinds_of_sample_are_the_answers(
    steps: list[Any], expect_persistence: bool
) -> None:
    """A card's answers are kept for its health-reading samples and for its plain
    ones (each kind asks for its own again after the other's), and a health reading
    counts only by what the checks read of it: whatever the readings do, the board
    that keeps them agrees with the one that runs every check each time."""
    thresholds = HealthThresholds(expect_persistence=expect_persistence)
    kept = HealthBoard(thresholds, {"h1": None})
    every = HealthBoard(thresholds, {"h1": None})
    now = NOW
    health: dict[str, Any] = {}
    readings: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for reading, changes, moving, failed in steps:
        if reading:
            health = {**health, **dict(changes)}
        readings = readings if moving is None else moving
        errors = errors if failed is None else failed
        one = _snap(
            [{**readings, **health, "health_read": reading, "errors": errors, "state": "ok"}],
            now,
            HostStatus.LIVE,
        )
        kept.observe(one, now)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(board_module, "gpu_findings_key", lambda *_, **__: object())
            every.observe(one, now)
        assert _everything(kept) == _everything(every)
        now += 1


def test_a_cards_checks_do_not_run_again_as_health_readings_and_samples_alternate() -> None:
    """A busy card: a health reading every tenth sample, its utilisation and power moving
    in each (the health fields the same): after the first reading and the first plain
    sample after it, the checks never run again."""
    board = HealthBoard(HealthThresholds(), {"h1": None})
    runs = []
    real = board_module.gpu_findings

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(args[1].health_read)
        return real(*args, **kwargs)

    health = {"remap_pending": False, "retired_pending": False, "pcie_replays": 0}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(board_module, "gpu_findings", counted)
        for n in range(40):
            reading = n % 10 == 0
            fields = {"util_gpu": 80 + n % 7, "power_w": 300.0 + n, "processes": (_PROC,)}
            if reading:
                fields.update(health, health_read=True, errors={"fan_pct": "NotSupported"})
            board.observe(snap(gpu(**fields), at=NOW + n), NOW + n)
    assert runs == [True, False]


_HEALTH_VALUES: dict[str, list[Any]] = {
    "remap_pending": [None, False, True],
    "remap_failed": [None, False, True],
    "remapped_uncorrectable": [None, 0, 3],
    "retired_pending": [None, False, True],
    "retired_dbe": [None, 0, 500],
    "persistence": [None, True, False],
    "pcie_replays": [None, 0, 10_001],
    "fabric_state": [None, "not-started", "completed"],
    "fabric_status": [None, "NVML_ERROR_UNKNOWN"],
    "nvlinks": [None, _links(0, True), _links(0, False)],
    "errors": [{}, {"nvlinks": "NotSupported"}, {"remap_pending": "NotSupported"}],
}
"""Values either side of where a check decides; ``errors``: a health reading's own
(the plain samples between have none)."""


@pytest.mark.parametrize("name", sorted(_HEALTH_VALUES))
def test_each_health_field_the_checks_read_makes_them_run_again(name: str) -> None:
    """Two health readings that differ in one field only (the moving readings and the
    rest the same), a plain sample after each: the kept answers are every check's,
    for each field the checks read and each change of it."""
    values = _HEALTH_VALUES[name]
    base: dict[str, Any] = {  # what the field counts for only beside
        "fabric_status": {"fabric_state": "completed"},
        "remapped_uncorrectable": {"remap_pending": True},
    }.get(name, {})
    thresholds = HealthThresholds(expect_persistence=True)
    for before in values:
        for after in values:
            kept = HealthBoard(thresholds, {"h1": None})
            every = HealthBoard(thresholds, {"h1": None})
            now = NOW
            for value in (before, after):
                for reading in (True, False):
                    fields = {"errors": {}, **base, "health_read": reading, "state": "ok"}
                    if reading or name != "errors":
                        fields[name] = value
                    one = _snap([fields], now, HostStatus.LIVE)
                    kept.observe(one, now)
                    with pytest.MonkeyPatch.context() as patch:
                        patch.setattr(board_module, "gpu_findings_key", lambda *_, **__: object())
                        every.observe(one, now)
                    assert _everything(kept) == _everything(every), (before, after, reading)
                    now += 1


_outside_finding = st.builds(
    Finding,
    code=st.sampled_from(["orphan-memory", "rogue-process", "fenced"]),
    severity=st.sampled_from(["crit", "warn", "info"]),
    host=st.sampled_from(["h1", "h2"]),
    gpu=st.none() | st.integers(0, 1),
    title=st.just("t"),
    meaning=st.just("m"),
    action=st.just("a"),
    subject=st.sampled_from(["", "4242"]),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_start, min_size=1, max_size=2),
    st.lists(_outside_finding, max_size=6),
    st.booleans(),
)
def test_the_count_is_the_ranked_lists_keys(
    start: list[dict[str, Any]], outside: list[Finding], stale: bool
) -> None:
    """``count`` (what the head counts each tick) is how many problems ``problems``
    lists, the head's findings of a host's own keys among them."""
    board = HealthBoard(HealthThresholds(), {"h1": None})
    status = HostStatus.STALE if stale else HostStatus.LIVE
    board.observe(_snap([dict(g) for g in start], NOW, status), NOW)
    board.set_outside(outside, NOW)
    assert board.count() == len({p.key for p in board.problems()})
    assert board.count() == len(board.problems())


@given(_outside_finding)
def test_a_findings_key_is_made_from_its_fields(finding: Finding) -> None:
    """The key made with the finding is its host, GPU, code and subject, also after a
    copy that changes one of them."""
    gpu = "" if finding.gpu is None else finding.gpu
    where = f"{finding.host}:{gpu}:{finding.code}"
    assert finding.key == (f"{where}:{finding.subject}" if finding.subject else where)
    moved = replace(finding, gpu=None if finding.gpu is not None else 3, subject="9")
    assert moved.key == f"{finding.host}:{'' if finding.gpu is not None else 3}:{finding.code}:9"
