"""hosts.yaml's ``jobs:`` section (interactive jobs' limits): the example documents the
defaults, durations read as ``--time`` reads them, and anything else is one line
naming the setting, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.loader import ConfigError, parse_config
from gputui.config.models import JobsConfig

REPO = Path(__file__).resolve().parents[2]
FIELDS = ("interactive_time", "interactive_idle")
"""The durations (``runtime``, the other field, has tests of its own)."""
HIGH = {"interactive_time": 30 * 86400, "interactive_idle": 7 * 86400}


def test_the_example_documents_the_defaults() -> None:
    raw = yaml.safe_load((REPO / "hosts.example.yaml").read_text())["jobs"]
    assert set(raw) == {"runtime", *FIELDS}
    assert JobsConfig.model_validate(raw) == JobsConfig()
    assert (JobsConfig().interactive_time, JobsConfig().interactive_idle) == (8 * 3600, 3600)


@pytest.mark.parametrize(
    ("value", "seconds"), [("90s", 90), ("30m", 1800), ("2h", 7200), ("1-00:00", 86400), (5, 5)]
)
def test_durations_read_as_time_reads_them(value: object, seconds: float) -> None:
    config = parse_config(json.dumps({"jobs": {"interactive_idle": value}}), "hosts.yaml")
    assert config.jobs.interactive_idle == seconds


@settings(max_examples=300)
@given(
    field=st.sampled_from(FIELDS),
    value=st.one_of(
        # What YAML can carry (a control character is the YAML reader's to refuse).
        st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(10**12), max_value=10**12),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=2),
    ),
)
def test_any_value_is_a_duration_in_range_or_one_line_naming_it(field: str, value: object) -> None:
    text = json.dumps({"jobs": {field: value}}, allow_nan=True, ensure_ascii=False)
    try:
        config = parse_config(text, "hosts.yaml")
    except ConfigError as exc:
        assert len(exc.lines) == 1, exc.lines
        assert exc.lines[0].startswith(f"hosts.yaml:1: jobs.{field}: "), exc.lines
        return
    seconds = getattr(config.jobs, field)
    assert 1 <= seconds <= HIGH[field]
