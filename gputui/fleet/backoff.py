"""Reconnect timing: jittered exponential backoff, and the knobs tests turn down."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gputui.health.staleness import stale_limit


@dataclass(frozen=True, slots=True)
class LinkTiming:
    """How patient a host link is. The defaults suit people; tests shrink them."""

    backoff_base: float = 1.0
    """First reconnect delay ceiling; doubles per failed attempt."""
    backoff_cap: float = 60.0
    """Largest reconnect delay ceiling."""
    refused_cap: float = 2.0
    """Largest reconnect delay ceiling while the host refuses connections: it is up and
    its sshd is not (yet), as in a reboot, so it is live within seconds of sshd
    returning. A refusal costs one packet each way (or one channel on a bastion)."""
    slow_retry: float = 60.0
    """Delay before retrying what a person must fix (host keys, auth, a broken helper)."""
    hello_timeout: float = 20.0
    """Seconds for a started helper to say hello."""
    hung_after: float | None = None
    """Seconds without any data before the connection is dropped and redone;
    None means ``max(30, 6 * stale)``; never under 4 sample intervals (``thresholds``)."""
    request_timeout: float = 10.0
    """Seconds to wait for the helper to answer a request."""
    close_timeout: float = 2.0
    """Seconds to let a helper and its connection close politely."""
    stable_after: float = 30.0
    """A session that lasted this long resets the backoff."""


def thresholds(
    stale_after_s: float, interval: float, hung_after: float | None = None
) -> tuple[float, float]:
    """(stale, hung): seconds of silence before a host shows STALE, and before its
    connection is dropped and redone.

    Both follow the sample interval, so a slow refresh never makes hosts flap between
    LIVE and STALE at every sample, nor cuts every connection: stale is at least 2.5
    intervals (one late sample is not staleness), hung at least 4.
    """
    stale = stale_limit(stale_after_s, interval)
    hung = hung_after if hung_after is not None else max(30.0, 6 * stale)
    return stale, max(hung, 4 * interval)


class Backoff:
    """Full-jitter exponential backoff: a random delay up to ``base * 2**n``, capped.

    Jitter spreads the reconnects of hundreds of hosts that dropped together (a
    switch reboot), so they do not all hit their sshd in the same second.
    """

    def __init__(self, base: float, cap: float, rng: random.Random | None = None) -> None:
        self.base = base
        self.cap = cap
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self, cap: float | None = None) -> float:
        """The next delay; ``cap``, when given and lower, replaces the usual cap."""
        top = self.cap if cap is None else min(cap, self.cap)
        ceiling = min(top, self.base * (2**self.attempt))
        self.attempt = min(self.attempt + 1, 32)
        # A small floor keeps a crash loop from spinning.
        return max(self.base / 10, self._rng.uniform(0, ceiling))

    def slow(self, seconds: float) -> float:
        """A slow retry (something a person must fix), with +-20 % jitter."""
        return seconds * self._rng.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.attempt = 0
