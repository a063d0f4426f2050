"""``Outbox``: the stored notices, sent to the chat channels, never in the scheduler's way.

What is sent is what the head stored (the ``notice`` table), so a notice is never
lost because a channel was down: it stays in ``gputui notices`` and the console,
and its delivery to each channel is settled in the store (``notify_sent``: sent,
failed, dropped) once it is. A notice with no settled row for a channel is still
to be sent, after a restart too (if no older than ``resume_s``).

How it runs, on the head's event loop but never in its writer:

- ``changed()`` (after each commit that changed the state, and every tick) wakes
  the feeder, which reads the notices after the last it saw, from a snapshot on
  the head's reader thread, and queues one delivery per matching channel.
- The queue is bounded (``queue_max``): past it the oldest waiting delivery is
  dropped, counted (``dropped``) and audited.
- Each channel's deliveries go one at a time, in order (a job's end never shows
  before its start); ``senders`` workers send to that many channels at once, each
  on a thread of the outbox's own pool (apprise's send blocks), at most
  ``timeout_s``. One hung channel holds up only itself.
- A failed send is tried again after ``backoff_s``, doubled each time up to
  ``backoff_max_s``; after ``tries`` it is given up and audited.
- Settled deliveries (and audit rows) are written in one writer call for all that
  settled meanwhile: a small transaction, never a send, in the writer's batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import grp
import heapq
import logging
import pwd
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from gputui.common.tasks import cancel_and_wait, within
from gputui.common.text import clean
from gputui.config.notify import KIND_EVENTS, NotifyConfig, mask
from gputui.scheduler.head.chat.senders import Channel, SendFailed, guarded_send, send
from gputui.scheduler.server.peer import HEAD_ACTOR, user_name
from gputui.scheduler.store.api import Store, StoreFailure, Tx
from gputui.scheduler.store.tables import TEAM_UID, Audit, NotifyChannel, NotifySent

log = logging.getLogger(__name__)

FEED_MAX = 1000
"""Notices read at once by the feeder (it reads again while there are more)."""
FAILED_JOB = frozenset({"failed", "timeout"})
PRUNE_EVERY_S = 3600.0
"""How often the records of deliveries settled before the resume window are dropped
(a notice that old is never sent after a restart, so its record has no use)."""

Sender = Callable[[Channel, str, str, float], None]
ReadFn = Callable[[Callable[[], Any]], Awaitable[Any]]
CallTx = Callable[[Callable[[Tx, Any], Any]], Awaitable[Any]]


@dataclass(order=True, slots=True)
class Delivery:
    """One notice to one channel, until it is settled."""

    due: float
    notice_id: int
    uid: int = field(compare=False)
    channel: Channel = field(compare=False)
    title: str = field(compare=False)
    body: str = field(compare=False)
    tries: int = field(default=0, compare=False)

    @property
    def key(self) -> tuple[int, int]:
        return (self.notice_id, self.channel.id)


def channel_of(row: NotifyChannel) -> Channel:
    """A channel's row, copied out of its transaction."""
    assert row.id is not None
    return Channel(
        id=row.id,
        uid=row.uid,
        name=row.name,
        kind=cast("Any", row.kind),
        url=row.url,
        secret=row.secret,
        shown=row.shown,
        events=frozenset(e for e in row.events.split(",") if e),
        group=row.grp,
    )


def event_of(kind: str, job_state: str | None) -> str:
    """The event a notice is (``config.notify.EVENTS``); an ended job that failed is
    ``fail``."""
    if kind == "ended" and job_state in FAILED_JOB:
        return "fail"
    return KIND_EVENTS.get(kind, "admin")


def in_group(uid: int, group: str) -> bool:
    """Whether ``uid`` is a member of the Unix group ``group`` (primary or listed)."""
    try:
        entry = grp.getgrnam(group)
        user = pwd.getpwuid(uid)
    except KeyError:
        return False
    return user.pw_gid == entry.gr_gid or user.pw_name in entry.gr_mem


