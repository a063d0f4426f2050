"""``Subscribers``: the cluster's state and each user's notices, pushed to the consoles
that subscribed, a part the head holds.

After a commit that changed what a console shows, the head calls ``changed``; the
pusher task (``run``) then reads one snapshot on the reader thread and sends every
subscriber behind the latest state its view of it (privacy applied per user) and its
new notices, at most once every ``state_push_min_s``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from gputui.scheduler.head import privacy, publish
from gputui.scheduler.head.batch import Item
from gputui.scheduler.head.liveness import Liveness
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.head.views import notice_view
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.api import Store, Tx

log = logging.getLogger(__name__)


class Subscribers:
    """The state pushes to subscribed connections (the head's ``pusher`` task)."""

    def __init__(
        self,
        *,
        store: Store,
        settings: HeadSettings,
        watch: HostWatch,
        flags: Callable[[], dict[str, Any]],
        connections: Callable[[], Iterable[Connection]],
        read: Callable[[Callable[[], Any]], Coroutine[Any, Any, Any]],
        post: Callable[[Item], None],
        spawn: Callable[[Coroutine[Any, Any, Any]], None],
        liveness: Liveness,
    ) -> None:
        self.store = store
        self.settings = settings
        self.watch = watch
        self._flags = flags
        """The ownership flags and the health board, as the state shows them."""
        self._connections = connections
        self._read = read
        self._post = post
        self._spawn = spawn
        self._liveness = liveness
        self.seq = 0
        """The state's number: one more for every commit that changed it."""
        self._event = asyncio.Event()

    def changed(self) -> None:
        """A commit changed the state: push it."""
        self.seq += 1
        self._event.set()

    def state(self, tx: Tx, caller: Caller) -> dict[str, Any]:
        """The state as ``caller`` sees it (the answer to a subscription)."""
        state = publish.cluster_state(tx, self.watch.present_gpus(), self.watch.live())
        private = self.settings.rules.sched.private_data
        owners = publish.note_owners(tx) if private else {}
        state = privacy.state_for(state, caller, owners, private)
        return {"me": publish.whoami(caller), **state, **self._flags()}

    async def run(self) -> None:
        """The pusher task: each change pushed, at most once every ``state_push_min_s``."""
        while True:
            await self._event.wait()
            self._event.clear()
            try:
                await self._push()
            except Exception:  # one failed push must not end every console's updates
                log.exception("head: pushing state failed; trying again on the next change")
            self._liveness.progress("pusher")
            await asyncio.sleep(self.settings.state_push_min_s)

    async def _push(self) -> None:
        """The state, and each subscriber's new notices, to every subscriber behind it.
        One that has not yet taken what it was sent before gets nothing now, and the
        latest state once it has (``_catch_up``): a slow or stopped client costs at
        most one state, never a backlog."""
        seq = self.seq
        subscribers = []
        for conn in list(self._connections()):
            if not conn.subscribed or conn.closed or conn.pushed_seq >= seq:
                continue
            if conn.unsent():
                if not conn.catching_up:
                    conn.catching_up = True
                    self._spawn(self._catch_up(conn))
                continue
            subscribers.append(conn)
        if not subscribers:
            return
        gpus, live = self.watch.present_gpus(), self.watch.live()  # the loop's own
        flags = self._flags()
        since = [conn.last_notice for conn in subscribers]  # read here, set here below
        private = self.settings.rules.sched.private_data

        def build() -> tuple[
            dict[str, Any], dict[int, int], list[list[tuple[int, dict[str, Any]]]]
        ]:
            with self.store.snapshot() as tx:  # views made here: no row leaves it
                common = publish.cluster_state(tx, gpus, live)  # once for all
                owners = publish.note_owners(tx) if private else {}
                news = [
                    [(n.id or 0, notice_view(n)) for n in tx.notices_after(after, conn.caller.uid)]
                    for conn, after in zip(subscribers, since, strict=True)
                ]
            return common, owners, news

        common, owners, news = await self._read(build)
        shown: dict[tuple[int, bool], dict[str, Any]] = {}  # one view per (uid, admin)
        for conn, notices in zip(subscribers, news, strict=True):
            fresh = [(i, view) for i, view in notices if i > conn.last_notice]
            for _, view in fresh:
                conn.send({"push": "notice", "notice": view})
            if fresh:
                conn.last_notice = fresh[-1][0] or conn.last_notice
                read = [i for i, _ in fresh if i]
                self._post(Item("notices-read", payload=(conn.caller.uid, read)))
            key = (conn.caller.uid, conn.caller.admin)
            if key not in shown:
                shown[key] = privacy.state_for(common, conn.caller, owners, private)
            state = {"me": publish.whoami(conn.caller), **shown[key], **flags}
            conn.send({"push": "state", "seq": seq, "state": state})
            conn.pushed_seq = seq

    async def _catch_up(self, conn: Connection) -> None:
        """Once ``conn`` has taken what it was sent, push it the latest state (a client
        that does not take it in ``send_stall_s`` is dropped)."""
        try:
            if await conn.flushed():
                self._event.set()
        finally:
            conn.catching_up = False
