"""``Leadership``: a head on a PostgreSQL database another head may share waits as
standby until it holds the lease (``store.lease``), then keeps it.

Standby: every tick (a third of the lease) it tries to take the lease, and says
once, each time the holder changes, whom it waits for. Leading: it renews the
lease every tick. A renewal that finds another epoch, or none that got through
for a whole lease (the database out of reach: a standby may have taken over),
means the lease is lost: the fence stops every write at once, ``lost`` says why
and the head is told to stop (``gputui head`` then exits 1; systemd starts it
again, as a standby). A takeover is the head's ordinary start: it loads the
store and re-attaches every running job from the hosts' supervisor state, as
after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
import uuid
from collections.abc import Callable

from gputui.common.tasks import within
from gputui.common.text import clean
from gputui.scheduler.store.api import StoreFailure
from gputui.scheduler.store.lease import Fence, HeadLease, LeaseState


def pid_namespace() -> str:
    """This process's PID namespace (the inode of ``/proc/self/ns/pid``), or ``?``
    where it cannot be read: two containers may both run a head as pid 1."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "?"


def holder_name() -> str:
    """How the lease names this head: ``host:pid:pidns:token``, the token a new random
    uuid each call (a head calls it once): ``host:pid`` alone is the same for two heads
    in two containers (each pid 1, the hostname shared), and a head that took the
    other's name would take its lease as its own (``take``: a holder may retake)."""
    return f"{socket.gethostname()}:{os.getpid()}:{pid_namespace()}:{uuid.uuid4().hex}"


def gone(holder: str) -> bool:
    """Whether ``holder`` (``holder_name``) is a process of this machine, and of this
    PID namespace, that has ended (a pid of another namespace says nothing here)."""
    parts = holder.rsplit(":", 3)
    if len(parts) != 4:
        return False  # not a name this gputui gives
    host, pid, namespace, _token = parts
    if host != socket.gethostname() or namespace in ("?", "") or namespace != pid_namespace():
        return False
    if not pid.isdigit() or not 0 < int(pid) < 1 << 22:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # there, another user's
    return False


BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def lease_clock() -> float:
    """The clock a head judges its own lease by: the time since boot, counting a
    suspended machine's sleep where the system keeps one (``CLOCK_BOOTTIME``), else
    the monotonic clock. Both go on while the process is stopped (SIGSTOP)."""
    return time.clock_gettime(BOOTTIME) if BOOTTIME is not None else time.monotonic()


class Leadership:
    """The lease of one head: ``wait`` (standby), then ``keep`` while it leads.

    As judged here, the lease is good until the start of the last renewal that
    went through (or of the taking) plus the lease: the server set its expiry later
    than that start, so a head never believes in a lease the server has let go
    (``may_act``, asked before each action on a host)."""

    def __init__(
        self,
        lease: HeadLease,
        guard: Fence,
        say: Callable[[str], None],
        *,
        clock: Callable[[], float] = lease_clock,
    ) -> None:
        self.lease = lease
        self.guard = guard
        self.say = say
        self.clock = clock
        self.tick_s = lease.lease_s / 3
        self.epoch: int | None = None
        self.lost: str | None = None
        """Why the lease was lost (None while it is held, or never was)."""
        self.good_until = -math.inf
        """When the lease runs out by this head's ``clock`` (see the class)."""
        self._seen: LeaseState | None = None

    async def wait(self, stop: asyncio.Event) -> bool:
        """Standby until this head holds the lease (True), or until ``stop`` (False)."""
        waiting_for: tuple[int, str] | None = None
        problem = ""
        while not stop.is_set():
            started = self.clock()
            try:
                epoch = await asyncio.to_thread(self._take)
            except StoreFailure as exc:
                if str(exc) != problem:
                    problem = str(exc)
                    self.say(f"standby: {clean(problem, 300)}; trying again")
                await _pause(stop, self.tick_s)
                continue
            problem = ""
            if epoch is not None:
                self.good_until = started + self.lease.lease_s
                self.epoch = self.guard.epoch = epoch
                self.say(f"leading: took the lease (epoch {epoch})")
                return True
            state = self._seen
            if state is not None and (state.epoch, state.holder) != waiting_for:
                waiting_for = (state.epoch, state.holder)
                self.say(
                    f"standby: waiting for the lease held by {clean(state.holder, 200)}"
                    f" (epoch {state.epoch})"
                )
            await _pause(stop, self.tick_s)
        return False

    def _take(self) -> int | None:
        """Take the lease if it has expired, or at once from a head of this machine
        whose process is gone (a head restarted after a crash need not wait out its
        own lease; a wrong guess, a pid reused, only means waiting)."""
        self._seen = None
        epoch = self.lease.take()
        if epoch is not None:
            return epoch
        state = self._seen = self.lease.state()
        if state is not None and gone(state.holder):
            return self.lease.take_from(state.epoch, state.holder)
        return None

    async def renew(self) -> bool:
        """Renew the lease once: True when it went through (good until the start of
        this call plus the lease), False when another head has taken it
        (``StoreFailure`` when the database could not be asked)."""
        epoch = self.epoch
        assert epoch is not None
        started = self.clock()  # before the statement: the server's expiry is later
        held = await asyncio.to_thread(self.lease.renew, epoch)
        if held:
            self.good_until = max(self.good_until, started + self.lease.lease_s)
        return held

    async def keep(self, stop: asyncio.Event) -> None:
        """While leading: renew every tick; on a loss, fence and set ``stop``."""
        while not stop.is_set():
            await _pause(stop, self.tick_s)
            if stop.is_set():
                return
            try:
                held = await self.renew()
            except StoreFailure as exc:
                if self.clock() >= self.good_until:
                    self._lose(f"could not renew the lease for {self.lease.lease_s:g} s ({exc})")
                    stop.set()
                continue
            if held:
                continue
            self._lose(await asyncio.to_thread(self._taken_by))
            stop.set()

    def may_act(self) -> str | None:
        """None while this head may act on its hosts (it holds the lease: its epoch is
        the fence's, and the lease has not run out by its own clock); else why not."""
        if self.lost is not None:
            return self.lost
        if self.epoch is None or self.guard.epoch != self.epoch:
            return "this head does not hold the lease"
        left = self.good_until - self.clock()
        if left <= 0:
            return f"this head's lease ran out {-left:.1f} s ago by its own clock (not renewed)"
        return None

    def _lose(self, why: str) -> None:
        self.guard.epoch = None  # every write from here on is refused
        self.lost = clean(why, 400)

    def _taken_by(self) -> str:
        try:
            state = self.lease.state()
        except StoreFailure:
            state = None
        if state is None:
            return "lost the lease"
        return f"lost the lease to {state.holder} (epoch {state.epoch})"

    async def release(self) -> None:
        """A clean stop: let the lease expire now, so a standby need not wait it out."""
        if self.epoch is None or self.lost is not None:
            return
        with contextlib.suppress(StoreFailure):
            await asyncio.to_thread(self.lease.release, self.epoch)

    def close(self) -> None:
        self.lease.close()


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await within(stop.wait(), seconds)
