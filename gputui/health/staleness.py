"""When a host's data is stale: the one rule, used by the link's watchdog and the views.

A host is stale once its newest sample is at least its stale limit old. The limit is
hosts.yaml's ``stale_after_s`` raised to 2.5 sampling intervals (``stale_limit``), so a
slow refresh never reads as staleness. Whoever samples (the fleet's link, later the
head) puts the limit it applies in the snapshot, so a view that re-checks the age
between two snapshots uses the same number, even after the interval was changed.
"""

from __future__ import annotations

from gputui.telemetry import HostSnapshot, HostStatus

__all__ = ["is_stale", "snapshot_is_stale", "stale_limit"]


def stale_limit(stale_after_s: float, interval: float) -> float:
    """hosts.yaml's ``stale_after_s`` for a host sampled every ``interval`` seconds: at
    least 2.5 intervals, since one late sample at a slow refresh is not staleness."""
    return max(stale_after_s, 2.5 * interval)


def is_stale(silent_s: float | None, limit_s: float) -> bool:
    """The rule: ``silent_s`` seconds since the last sample is stale at ``limit_s`` or more.

    None (no sample yet) is not stale: a host that never sampled is still connecting.
    """
    return silent_s is not None and silent_s >= limit_s


def snapshot_is_stale(snapshot: HostSnapshot, now: float, default_limit_s: float) -> bool:
    """Whether ``snapshot``'s data is stale at wall time ``now``.

    A host its source already marked STALE is; a LIVE one is once its data is as old
    as the snapshot's own limit (``default_limit_s`` when the source set none). Hosts
    in any other state are not "stale": they are down, connecting or stopped.
    """
    if snapshot.status is HostStatus.STALE:
        return True
    if snapshot.status is not HostStatus.LIVE:
        return False
    limit = snapshot.stale_after_s if snapshot.stale_after_s is not None else default_limit_s
    return is_stale(snapshot.age(now), limit)
