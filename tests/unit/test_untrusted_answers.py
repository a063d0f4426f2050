"""Numbers from another process's answer are read one way (``gputui.common.untrusted``):
whatever the head sends, a time is a finite time in range or it is left out, so
``gputui incident`` prints its timeline and never a traceback."""

from __future__ import annotations

import contextlib
import io
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import console as cli
from gputui.cli import incident as cli_incident
from gputui.common.untrusted import TIME_MAX, epoch, integer, number

# Anything JSON can carry where a number is expected (Python's json reads NaN,
# Infinity and ints of any size).
HOSTILE = (
    st.floats()
    | st.integers(-(10**400), 10**400)
    | st.booleans()
    | st.none()
    | st.text(max_size=8)
    | st.just(1e300)
    | st.just(math.nan)
)


@given(HOSTILE)
def test_a_number_is_finite_and_in_range_or_none(value: Any) -> None:
    got = number(value)
    assert got is None or (math.isfinite(got) and abs(got) < 1e12)
    at = epoch(value)
    assert at is None or (math.isfinite(at) and 0 <= at < TIME_MAX)
    whole = integer(value, 0, 1023)
    assert whole is None or (type(whole) is int and 0 <= whole <= 1023)


@st.composite
def audit_answers(draw: st.DrawFn) -> dict[str, Any]:
    rows = draw(
        st.lists(
            st.builds(
                dict,
                time=HOSTILE,
                target=st.sampled_from(["a", "a:0", "a:1", "b", 3]),
                user=st.text(max_size=4),
                action=st.sampled_from(["drain", "fence"]),
                outcome=HOSTILE,
            ),
            max_size=6,
        )
    )
    return {"rows": rows}


@st.composite
def kept_answers(draw: st.DrawFn) -> dict[str, Any]:
    readings = draw(
        st.lists(
            st.builds(
                dict,
                time=HOSTILE,
                gpu=HOSTILE | st.integers(0, 3),
                state=st.sampled_from(["ok", 7]),
                util_gpu=HOSTILE,
                temp_c=HOSTILE,
            ),
            max_size=6,
        )
    )
    return {"readings": readings, "kept_since": draw(HOSTILE)}


@given(answer=audit_answers(), kept=kept_answers(), gpu=st.none() | st.integers(0, 1))
def test_any_audit_or_reading_answer_makes_a_printable_timeline(
    answer: dict[str, Any], kept: dict[str, Any], gpu: int | None
) -> None:
    notes: list[str] = []
    entries = cli_incident._audit_rows(answer, host="a", gpu=gpu) + cli_incident._readings(
        kept, 0.0, notes
    )
    for entry in entries:
        assert math.isfinite(entry.time) and 0 <= entry.time < TIME_MAX
        cli_incident._stamp(entry.time)  # what the timeline prints: never raises
    assert all(isinstance(n, str) for n in notes)


@given(
    wait=st.floats().filter(lambda w: not 0 < w <= 3600)
    | st.sampled_from(["nan", "inf", "-inf", "1e999", "0"])
)
def test_incident_refuses_a_wait_out_of_range_in_one_line(wait: float | str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["incident", "a", f"--wait={wait}"])
    assert code == 3
    assert err.getvalue().splitlines() == [
        "gputui incident: --wait must be between 0 and 3600 seconds"
    ]
