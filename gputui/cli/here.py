"""This machine as the scheduler knows it: the name ``gputui env`` and ``gputui run``
ask for GPUs on when ``--host`` is not given."""

from __future__ import annotations

import socket

from gputui.common import thishost
from gputui.scheduler.client.backend import SyncBackend
from gputui.scheduler.client.errors import HeadError


def this_host(backend: SyncBackend) -> str:
    """The scheduler's name for this machine (``gputui.common.thishost``: a ``local: true``
    host when the head runs here, else by hostname, FQDN and addresses); a
    ``HeadError`` naming the choices when it is none or several of its hosts. A
    scheduler that cannot list its hosts (or a head from before the table): this
    machine's short hostname."""
    if not backend.supports("hosts"):
        return socket.gethostname().split(".")[0]
    try:
        table = backend.hosts().get("hosts")
    except HeadError as exc:
        if exc.code != "unknown-op":
            raise
        return socket.gethostname().split(".")[0]  # a head from before the table
    rows = [
        thishost.HeadHost(one_line(h["name"])[:64], one_line(h["address"])[:255], h["local"])
        for h in (table if isinstance(table, list) else [])
        if isinstance(h, dict)
        and isinstance(h.get("name"), str)
        and isinstance(h.get("address"), str)
        and isinstance(h.get("local"), bool)
    ]
    try:
        return thishost.pick(rows, thishost.here(on_head=backend.local))
    except thishost.NoHost as exc:
        raise HeadError("no-host", str(exc)) from None


def one_line(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())