@dataclass(slots=True)
class _Fed:
    """What one read of the store gave the feeder."""

    channels: list[tuple[Channel, float]]
    notices: list[tuple[int, int, float, str, str, str | None]]
    """(id, uid, time, kind, text, job state)"""
    settled: set[tuple[int, int]]
    newest: int = 0
    """With no channel: the newest notice's id (none before it is ever sent)."""
    members: frozenset[tuple[int, str]] = frozenset()
    """(uid, group) of the notices' users in the groups of the team's channels."""
    names: dict[int, str] = field(default_factory=dict)
    """The notices' users' names."""


class Outbox:
    """The head's sender of notices to chat channels (see the module's doc)."""

    def __init__(
        self,
        config: NotifyConfig,
        store: Store,
        read: ReadFn,
        call_tx: CallTx,
        clock: Callable[[], float] = time.time,
        *,
        sender: Sender = send,
        members: Callable[[int, str], bool] = in_group,
    ) -> None:
        self.config = config
        self.store = store
        self._read = read
        self._call_tx = call_tx
        self.clock = clock
        self._send = sender
        self._members = members
        self._pool = ThreadPoolExecutor(config.senders * 2, thread_name_prefix="gputui-chat")
        """Its own threads: a send that hangs past its timeout holds one of these, never
        the loop's default pool nor the head's reader."""
        self._lookups = ThreadPoolExecutor(1, thread_name_prefix="gputui-chat-who")
        """The account lookups' thread (NSS may be LDAP, and hang): neither the loop
        nor the store's reader waits on one."""
        self._wake = asyncio.Event()
        self._due = asyncio.Event()
        self._flush = asyncio.Event()
        self._queues: dict[int, deque[Delivery]] = {}
        """Each channel's deliveries, oldest first: one at a time, in order (a chat
        shows a job's end after its start); the head of the queue is in flight or
        next."""
        self._turns: deque[int] = deque()
        """Channels whose next delivery is due now (none in flight)."""
        self._later: list[tuple[float, int]] = []
        """(when, channel) of the channels waiting to try their next delivery again."""
        self._flying: set[int] = set()
        self._busy: dict[int, Future[None]] = {}
        """Each channel's last send, on a thread until it ends, whatever its timeout:
        one thread at most for a channel, so no channel can take the pool's all."""
        self._stuck: dict[int, Future[None]] = {}
        """A user's send that outlived its wait, by uid: while it runs, none of the
        user's channels gets a thread (the pool stays the team's and the others')."""
        self._count = 0
        """Deliveries in the queues (those in flight too)."""
        self._known: set[tuple[int, int]] = set()
        """Queued, in flight or settling: never queued twice."""
        self._settling: list[NotifySent] = []
        self._audits: list[Audit] = []
        self._last_id = 0
        self._since: float | None = None
        self._pruned_at = 0.0
        self._none = False
        """No channel at all when last read: nothing is read until one is set."""
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        """Deliveries dropped from a full queue (each audited)."""
        self.tried = 0
        """Sends tried (the first and every retry)."""

    # -- the head's side -------------------------------------------------------------

    def changed(self) -> None:
        """New notices may be stored: the feeder reads them (unless there is no
        channel to send them to: then a commit costs the outbox nothing)."""
        if not self._none:
            self._wake.set()

    def channels_changed(self) -> None:
        """A channel was set or cleared: read again."""
        self._none = False
        self._wake.set()

    def waiting(self) -> int:
        """Deliveries queued and not in flight."""
        return self._count - len(self._flying)

    def forget(self, channel_ids: set[int]) -> None:
        """Channels cleared: their waiting deliveries go (one in flight ends)."""
        for cid in channel_ids:
            running = self._busy.get(cid)
            if running is not None and running.done():
                del self._busy[cid]
            queue = self._queues.get(cid)
            if queue is None:
                continue
            keep = 1 if cid in self._flying else 0
            while len(queue) > keep:
                gone = queue.pop()
                self._known.discard(gone.key)
                self._count -= 1
            if not queue:
                self._unschedule(cid)

    async def run(self) -> None:
        """Feed, send and settle until cancelled."""
        self._since = self.clock() - self.config.resume_s
        tasks = [
            asyncio.ensure_future(self._feeder()),
            asyncio.ensure_future(self._settler()),
            *(asyncio.ensure_future(self._worker()) for _ in range(self.config.senders)),
        ]
        self._wake.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._lookups.shutdown(wait=False, cancel_futures=True)

    async def send_now(self, channel: Channel, title: str, body: str) -> str | None:
        """One send, now, without retries (``gputui notify test``): None when it went,
        else why not (one line)."""
        try:
            await self._run_send(channel, title, body)
        except SendFailed as exc:
            return str(exc)
        return None

    # -- feeding --------------------------------------------------------------------

    async def _feeder(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                while await self._feed_once():
                    pass
            except (StoreFailure, OSError) as exc:
                log.warning("chat: could not read notices: %s", exc)

    async def _feed_once(self) -> bool:
        """Queue the deliveries of the notices after the last seen; whether there may
        be more to read."""
        since = self._since if self._since is not None else 0.0
        fed: _Fed = await self._read(lambda: self._load(since, self._last_id))
        self._since = None  # the resume window bounds the first read only
        self._none = not fed.channels
        self._last_id = max(self._last_id, fed.newest, *(n[0] for n in fed.notices[-1:]))
        if not fed.notices:
            return False
        channels = [c for c in fed.channels if c[0].events]
        fed.members, fed.names = await asyncio.get_running_loop().run_in_executor(
            self._lookups, self._who, channels, {n[1] for n in fed.notices}
        )
        for notice_id, uid, at, kind, text, job_state in fed.notices:
            event = event_of(kind, job_state)
            for channel, since_at in channels:
                key = (notice_id, channel.id)
                if (
                    at < since_at
                    or event not in channel.events
                    or key in fed.settled
                    or key in self._known
                    or not self._reaches(channel, uid, fed.members)
                ):
                    continue
                self._queue(
                    Delivery(
                        due=0.0,
                        notice_id=notice_id,
                        uid=uid,
                        channel=channel,
                        title=f"gputui: {event}",
                        body=f"{fed.names.get(uid) or user_name(uid)}: {text}",
                    )
                )
        return len(fed.notices) >= FEED_MAX

    @staticmethod
    def _reaches(channel: Channel, uid: int, members: frozenset[tuple[int, str]]) -> bool:
        if channel.uid != TEAM_UID:
            return channel.uid == uid
        return channel.group is None or (uid, channel.group) in members

    def _who(
        self, channels: list[tuple[Channel, float]], uids: set[int]
    ) -> tuple[frozenset[tuple[int, str]], dict[int, str]]:
        """Who is in which team channel's group, and the users' names: the account
        lookups, once a read for each user and group, on the lookups' thread (never on
        the loop for each notice and channel)."""
        groups = {c.group for c, _ in channels if c.uid == TEAM_UID and c.group is not None}
        members = frozenset(
            (uid, group) for uid in uids for group in groups if self._members(uid, group)
        )
        return members, {uid: user_name(uid) for uid in uids}

    def _load(self, since: float, after: int) -> _Fed:
        with self.store.snapshot() as tx:
            channels = [(channel_of(c), c.created_at) for c in tx.notify.channels()]
            if not channels:
                return _Fed([], [], set(), tx.last_notice_id())
            rows = tx.notify.notices_since(since, after, FEED_MAX)
            ended = [n.job_id for n in rows if n.kind == "ended" and n.job_id is not None]
            states = tx.job_states(ended) if ended else {}
            notices = [
                (n.id or 0, n.uid, n.time, n.kind, n.text, states.get(n.job_id or -1)) for n in rows
            ]
            settled = tx.notify.settled([n[0] for n in notices])
        return _Fed(channels, notices, settled)

    def _queue(self, delivery: Delivery) -> None:
        while self.waiting() >= self.config.queue_max and self._drop_oldest():
            pass
        cid = delivery.channel.id
        queue = self._queues.setdefault(cid, deque())
        queue.append(delivery)
        self._count += 1
        self._known.add(delivery.key)
        if len(queue) == 1:  # (else the channel is in flight, or has its turn coming)
            self._turns.append(cid)
            self._due.set()

    def _drop_oldest(self) -> bool:
        """Drop the oldest delivery not in flight (counted, audited); whether one was."""
        oldest: tuple[int, int, int] | None = None  # (notice id, channel, index)
        for cid, queue in self._queues.items():
            index = 1 if cid in self._flying else 0
            if len(queue) > index and (oldest is None or queue[index].notice_id < oldest[0]):
                oldest = (queue[index].notice_id, cid, index)
        if oldest is None:
            return False
        _, cid, index = oldest
        queue = self._queues[cid]
        gone = queue[index]
        del queue[index]
        self._count -= 1
        if not queue:
            self._unschedule(cid)
        self.dropped += 1
        self._settle(gone, "dropped", "the send queue was full")
        return True

    def _unschedule(self, cid: int) -> None:
        """A channel with nothing left to send."""
        del self._queues[cid]
        if cid in self._turns:
            self._turns.remove(cid)
        if any(c == cid for _, c in self._later):
            self._later = [(at, c) for at, c in self._later if c != cid]
            heapq.heapify(self._later)

    # -- sending --------------------------------------------------------------------

    def _next(self) -> Delivery | float | None:
        """The next delivery due (its channel now in flight), else how long until a
        retry is due (None: nothing to send)."""
        now = self.clock()
        while self._later and self._later[0][0] <= now:
            self._turns.append(heapq.heappop(self._later)[1])
        if self._turns:
            cid = self._turns.popleft()
            self._flying.add(cid)
            return self._queues[cid][0]
        return self._later[0][0] - now if self._later else None

    async def _worker(self) -> None:
        while True:
            picked = self._next()
            if not isinstance(picked, Delivery):
                self._due.clear()
                with contextlib.suppress(TimeoutError):
                    await within(self._due.wait(), picked)
                continue
            await self._deliver(picked)

    async def _deliver(self, delivery: Delivery) -> None:
        cid = delivery.channel.id
        delivery.tries += 1
        self.tried += 1
        try:
            await self._run_send(delivery.channel, delivery.title, delivery.body)
        except SendFailed as exc:
            if delivery.tries >= self.config.tries:
                self.failed += 1
                self._next_of(cid)
                self._settle(delivery, "failed", str(exc))
                return
            wait = self.config.backoff_s * 2 ** (delivery.tries - 1)
            delivery.due = self.clock() + min(wait, self.config.backoff_max_s)
            self._flying.discard(cid)
            heapq.heappush(self._later, (delivery.due, cid))
            self._due.set()  # a worker waiting on a later retry looks again
            return
        self.sent += 1
        self._next_of(cid)
        self._settle(delivery, "sent", "")

    def _next_of(self, cid: int) -> None:
        """The channel's delivery in flight is settled: its next one takes its turn."""
        self._flying.discard(cid)
        queue = self._queues.get(cid)
        if queue is None:
            return
        queue.popleft()
        self._count -= 1
        if queue:
            self._turns.append(cid)
            self._due.set()
        else:
            self._unschedule(cid)

    def _users_stuck(self) -> int:
        """Users' sends that outlived their wait and still hold a thread."""
        for uid in [u for u, f in self._stuck.items() if f.done()]:
            del self._stuck[uid]
        return len(self._stuck)

    async def _run_send(self, channel: Channel, title: str, body: str) -> None:
        timeout = self.config.timeout_s
        before = self._busy.get(channel.id)
        if before is not None and not before.done():
            # Its last send is still on a thread (a server that answers a byte at a
            # time is never timed out by a socket): not one more thread for it.
            raise SendFailed(f"its last send has not ended (no answer within {timeout:g} s)")
        stuck = self._stuck.get(channel.uid) if channel.uid != TEAM_UID else None
        if stuck is not None and not stuck.done():
            # Nor one more for each of a user's channels on one slow server.
            raise SendFailed("a send to another of the user's channels has not ended")
        if channel.uid != TEAM_UID and self._users_stuck() >= self.config.senders:
            # Nor, all users together, more than ``senders``: the rest stays the team's.
            raise SendFailed("the sends of too many users' channels have not ended")
        private_ok = None if channel.uid == TEAM_UID else self.config.user_private
        running = self._pool.submit(
            guarded_send, private_ok, self._send, channel, title, body, timeout
        )
        self._busy[channel.id] = running
        work = asyncio.wrap_future(running)
        work.add_done_callback(_retrieved)
        try:
            await within(asyncio.shield(work), timeout + 1.0)
        except TimeoutError:
            if channel.uid != TEAM_UID:
                self._stuck[channel.uid] = running
            raise SendFailed(f"no answer within {timeout:g} s") from None
        except SendFailed:
            raise
        except Exception as exc:  # a sender's bug (apprise's) fails this send, no more
            # One line, masked: a traceback's frames and an exception's text can hold
            # the channel's URL, token and all.
            log.warning(
                "chat: send to %s failed: %s: %s",
                channel.shown,
                type(exc).__name__,
                masked_error(str(exc), channel),
            )
            raise SendFailed(f"{type(exc).__name__} while sending") from None

    # -- settling -------------------------------------------------------------------

    def _settle(self, delivery: Delivery, state: str, error: str) -> None:
        now = self.clock()
        self._settling.append(
            NotifySent(
                notice_id=delivery.notice_id,
                channel_id=delivery.channel.id,
                state=state,
                tries=delivery.tries,
                at=now,
                error=error[:256],
            )
        )
        if state != "sent":
            channel = delivery.channel
            what = "given up after" if state == "failed" else "dropped after"
            self._audits.append(
                Audit(
                    time=now,
                    uid=0,
                    user=HEAD_ACTOR,
                    action="notify",
                    target=f"notice {delivery.notice_id} to {channel.name}: {channel.shown}"[:128],
                    owner=user_name(delivery.uid),
                    reason=error[:512],
                    outcome=f"{state}: {what} {delivery.tries} tries",
                )
            )
            log.warning(
                "chat: notice %d to %s %s: %s", delivery.notice_id, channel.shown, state, error
            )
        self._flush.set()

    async def _settler(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            rows, audits = self._settling, self._audits
            if not rows and not audits:
                continue
            self._settling, self._audits = [], []

            now = self.clock()
            cutoff = None  # past the resume window a record is never needed again
            if now - self._pruned_at >= PRUNE_EVERY_S:
                self._pruned_at = now
                cutoff = now - self.config.resume_s - PRUNE_EVERY_S
            write = functools.partial(_record, rows=rows, audits=audits, cutoff=cutoff)
            try:
                await self._call_tx(write)
            except Exception as exc:  # the store failed: they are sent again after a restart
                log.warning("chat: could not record %d deliveries: %s", len(rows), exc)
            self._known.difference_update((r.notice_id, r.channel_id) for r in rows)

    def close(self) -> None:
        """At shutdown, with the writer stopped: record what settled since the last
        write (what is still queued is sent after the restart)."""
        rows, audits = self._settling, self._audits
        self._settling, self._audits = [], []
        if not rows and not audits:
            return
        try:
            with self.store.transaction() as tx:
                _record(tx, None, rows=rows, audits=audits, cutoff=None)
        except (StoreFailure, OSError) as exc:
            log.error("chat: could not record %d deliveries: %s", len(rows), exc)


_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31})://\S*")
_TOKENISH = re.compile(r"[A-Za-z0-9_~+/=.%-]{12,}")


def masked_error(text: str, channel: Channel) -> str:
    """An exception's text fit for the head's log: one line of at most 200 characters,
    the channel's URL and secret (wherever they show) and any URL given as its scheme
    only, and any long token-like word cut to its first 4 characters."""
    text = text[:4000]
    for secret in (channel.url, channel.secret):
        if secret:
            text = text.replace(secret, "…")
    text = _URL.sub(lambda m: f"{m.group(1)}://…", text)
    text = _TOKENISH.sub(lambda m: mask(m.group()), text)
    return clean(text, 200)


def _retrieved(work: asyncio.Future[None]) -> None:
    """A send's outcome, taken when it ends (after its wait gave up too)."""
    if not work.cancelled():
        work.exception()


def _record(
    tx: Tx, _ctx: Any, *, rows: list[NotifySent], audits: list[Audit], cutoff: float | None
) -> None:
    """Settled deliveries and their audit rows (and, with ``cutoff``, the records of
    deliveries settled before it dropped), in the writer's transaction."""
    tx.notify.settle(rows)
    for row in audits:
        tx.audit(row)
    if cutoff is not None:
        tx.notify.forget_settled(cutoff)
