"""The shared argument types: a bad value is one short line, however long it was."""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from gputui.common.argtypes import MAX_GPUS, gpu_count, job_id


@given(
    st.text(min_size=60, max_size=2000)
    | st.from_regex(r"\s*-?\d{60,1000}\s*", fullmatch=True)
    | st.integers(MAX_GPUS + 1, 10**200).map(str)
)
def test_a_long_bad_value_is_cut_in_its_one_line(text: str) -> None:
    for parse in (gpu_count, job_id):
        try:
            parse(text)
        except argparse.ArgumentTypeError as exc:
            message = str(exc)
            assert "\n" not in message
            assert len(message) <= 30 + len(repr(text[:40])), message
