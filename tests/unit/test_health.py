"""The health rules and the one staleness rule, as the console and the head use them."""

from __future__ import annotations

import pytest

from gputui.config.models import HealthThresholds
from gputui.health import host_severity, is_stale, snapshot_is_stale, stale_limit
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.format import host_status_text

NOW = 1_700_000_000.0


def host(status: HostStatus, age: float | None, limit: float | None = None) -> HostSnapshot:
    received = None if age is None else NOW - age
    return HostSnapshot(
        name="h", address="h", status=status, received_at=received, stale_after_s=limit
    )


def test_the_rule_is_at_or_over_the_limit_and_none_is_never_stale() -> None:
    assert not is_stale(None, 5.0)
    assert not is_stale(4.999, 5.0)
    assert is_stale(5.0, 5.0)
    assert is_stale(60.0, 5.0)


def test_the_limit_follows_a_slow_interval() -> None:
    assert stale_limit(5.0, 1.0) == 5.0
    assert stale_limit(5.0, 10.0) == 25.0


@pytest.mark.parametrize(
    ("snapshot", "default", "stale"),
    [
        (host(HostStatus.LIVE, 1.0), 5.0, False),
        (host(HostStatus.LIVE, 5.0), 5.0, True),
        # The source's own limit wins over the default (an interval set at run time).
        (host(HostStatus.LIVE, 20.0, limit=25.0), 5.0, False),
        (host(HostStatus.LIVE, 2.0, limit=1.0), 5.0, True),
        (host(HostStatus.LIVE, None), 5.0, False),
        # The source said STALE: stale whatever the age.
        (host(HostStatus.STALE, 0.1), 5.0, True),
        # Down or stopped hosts are not "stale": they are something worse, or nothing.
        (host(HostStatus.UNREACHABLE, 60.0), 5.0, False),
        (host(HostStatus.STOPPED, 60.0), 5.0, False),
        (host(HostStatus.CONNECTING, 60.0), 5.0, False),
    ],
)
def test_snapshot_staleness(snapshot: HostSnapshot, default: float, stale: bool) -> None:
    assert snapshot_is_stale(snapshot, NOW, default) is stale


@pytest.mark.parametrize("age", [0.5, 4.9, 5.0, 5.1, 30.0])
@pytest.mark.parametrize("limit", [None, 2.0, 25.0])
def test_word_and_colour_agree(age: float, limit: float | None) -> None:
    health = HealthThresholds(stale_after_s=5.0)
    snap = host(HostStatus.LIVE, age, limit)
    word = host_status_text(snap, NOW, health.stale_after_s).split()[0]
    severity = host_severity(snap, NOW, health)
    assert (word == "stale") is (severity == "warn")
    assert (word == "stale") is snapshot_is_stale(snap, NOW, health.stale_after_s)


def test_severities_by_status() -> None:
    health = HealthThresholds()
    assert host_severity(host(HostStatus.CONNECTING, None), NOW, health) == "info"
    assert host_severity(host(HostStatus.STOPPED, None), NOW, health) == "muted"
    assert host_severity(host(HostStatus.STALE, 1.0), NOW, health) == "warn"
    assert host_severity(host(HostStatus.AUTH_FAILED, None), NOW, health) == "crit"
    assert host_status_text(host(HostStatus.UNREACHABLE, 9.0), NOW, 5.0) == "unreachable"
