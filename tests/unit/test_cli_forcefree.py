"""``gputui force-free``'s argument and its step lines (hostile text from the head)."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.cli.args import target
from gputui.cli.forcefree import step_line

UNSHOWABLE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]}


def test_a_target_is_host_and_index_or_uuid() -> None:
    assert target("gpu01:3") == ("gpu01", "3")
    assert target("a.b:GPU-12ab-cd") == ("a.b", "GPU-12ab-cd")
    for bad in ("gpu01", "gpu01:", ":3", "gpu01:3:4", "gpu01:x", "gpu 01:3", "gpu01:999"):
        with pytest.raises(argparse.ArgumentTypeError):
            target(bad)


def test_a_step_is_one_line_with_its_mark() -> None:
    assert step_line({"step": "sigkill", "ok": True, "outcome": "pid 7 SIGKILL delivered"}) == (
        "sigkill  ok      pid 7 SIGKILL delivered"
    )
    assert step_line({"step": "reset", "ok": "yes", "outcome": "x"}).split()[:2] == [
        "reset",
        "FAILED",
    ]
    assert "not an object" in step_line(["drain"])


@given(st.one_of(st.dictionaries(st.sampled_from(["step", "ok", "outcome"]), st.text()), st.text()))
def test_hostile_steps_print_as_one_clean_line(step: object) -> None:
    line = step_line(step)
    assert "\n" not in line and not (set(line) & UNSHOWABLE)
    assert len(line) <= 430
