"""Ending asyncio tasks one owns: cancel them and wait until they have ended.

The idiom this replaces, ``task.cancel()`` then ``with suppress(BaseException):
await task``, also swallows a cancellation of the *caller* that comes while it waits:
the caller then carries on as though nothing had happened, and an event loop being
shut down (which cancels every task once and waits for them all) waits for ever on a
task that will not be cancelled again. ``cancel_and_wait`` waits with
``asyncio.wait``, which returns when the tasks are done and lets the caller's own
cancellation through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel each of ``tasks`` (``None`` and those already done are skipped) and wait
    until every one has ended, however it ends: its result, its exception and its
    cancellation are all dropped here (the exception marked retrieved, so nothing is
    logged about it later). A cancellation of the caller while it waits is raised."""
    pending = {task for task in tasks if task is not None}
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    for task in pending:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved (one that failed as it was cancelled): no news
