"""``cancel_and_wait``: the tasks one owns end, whatever they end with, and a
cancellation of the one waiting for them is never swallowed (an event loop being shut
down cancels every task once: a task that swallowed it would be waited for for ever)."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import pytest

from gputui.common.tasks import cancel_and_wait, within


def test_every_task_ends_and_nothing_it_raised_is_reported_later() -> None:
    reported: list[str] = []

    async def fails() -> None:
        raise RuntimeError("boom")

    async def fails_as_it_ends() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            raise RuntimeError("its clean-up failed")

    async def main() -> tuple[bool, bool, bool]:
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, context: reported.append(context["message"])
        )
        failed = asyncio.create_task(fails())
        await asyncio.sleep(0)  # it has raised: its exception waits to be retrieved
        done = asyncio.create_task(asyncio.sleep(0))
        await done
        waiting = asyncio.create_task(asyncio.Event().wait())
        ending = asyncio.create_task(fails_as_it_ends())
        await asyncio.sleep(0)
        await cancel_and_wait([failed, done, waiting, ending, None])
        return failed.done(), done.done() and ending.done(), waiting.cancelled()

    assert asyncio.run(main()) == (True, True, True)
    gc.collect()  # a task whose exception nobody retrieved says so as it is collected
    assert reported == []


async def test_the_waiters_own_cancellation_goes_through() -> None:
    """The caller is cancelled while the task it waits for shrugs off its cancel: the
    caller ends cancelled, rather than carrying on as though nothing had happened."""
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    carried_on = False

    async def closer() -> None:
        nonlocal carried_on
        await cancel_and_wait([task])
        carried_on = True

    closing = asyncio.create_task(closer())
    await asyncio.sleep(0)
    closing.cancel()
    await asyncio.wait([closing], timeout=10)  # a bound for the failure: it ends at once
    ended_cancelled = closing.done() and closing.cancelled()
    release.set()  # whatever happened, the stubborn task may end now
    await asyncio.wait([task, closing])
    assert ended_cancelled and not carried_on


async def test_within_lets_a_cancellation_through_that_comes_as_the_awaited_thing_ends() -> None:
    """3.11's ``wait_for`` returns the result instead (the PostgreSQL change feed's
    probe, answered as the head stopped it, then listened on for ever)."""
    event = asyncio.Event()
    went_on: list[str] = []

    async def waiter() -> None:
        await within(event.wait(), 10)
        went_on.append("carried on")

    task = asyncio.get_running_loop().create_task(waiter())
    await asyncio.sleep(0)  # the waiter waits
    event.set()  # the awaited thing ends ...
    task.cancel()  # ... in the same turn of the loop as the cancellation comes
    with pytest.raises(asyncio.CancelledError):
        await task
    assert went_on == []


async def test_within_is_wait_for_otherwise() -> None:
    assert await within(asyncio.sleep(0, "done"), 1) == "done"
    assert await within(asyncio.sleep(0, "unbounded"), None) == "unbounded"
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)
