"""``has_standing_problem`` (asked for every suspect GPU, every second, by the
console's totals) answers as ``gpu_flags`` does, less recent Xids, plus a hot card:
the two must agree on every reading, whatever the thresholds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.models import HealthThresholds
from gputui.health import gpu_flags, has_standing_problem
from gputui.wire.messages import GpuSample, ProcessSample

_PROC = ProcessSample(pid=4242, uid=1000, user="alice", command="python train.py")
_REASONS = ["hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal", "sw_power_cap", "x"]

# Each reading from values either side of where a flag decides.
_READINGS: dict[str, st.SearchStrategy[Any]] = {
    "state": st.sampled_from(["ok", "ok", "lost", "error"]),
    "temp_c": st.none() | st.integers(0, 120),
    "mem_used_mib": st.none() | st.sampled_from([0, 1023, 1024, 1025, 61_440]),
    "processes": st.sampled_from([(), (_PROC,)]),
    "throttle": st.none() | st.lists(st.sampled_from(_REASONS), max_size=3).map(tuple),
    "ecc_uncorrected": st.none() | st.integers(0, 5),
}
_THRESHOLDS = st.builds(
    HealthThresholds,
    temp_warn_c=st.integers(40, 90),  # the default critical limit is 90 °C
    ecc_uncorrected_max=st.integers(0, 3),
)


@settings(max_examples=400)
@given(readings=st.fixed_dictionaries(_READINGS), health=_THRESHOLDS)
def test_a_standing_problem_is_what_the_flags_and_the_temperature_say(
    readings: dict[str, Any], health: HealthThresholds
) -> None:
    sample = GpuSample(index=0, uuid="GPU-1", mem_total_mib=81920, **readings)
    hot = sample.temp_c is not None and sample.temp_c >= health.temp_warn_c
    flagged = bool(gpu_flags(sample, (), 0.0, health))
    assert has_standing_problem(sample, health) == (hot or flagged)
