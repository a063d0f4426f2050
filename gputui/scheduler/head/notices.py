"""Delivering notices: what the head wrote for a user (``lifecycle``, ``actions``,
``holder_notices``: one ``notice`` table) reaches them on their next connection.

A notice is unread until shown: ``gputui notices`` lists the unread ones and marks
them read (``--all``: the newest, read or not, marking the unread among them); a
console gets the unread ones when it subscribes, and those pushed to it while it
is open are marked read once sent. Only the caller's own notices are ever read
or marked (the uid comes from the connection, never from the request).
"""

from __future__ import annotations

from typing import Any

from gputui.scheduler.head.views import notice_view
from gputui.scheduler.server.op_args import NoticesArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.api import Tx

ON_CONNECT_MAX = 200
"""At most this many unread notices are handed to a console when it subscribes."""


def deliver(tx: Tx, caller: Caller, args: NoticesArgs, now: float) -> dict[str, Any]:
    """The caller's notices (unread, or with ``all`` the newest), the unread among
    them marked read."""
    rows = (
        tx.recent_notices(caller.uid, args.limit)
        if args.all
        else tx.unread_notices(caller.uid, args.limit)
    )
    views = [{**notice_view(n), "unread": n.read_at is None} for n in rows]
    tx.mark_read(caller.uid, [n.id for n in rows if n.id is not None and n.read_at is None], now)
    return {"notices": views}


def on_connect(tx: Tx, caller: Caller, now: float) -> list[dict[str, Any]]:
    """A subscribing console's unread notices (marked read)."""
    return list(deliver(tx, caller, NoticesArgs(limit=ON_CONNECT_MAX), now)["notices"])
