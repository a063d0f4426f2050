"""hosts.yaml's ``scheduler.power``: the modes, YAML's bare ``off``, and a bad value in
one line naming its place (the file may be written by another user)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.loader import ConfigError, parse_config


def _power(body: str) -> object:
    return parse_config(f"hosts: []\nscheduler:\n  power:\n{body}", "hosts.yaml").scheduler.power


@pytest.mark.parametrize(("text", "mode"), [("off", "off"), ("'off'", "off"), ("report", "report"),
                                             ("lock", "lock"), ("no", "off")])  # fmt: skip
def test_the_modes_and_yamls_bare_off(text: str, mode: str) -> None:
    power = _power(f"    mode: {text}\n    idle_minutes: 5\n")
    assert (power.mode, power.idle_minutes) == (mode, 5.0)  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.characters(whitelist_categories=("L", "N", "P", "S", "Zs")), max_size=30).filter(
        lambda t: t not in ("off", "report", "lock")
    )
)
def test_any_other_mode_is_one_line_naming_it(mode: str) -> None:
    with pytest.raises(ConfigError) as info:
        _power(f"    mode: {json.dumps(mode, ensure_ascii=False)}\n")
    (line,) = info.value.lines
    assert line.startswith("hosts.yaml:4: scheduler.power.mode:"), line
    assert "\n" not in line and "\x1b" not in line


@pytest.mark.parametrize("minutes", ["0", "-3", "10081", ".nan", "'soon'", "true"])
def test_idle_minutes_out_of_range_is_one_line(minutes: str) -> None:
    with pytest.raises(ConfigError) as info:
        _power(f"    idle_minutes: {minutes}\n")
    (line,) = info.value.lines
    assert line.startswith("hosts.yaml:4: scheduler.power.idle_minutes:"), line
