"""Rules that turn readings into problems, shared by the console and the head.

No Textual and nothing of the console here: the head daemon uses the same rules to
decide what is unhealthy, and the console to decide what to show in which colour.
"""

from __future__ import annotations

from gputui.health.rules import (
    ORPHAN_MEMORY_MIB,
    RECENT_EVENT_S,
    Flag,
    Severity,
    data_notes,
    gpu_flags,
    has_standing_problem,
    holds_memory_without_process,
    host_message,
    host_severity,
    last_xid_time,
    temp_severity,
)
from gputui.health.staleness import is_stale, snapshot_is_stale, stale_limit

__all__ = [
    "ORPHAN_MEMORY_MIB",
    "RECENT_EVENT_S",
    "Flag",
    "Severity",
    "data_notes",
    "gpu_flags",
    "has_standing_problem",
    "holds_memory_without_process",
    "host_message",
    "host_severity",
    "is_stale",
    "last_xid_time",
    "snapshot_is_stale",
    "stale_limit",
    "temp_severity",
]
