"""The requests that change something at the head: one definition, shared by the
clients (which give each a request id and retry it once under that id) and the
head's decoder (which refuses one without an id and answers a retry from its log).

Plain names and nothing imported, so a CLI call that imports it stays light.
"""

from __future__ import annotations

MUTATING = frozenset(
    {
        "submit", "cancel", "kill", "preempt", "requeue", "hold", "release_hold", "claim",
        "release", "drain", "undrain", "unfence", "force_free", "health_ack", "notices",
        "book", "unbook",
    }
)  # fmt: skip

MAX_VIEWED_HOSTS = 256
"""Hosts a console may say it shows (``telemetry`` ``detail``, ``telemetry_view``):
more than a screen holds; the head refuses a longer list."""
