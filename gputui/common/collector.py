"""The cyclic garbage collector's pace in gputui's long-running processes.

The head and the console both take in a stream of samples: every sample of every
host makes tens to hundreds of objects that live until that host's next sample or
reading (its decoded GPUs and NVLinks, its snapshot, the head's findings, the
console's rows), and decoding one makes more that live a moment. At Python's
default pace (a young collection every 700 objects made and not yet freed, an older
one every tenth) a burst of the second kind starts collections that scan and
promote the first kind again and again, and the promoted pile up into full
collections over every object of the process: a fifth of the head's CPU at a few
hundred hosts (``bench/ingest.py``); for a console through the head at 1,000
hosts, a quarter of its CPU, and a full collection of about 0.2 s every minute or
so, in the middle of whatever the screen was doing (``bench/consoles.py``). A
console on its own SSH sessions (``--direct``) decodes every host's whole sample
each second and is paced the same. Nearly all of it is freed by reference counting
anyway: the collector only finds cycles (up to some hundred thousand objects' worth
wait for it now, more in a head of many hosts: ``thresholds``), and comes less
often here, not never.
"""

from __future__ import annotations

import gc

GC_THRESHOLDS = (100_000, 50, 10)
"""``gc.set_threshold``'s three numbers for a console, and for a head of up to
``GC_THRESHOLDS[0] // YOUNG_PER_HOST`` hosts."""
YOUNG_PER_HOST = 400
"""What a head keeps a while of each host's samples, in objects the collector tracks:
about 55 for a sample (kept until the host's next, a second on), 350 for a health
reading with its NVLinks (kept until the next reading, ten samples on)."""


def thresholds(hosts: int = 0) -> tuple[int, int, int]:
    """The collector's pace for a process that keeps ``hosts`` hosts' samples: a young
    collection once the objects made and not yet freed outnumber what those samples
    hold (``YOUNG_PER_HOST`` each), and never sooner than ``GC_THRESHOLDS`` says.

    A young collection scans every object made since the last one and still alive:
    at 1,000 hosts, the samples of the last seconds, some hundreds of thousands. At
    100,000 such a head collected every two seconds while ``/metrics`` was scraped,
    for 0.1 to 0.3 s of its loop each time, and found a few hundred objects of garbage
    each time. The count the collector keeps climbed by some 50,000 a second between
    them, though nothing piled up: each collection sets it to zero, and the samples
    it had just scanned, freed a moment later, do not count it down below zero. At
    400,000 it did not collect at all in the same 25 s of scrapes, and its memory was
    the same (``bench/consoles.py``'s head). The price is a rarer, longer pause when
    one does come (0.7 to 0.9 s at 1,000 hosts, about once a minute or less); there is
    no ceiling, so a head of 10,000 hosts collects at 4,000,000, and a pause then
    scans about ten times as many objects."""
    young, middle, old = GC_THRESHOLDS
    return max(young, YOUNG_PER_HOST * max(hosts, 0)), middle, old


def pace_collector(hosts: int = 0) -> None:
    """Pace the collector for a long-running process (the head with ``hosts`` hosts,
    a console)."""
    gc.set_threshold(*thresholds(hosts))
