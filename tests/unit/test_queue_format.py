"""``gputui queue -o FORMAT``: squeue's field letters, widths and alignment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import qformat

JOB = {
    "id": 12,
    "name": "a-rather-long-training-name",
    "user": "alice",
    "state": "running",
    "reason": "",
    "gpus": 2,
    "pool": "a100",
    "host": "gpu01",
    "host_constraint": None,
    "priority": "normal",
    "time_limit_s": 7200.0,
    "submitted_at": 1_700_000_000.0,
    "started_at": 1_700_000_060.0,
    "ended_at": None,
}


def test_widths_cut_pad_and_right_align_as_squeue_does() -> None:
    parts = qformat.parse("%.5i|%8j|%u %t %T %M/%l %D%% %R")
    head, row = qformat.lines(parts, [JOB], now=1_700_003_725.0)
    assert head == "JOBID|NAME    |USER ST STATE TIME/TIME_LIMIT GPUS% REASON"
    assert row == "   12|a-rather|alice R RUNNING 1:01:05/2:00:00 2% gpu01"


def test_a_waiting_job_shows_its_reason_and_no_start() -> None:
    waiting = {**JOB, "state": "queued", "reason": "Resources", "started_at": None, "host": None}
    waiting["time_limit_s"] = None
    parts = qformat.parse("%t %R %S %l %P %Q %b %h")
    assert qformat.lines(parts, [waiting], 0.0)[1] == "PD Resources N/A UNLIMITED a100 normal 2 -"


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("%i %Z", "--format: unknown field %Z (known: "),
        ("%.10", "--format: a field letter must follow % at 1"),
        ("plain text", "--format: no field in it"),
        ("%999j", "--format: width 999 is over 200"),
    ],
)
def test_a_bad_format_is_one_line(spec: str, said: str) -> None:
    with pytest.raises(qformat.FormatError) as info:
        qformat.parse(spec)
    assert str(info.value).startswith(said) and "\n" not in str(info.value)


def test_the_documented_example_fits_80_columns() -> None:
    parts = qformat.parse("%.8i %.12j %.8u %.2t %.10M %.10l %.4D %.18R")
    long = {k: (v * 30 if isinstance(v, str) else v) for k, v in JOB.items()}
    assert all(len(line) <= 80 for line in qformat.lines(parts, [JOB, long], 1e9))


@given(spec=st.text(max_size=80), name=st.text(max_size=60))
def test_any_format_is_parts_or_one_line_error(spec: str, name: str) -> None:
    try:
        parts = qformat.parse(spec)
    except qformat.FormatError as exc:
        assert "\n" not in str(exc)
        return
    for line in qformat.lines(parts, [{**JOB, "name": name}], 1e9):
        assert line.isprintable()
