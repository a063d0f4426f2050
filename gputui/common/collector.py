"""The cyclic garbage collector's pace in gputui's long-running processes.

The head and the console both take in a stream of samples: every sample of every
host makes thousands of objects that live until that host's next sample (its decoded
GPUs, its snapshot, the head's findings, the console's rows), and decoding one makes
thousands more that live a moment. At Python's default pace (a young collection every
700 objects made and not yet freed, an older one every tenth) a burst of the second
kind starts collections that scan and promote the first kind again and again, and the
promoted pile up into full collections over every object of the process: a fifth of
the head's CPU at a few hundred hosts (``bench/ingest.py``); for a console through the
head at 1,000 hosts, a quarter of its CPU, and a full collection of about 0.2 s every
minute or so, in the middle of whatever the screen was doing (``bench/consoles.py``).
A console on its own SSH sessions (``--direct``) decodes every host's whole sample
each second and is paced the same. Nearly all of it is freed by reference counting
anyway: the collector only finds cycles (up to some hundred thousand objects' worth
wait for it now), and comes less often here, not never.
"""

from __future__ import annotations

import gc

GC_THRESHOLDS = (100_000, 50, 10)
"""``gc.set_threshold``'s three numbers for a head or a console process."""


def pace_collector() -> None:
    """Pace the collector for a long-running process (the head, a console)."""
    gc.set_threshold(*GC_THRESHOLDS)
