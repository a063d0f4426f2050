"""The scheduling policy: pure functions from a view of the cluster to decisions.

``model`` holds the types and the reasons a job waits; ``passes`` the pass itself
(classes, fair share, quotas, preemption, reservations, backfill), with ``state`` and
``rooms`` for what a pass keeps and its preemption and reservations; ``reference``
applies the same rules the plain way, for the property tests to compare. Beside it:
``line`` (the waiting line, from the stored rows), ``shares`` (fair share, quotas,
off-hours), ``explain``, ``ownership``, ``accounting``, ``meter`` and ``lookup``.

Pure: no store, no daemon, no socket, no I/O and no asyncio; it imports hosts.yaml's
``scheduler:`` models and the standard library. Everything else in the scheduler may
import it; it imports nothing of the scheduler outside this folder.
"""
