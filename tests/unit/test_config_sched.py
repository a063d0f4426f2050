"""hosts.yaml's ``scheduler:`` section: its defaults are the ones the example file
documents, and a bad value is one line naming its place."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gputui.config.loader import ConfigError, parse_config
from gputui.config.scheduler import SchedulerConfig

REPO = Path(__file__).resolve().parents[2]


def test_the_example_documents_every_default_and_only_defaults() -> None:
    raw = yaml.safe_load((REPO / "hosts.example.yaml").read_text())["scheduler"]
    documented = SchedulerConfig.model_validate(raw, strict=False)
    assert documented == SchedulerConfig()
    # Every field of every part is written out, so a reader sees each default.
    for name, field in SchedulerConfig.model_fields.items():
        assert name in raw, f"hosts.example.yaml: scheduler.{name} is not documented"
        sub = getattr(field.annotation, "model_fields", None)
        if isinstance(sub, dict) and isinstance(raw[name], dict):
            for part in sub:
                assert part in raw[name], f"scheduler.{name}.{part} is not documented"


def _errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "hosts.yaml")
    return info.value.lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "scheduler:\n  default_class: vip\n",
            "hosts.yaml:3: scheduler: default_class 'vip' is not one of the classes",
        ),
        (
            "scheduler:\n  off_hours: {start: '25:00'}\n",
            "hosts.yaml:3: scheduler.off_hours.start: '25:00' is not a time of day HH:MM",
        ),
        (
            "scheduler:\n  classes:\n    - {name: a}\n    - {name: a}\n  default_class: a\n",
            "hosts.yaml:3: scheduler: classes: a class name is given twice",
        ),
        (
            "scheduler:\n  quotas:\n    - {group: g, gpu_hours_per_week: -1}\n",
            "hosts.yaml:4: scheduler.quotas[0].gpu_hours_per_week:",
        ),
        (
            "scheduler:\n  fair_share: {half_life_days: .nan}\n",
            "hosts.yaml:3: scheduler.fair_share.half_life_days:",
        ),
        ("scheduler:\n  preemption: {bogus: 1}\n", "hosts.yaml:3: scheduler.preemption.bogus:"),
        ("scheduler:\n  private_data: 'yes'\n", "hosts.yaml:3: scheduler.private_data:"),
        (
            "scheduler:\n  placement:\n    avoid: [phantom, dusty]\n",
            "hosts.yaml:4: scheduler.placement.avoid[1]:",
        ),
        (
            "scheduler:\n  placement: {avoid: [rogue], never: [rogue]}\n",
            "hosts.yaml:3: scheduler.placement: 'rogue' is in both avoid and never",
        ),
        (
            "scheduler:\n  placement:\n    never: [critical, critical]\n",
            "hosts.yaml:4: scheduler.placement: never: 'critical' is given twice",
        ),
    ],
)
def test_a_bad_scheduler_value_is_one_line_naming_it(text: str, expected: str) -> None:
    lines = _errors("hosts: []\n" + text)  # the section starts on line 2
    assert len(lines) == 1
    assert lines[0].startswith(expected), lines


def test_group_of_prefers_the_map_then_a_known_unix_group_then_the_primary() -> None:
    config = SchedulerConfig.model_validate(
        {
            "groups": {"researchers": ["alice"]},
            "fair_share": {"shares": {"interns": 1}},
            "quotas": [{"group": "lab", "gpu_hours_per_week": 5}],
        },
        strict=False,
    )
    assert config.group_of("alice", frozenset({"interns"}), "alice") == "researchers"
    assert config.group_of("bob", frozenset({"lab", "interns", "bob"}), "bob") == "interns"
    assert config.group_of("carol", frozenset({"carol", "staff"}), "carol") == "carol"
    assert config.rank("urgent") == 0 and config.rank("gone") == len(config.classes)
