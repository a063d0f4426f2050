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
import sys
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


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


async def within(awaitable: Awaitable[T], timeout: float | None) -> T:
    """``asyncio.wait_for(awaitable, timeout)`` that never loses the caller's own
    cancellation. Python 3.11's ``wait_for`` returns the result, and drops the
    cancellation, when the caller is cancelled just as the awaited thing finishes (a
    probe answered, an event set): the caller then carries on, and whoever cancelled
    it waits for ever. ``asyncio.timeout`` (3.11 and later; ``wait_for`` itself in 3.12)
    does not. ``TimeoutError`` when ``timeout`` passes first; None: no limit."""
    if sys.version_info < (3, 11):  # (no asyncio.timeout there: wait_for as it is)
        return await asyncio.wait_for(awaitable, timeout)
    async with asyncio.timeout(timeout):
        return await awaitable
