"""Bastions (ProxyJump): one shared SSH connection per jump destination.

A thousand hosts behind one bastion must not open a thousand connections to it:
sshd's ``MaxStartups`` (10 unauthenticated at once by default) would drop most of
them. Every host link that goes through the same jump chain (with the same SSH
settings) leases the one connection the pool keeps for it; the connection is opened
by the first lease, kept for ``linger`` seconds after the last lease is released (a
host that is down behind the bastion retries every couple of seconds, and each retry
must not cost the bastion a new handshake), then closed; it is opened again by the
next lease after it dropped or expired. Hosts open their own connections *through* it
(asyncssh ``tunnel=``), at most ``handshakes`` of them at once per bastion.

A chain ``a,b`` is a connection to ``b`` opened through the shared connection to
``a``; each hop is verified and authenticated by the caller's ``HopOpener``, so host
keys of bastions are checked exactly like those of GPU hosts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable

import asyncssh

from gputui.common.tasks import cancel_and_wait
from gputui.config.sshjump import Chain, Hop, parse_chain, parse_hop
from gputui.fleet.failures import Failure

__all__ = [
    "HANDSHAKES_PER_JUMP",
    "LINGER_S",
    "Chain",
    "Hop",
    "HopOpener",
    "JumpFailure",
    "JumpLease",
    "JumpPool",
    "parse_chain",
    "parse_hop",
]

HANDSHAKES_PER_JUMP = 8
LINGER_S = 30.0
"""Seconds an unused bastion connection is kept for the next lease."""


HopOpener = Callable[
    [Chain, asyncssh.SSHClientConnection | None], Awaitable[asyncssh.SSHClientConnection]
]
"""Opens a connection to ``chain[-1]``, through the given connection (or directly)."""


class JumpFailure(Exception):
    """A bastion could not be reached; ``failure`` says why (status and one line)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class _Jump:
    """The pool's entry for one chain: its connection (or the task opening it)."""

    def __init__(self, key: Hashable, chain: Chain, handshakes: int) -> None:
        self.key = key
        self.chain = chain
        self.refs = 0
        self.task: asyncio.Task[asyncssh.SSHClientConnection] | None = None
        self.conn: asyncssh.SSHClientConnection | None = None
        self.parent: JumpLease | None = None
        self.handshakes = asyncio.Semaphore(handshakes)
        self.dead = False
        self.expiry: asyncio.TimerHandle | None = None
        """While nobody holds a lease: when the idle connection is closed."""


class JumpLease:
    """A hold on a shared bastion connection; ``release`` exactly once."""

    def __init__(self, pool: JumpPool, entry: _Jump, conn: asyncssh.SSHClientConnection) -> None:
        self._pool = pool
        self._entry = entry
        self.conn = conn
        self._released = False

    @property
    def handshakes(self) -> asyncio.Semaphore:
        """Bounds the handshakes made through this bastion at once."""
        return self._entry.handshakes

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._pool._release(self._entry)


class JumpPool:
    """Shared, reference-counted connections to bastions, keyed by chain and settings."""

    def __init__(self, handshakes: int = HANDSHAKES_PER_JUMP, linger: float = LINGER_S) -> None:
        self._handshakes = handshakes
        self._linger = linger
        self._entries: dict[Hashable, _Jump] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self.opened = 0
        """Connections opened so far (all hops; for tests and diagnostics)."""

    def open_count(self) -> int:
        """Connections the pool holds open now."""
        return sum(1 for e in self._entries.values() if e.conn is not None and not e.dead)

    async def acquire(self, chain: Chain, settings: Hashable, opener: HopOpener) -> JumpLease:
        """A lease on the connection to ``chain[-1]`` (opened through ``chain[:-1]``)."""
        key = (chain, settings)
        while True:
            entry = self._entries.get(key)
            if entry is None or entry.dead:
                entry = _Jump(key, chain, self._handshakes)
                self._entries[key] = entry
                entry.task = asyncio.get_running_loop().create_task(
                    self._open(entry, settings, opener), name=f"gputui-jump-{chain[-1]}"
                )
                entry.task.add_done_callback(_retrieve)
            entry.refs += 1
            if entry.expiry is not None:  # an idle connection is wanted again
                entry.expiry.cancel()
                entry.expiry = None
            assert entry.task is not None
            try:
                conn = await asyncio.shield(entry.task)
            except BaseException:
                self._release(entry)
                raise
            if conn.is_closed():  # dropped just now: let the watcher retire it, retry
                entry.dead = True
                self._release(entry)
                continue
            return JumpLease(self, entry, conn)

    async def _open(
        self, entry: _Jump, settings: Hashable, opener: HopOpener
    ) -> asyncssh.SSHClientConnection:
        parent: JumpLease | None = None
        try:
            if len(entry.chain) > 1:
                parent = await self.acquire(entry.chain[:-1], settings, opener)
                async with parent.handshakes:
                    conn = await opener(entry.chain, parent.conn)
            else:
                conn = await opener(entry.chain, None)
        except BaseException:
            entry.dead = True
            self._forget(entry)
            if parent is not None:
                parent.release()
            raise
        self.opened += 1
        entry.conn, entry.parent = conn, parent
        watcher = asyncio.get_running_loop().create_task(self._watch(entry, conn))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return conn

    async def _watch(self, entry: _Jump, conn: asyncssh.SSHClientConnection) -> None:
        """Retire the entry when its connection drops; the next lease opens a new one."""
        with contextlib.suppress(Exception):
            await conn.wait_closed()
        self._retire(entry)

    def _release(self, entry: _Jump) -> None:
        entry.refs -= 1
        if entry.refs > 0:
            return
        task = entry.task
        if task is not None and not task.done():
            task.cancel()  # nobody waits for it any more
            return
        if self._linger > 0 and entry.conn is not None and not entry.dead:
            loop = asyncio.get_running_loop()
            entry.expiry = loop.call_later(self._linger, self._expire, entry)
            return
        self._retire(entry)

    def _expire(self, entry: _Jump) -> None:
        entry.expiry = None
        if entry.refs <= 0:
            self._retire(entry)

    def _retire(self, entry: _Jump) -> None:
        entry.dead = True
        if entry.expiry is not None:
            entry.expiry.cancel()
            entry.expiry = None
        self._forget(entry)
        conn, entry.conn = entry.conn, None
        if conn is not None:
            conn.close()
        parent, entry.parent = entry.parent, None
        if parent is not None:
            parent.release()

    def _forget(self, entry: _Jump) -> None:
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]

    async def close(self) -> None:
        """Close every connection still open (their leases are void)."""
        entries = list(self._entries.values())
        for entry in entries:
            if entry.task is not None and not entry.task.done():
                entry.task.cancel()
            self._retire(entry)
        await cancel_and_wait(entry.task for entry in entries)
        await cancel_and_wait(list(self._watchers))


def _retrieve(task: asyncio.Task[asyncssh.SSHClientConnection]) -> None:
    """Mark a failed open as seen even when every waiter had gone."""
    if not task.cancelled():
        task.exception()
