"""The bastion pool on its own: one open per chain, shared, counted, reopened."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from gputui.fleet.failures import Failure
from gputui.fleet.jumps import Chain, Hop, JumpFailure, JumpPool, parse_chain
from gputui.telemetry import HostStatus

WaitFor = Callable[..., Awaitable[Any]]


class FakeConn:
    """Stands in for an ``SSHClientConnection``: closes, and says when it is closed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._closed = asyncio.Event()

    def is_closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()

    async def wait_closed(self) -> None:
        await self._closed.wait()


class Opener:
    """Records every hop opened; ``gate`` holds opens until the test lets them go."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, str | None]] = []
        self.entered = 0
        """Opens begun (some may still wait at ``gate``)."""
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None

    async def __call__(self, chain: Chain, through: Any) -> Any:
        self.entered += 1
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.opened.append((str(chain[-1]), through.name if through else None))
        return FakeConn(str(chain[-1]))


A = parse_chain("ops@bastion:2222")
AB = parse_chain("ops@bastion:2222,inner")


def test_parse_chain() -> None:
    assert parse_chain("u@h:22,[::1]:2200,plain") == (
        Hop("u", "h", 22),
        Hop(None, "::1", 2200),
        Hop(None, "plain", None),
    )
    assert str(Hop(None, "::1", 2200)) == "[::1]:2200"
    assert parse_chain("none") == parse_chain(" None ") == ()
    for bad in ("", "a,,b", "u@", "h:port"):
        with pytest.raises(ValueError, match="proxy_jump"):
            parse_chain(bad)


async def test_concurrent_leases_share_one_open_and_the_last_release_closes(
    wait: WaitFor,
) -> None:
    pool, opener = JumpPool(linger=0), Opener()
    opener.gate.clear()
    leases = asyncio.gather(*(pool.acquire(A, "s", opener) for _ in range(20)))
    # The open runs in a task made by the first acquire, so all 20 had their turn by then.
    await wait(lambda: opener.entered, what="the shared open to begin")
    assert opener.entered == 1 and not leases.done()
    opener.gate.set()
    got = await leases
    assert opener.opened == [("ops@bastion:2222", None)]
    assert len({id(lease.conn) for lease in got}) == 1
    conn = got[0].conn
    for lease in got[:-1]:
        lease.release()
        lease.release()  # a second release of the same lease counts for nothing
    assert not conn.is_closed() and pool.open_count() == 1
    got[-1].release()
    assert conn.is_closed() and pool.open_count() == 0


async def test_a_dropped_connection_is_reopened_by_the_next_lease() -> None:
    pool, opener = JumpPool(linger=0), Opener()
    first = await pool.acquire(A, "s", opener)
    first.conn.close()  # the bastion went away under its users
    second = await pool.acquire(A, "s", opener)
    assert second.conn is not first.conn and not second.conn.is_closed()
    assert len(opener.opened) == 2
    first.release()  # the old lease ending does not touch the new connection
    assert not second.conn.is_closed()
    second.release()


async def test_a_failed_open_reaches_every_waiter_and_is_retried(wait: WaitFor) -> None:
    pool, opener = JumpPool(linger=0), Opener()
    opener.gate.clear()
    opener.fail = JumpFailure(Failure(HostStatus.UNREACHABLE, "bastion x: connection refused"))
    waiting = [asyncio.ensure_future(pool.acquire(A, "s", opener)) for _ in range(3)]
    await wait(lambda: opener.entered, what="the shared open to begin")
    assert opener.entered == 1 and not any(w.done() for w in waiting)
    opener.gate.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, JumpFailure) for r in results)
    opener.fail = None
    lease = await pool.acquire(A, "s", opener)
    assert opener.opened == [("ops@bastion:2222", None)]
    lease.release()


async def test_a_chain_opens_each_hop_once_through_the_one_before() -> None:
    pool, opener = JumpPool(linger=0), Opener()
    leases = await asyncio.gather(*(pool.acquire(AB, "s", opener) for _ in range(5)))
    assert opener.opened == [("ops@bastion:2222", None), ("inner", "ops@bastion:2222")]
    assert pool.open_count() == 2
    for lease in leases:
        lease.release()
    assert pool.open_count() == 0  # the inner hop let go of the outer one


async def test_different_settings_do_not_share() -> None:
    pool, opener = JumpPool(linger=0), Opener()
    one = await pool.acquire(A, "key-1", opener)
    two = await pool.acquire(A, "key-2", opener)
    assert one.conn is not two.conn
    one.release()
    two.release()


async def test_close_closes_what_is_still_open() -> None:
    pool, opener = JumpPool(linger=0), Opener()
    lease = await pool.acquire(AB, "s", opener)
    await pool.close()
    assert lease.conn.is_closed() and pool.open_count() == 0


async def test_an_idle_connection_lingers_for_the_next_lease(wait: WaitFor) -> None:
    """A host down behind the bastion retries every few seconds: each retry reuses the
    connection instead of costing the bastion a handshake, until it has been idle for
    ``linger`` seconds."""
    pool, opener = JumpPool(linger=0.3), Opener()
    lease = await pool.acquire(AB, "s", opener)
    conn = lease.conn
    lease.release()
    assert not conn.is_closed() and pool.open_count() == 2
    again = await pool.acquire(AB, "s", opener)
    assert again.conn is conn and len(opener.opened) == 2  # nothing opened anew
    again.release()
    await wait(lambda: pool.open_count() == 0, what="the idle connections to expire")
    assert conn.is_closed()
    await pool.acquire(AB, "s", opener)
    assert len(opener.opened) == 4
    await pool.close()
