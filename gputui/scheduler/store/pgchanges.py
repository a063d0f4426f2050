"""``PgChangeFeed``: the change stream on PostgreSQL (``changes``), by LISTEN/NOTIFY.

One psycopg ``AsyncConnection`` of its own, in autocommit, outside the engine's
pool (a pooled connection is handed to others, and a pooler would drop its LISTEN),
named ``gputui-changes`` in ``pg_stat_activity``: ``LISTEN gputui_changes``, then
each notification as it arrives (``notifies``), on the event loop, never blocking
it. A notification one of the head's own pooled connections sent is skipped
(``OwnBackends``): the head signalled that commit in-process already.

Each time it starts listening, the first time too, the feed says ``EVERYTHING``
once the ``LISTEN`` is in force: a commit made before that (after the head read
the store, before the feed listened; or while the connection was away) was not
heard, so the head reads and pushes the state once more, and nothing is lost.
When the server drops the connection (a restart, ``pg_terminate_backend``, a broken
network: an idle link is probed every ``probe_s``), the feed logs one line and
reconnects with a growing, jittered backoff (``retry_s`` … ``retry_max_s``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import psycopg
from sqlalchemy import Engine

from gputui.common.tasks import within
from gputui.common.text import error_line
from gputui.scheduler.store.changes import (
    CHANNEL,
    EVERYTHING,
    OnChange,
    OwnBackends,
    decode,
)

log = logging.getLogger(__name__)

APPLICATION_NAME = "gputui-changes"
CONNECT_TIMEOUT_S = 10
PROBE_S = 30.0
"""An idle connection is probed (``SELECT 1``) this often: a link that died without
a word is found within about this long, plus the probe's own ``PROBE_TIMEOUT_S``."""
PROBE_TIMEOUT_S = 10.0
RETRY_S = 0.5
RETRY_MAX_S = 30.0


class PgChangeFeed:
    """Changes other processes commit to a PostgreSQL database (``ChangeFeed``)."""

    shared = True

    def __init__(
        self,
        engine: Engine,
        own: OwnBackends,
        *,
        probe_s: float = PROBE_S,
        retry_s: float = RETRY_S,
        retry_max_s: float = RETRY_MAX_S,
        connect_timeout_s: int = CONNECT_TIMEOUT_S,
    ) -> None:
        args, params = engine.dialect.create_connect_args(engine.url)
        params.pop("context", None)  # the engine's adapters: nothing here reads rows
        self._args: list[Any] = list(args)
        self._params: dict[str, Any] = {
            **params,
            "autocommit": True,
            "application_name": APPLICATION_NAME,
            "connect_timeout": max(2, int(connect_timeout_s)),  # libpq's least is 2
        }
        self._where = engine.url.render_as_string(hide_password=True)
        self._own = own
        self._probe_s = probe_s
        self._retry_s = retry_s
        self._retry_max_s = retry_max_s
        self.attempts = 0
        """Connections tried (for tests)."""
        self.listening = asyncio.Event()
        """Set while a connection is listening (for tests)."""
        self.backend_pid: int | None = None
        """The server process of the listening connection (None: none listens)."""
        self.ignored = 0
        """Notifications on the channel that no trigger of ours sends (dropped)."""

    async def run(self, on_change: OnChange) -> None:
        lost = False  # one line per outage, not one per try
        delay = self._retry_s
        while True:
            try:
                self.attempts += 1
                conn = await psycopg.AsyncConnection.connect(*self._args, **self._params)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.backend_pid = conn.info.backend_pid
                    self.listening.set()
                    delay = self._retry_s
                    if lost:
                        lost = False
                        log.info("head: change stream from %s resumed", self._where)
                    # Listening now, and not before: what was committed until now (since
                    # the head read the store, or while the connection was away) was not
                    # heard, so the head reads it all once more.
                    on_change(EVERYTHING)
                    await self._relay(conn, on_change)
            except (psycopg.Error, OSError, TimeoutError) as exc:
                self.listening.clear()
                self.backend_pid = None
                if not lost:
                    lost = True
                    log.warning(
                        "head: change stream from %s not listening (%s); retrying with backoff",
                        self._where,
                        error_line(exc),
                    )
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))  # jittered
            delay = min(delay * 2, self._retry_max_s)

    async def _relay(self, conn: psycopg.AsyncConnection[Any], on_change: OnChange) -> None:
        """Each notification to ``on_change`` until the connection fails; an idle one
        is probed every ``probe_s``."""
        while True:
            async for note in conn.notifies(timeout=self._probe_s):
                if note.channel != CHANNEL or note.pid in self._own:
                    continue
                change = decode(note.payload)
                if change is None:
                    self.ignored += 1
                    continue
                on_change(change)
            await within(conn.execute("SELECT 1"), PROBE_TIMEOUT_S)
