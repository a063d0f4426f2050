"""The head's change stream on a real PostgreSQL server (``pgchanges.PgChangeFeed``):
what another store or process commits reaches the feed, and through the head a
subscribed console; the head's own commits are not heard twice; the listener
outlives ``pg_terminate_backend`` of its connection, and a server that never answers
holds neither the event loop nor the log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from headkit import ScriptedHosts
from pgserver import connect

from gputui.common.tasks import cancel_and_wait
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.head_backend import console_backend
from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.store.changes import EVERYTHING, Change, OwnBackends
from gputui.scheduler.store.engine import make_engine
from gputui.scheduler.store.pgchanges import APPLICATION_NAME, PgChangeFeed
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Host

FEED_LOG = "gputui.scheduler.store.pgchanges"


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    url: str = pg_server.database()
    return url


async def until(predicate: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)
    return value


@contextlib.asynccontextmanager
async def running(feed: PgChangeFeed, heard: list[Change]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.get_running_loop().create_task(feed.run(heard.append))
    try:
        yield task
    finally:
        await cancel_and_wait([task])


def put_host(store: SqlStore, name: str) -> None:
    with store.transaction() as tx:
        tx.put_host(Host(name=name, pool="p"))


async def test_the_feed_hears_another_stores_commits_and_not_its_own(pg_url: str) -> None:
    ours, theirs = SqlStore.open(pg_url), SqlStore.open(pg_url)
    heard: list[Change] = []
    try:
        feed = ours.changes()
        assert isinstance(feed, PgChangeFeed)
        async with running(feed, heard):
            await asyncio.wait_for(feed.listening.wait(), 20)
            put_host(ours, "ours")  # the head tells its subscribers of these itself
            put_host(theirs, "theirs")  # committed after: heard after, were "ours" heard
            await until(lambda: len(heard) > 1, "a change")
            assert heard == [EVERYTHING, Change("host", None)]
    finally:
        ours.close()
        theirs.close()


async def test_a_commit_made_before_the_feed_listens_is_not_lost(pg_url: str) -> None:
    """Committed after the head read the store but before its feed listened: no
    notification of it will ever come, so the feed says ``EVERYTHING`` (read it all
    again) once it listens, and only then."""
    ours, theirs = SqlStore.open(pg_url), SqlStore.open(pg_url)
    heard: list[tuple[Change, bool]] = []
    try:
        feed = ours.changes()
        assert isinstance(feed, PgChangeFeed)
        put_host(theirs, "before")  # the feed does not listen yet

        def on_change(change: Change) -> None:
            heard.append((change, feed.listening.is_set()))

        task = asyncio.get_running_loop().create_task(feed.run(on_change))
        try:
            await until(lambda: heard, "the feed to speak")
            put_host(theirs, "after")
            await until(lambda: len(heard) > 1, "a change after it listened")
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert heard == [(EVERYTHING, True), (Change("host", None), True)]
    finally:
        ours.close()
        theirs.close()


async def test_an_idle_listener_is_probed_and_goes_on_listening(pg_url: str) -> None:
    theirs = SqlStore.open(pg_url)
    engine = make_engine(pg_url)
    feed = PgChangeFeed(engine, OwnBackends(engine), probe_s=0.05)
    heard: list[Change] = []
    try:
        async with running(feed, heard):
            await asyncio.wait_for(feed.listening.wait(), 20)

            def probed() -> bool:
                with connect(pg_url) as admin:
                    row = admin.execute(
                        "SELECT query FROM pg_stat_activity WHERE pid = %s", (feed.backend_pid,)
                    ).fetchone()
                return row is not None and row[0] == "SELECT 1"

            await until(probed, "a probe")
            put_host(theirs, "after-probes")
            await until(lambda: len(heard) > 1, "a change")
        assert heard == [EVERYTHING, Change("host", None)] and feed.attempts == 1
    finally:
        theirs.close()
        engine.dispose()


async def test_the_listener_comes_back_after_its_backend_is_terminated(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ours, theirs = SqlStore.open(pg_url), SqlStore.open(pg_url)
    heard: list[Change] = []
    try:
        feed = ours.changes()
        assert isinstance(feed, PgChangeFeed)
        async with running(feed, heard):
            await asyncio.wait_for(feed.listening.wait(), 20)
            first = feed.backend_pid
            with connect(pg_url) as admin:
                row = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                    (APPLICATION_NAME,),
                ).fetchall()
                assert [r[0] for r in row] == [first], "one connection, outside the pool"
                admin.execute("SELECT pg_terminate_backend(%s)", (first,))
            await until(lambda: heard.count(EVERYTHING) == 2, "the feed to listen again")
            assert feed.listening.is_set() and feed.backend_pid not in (None, first)
            put_host(theirs, "after")
            await until(lambda: Change("host", None) in heard, "a change after the gap")
        assert heard == [EVERYTHING, EVERYTHING, Change("host", None)]
        lines = [r for r in caplog.records if r.name == FEED_LOG and r.levelno >= logging.WARNING]
        assert len(lines) == 1, [r.getMessage() for r in lines]
        assert lines[0].getMessage().startswith("head: change stream from postgresql")
    finally:
        ours.close()
        theirs.close()


async def test_a_server_that_never_answers_holds_neither_the_loop_nor_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 'server' that takes the connection and says nothing: each try times out, the
    loop runs on meanwhile, and the outage is one line however many tries it takes."""
    held: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_unix_server(silent, path=str(tmp_path / ".s.PGSQL.5432"))
    engine = make_engine(f"postgresql+psycopg://nobody@/nothing?host={tmp_path}")
    feed = PgChangeFeed(engine, OwnBackends(engine), connect_timeout_s=2, retry_s=0.05)
    gaps: list[float] = []
    try:
        async with running(feed, []):
            last = time.monotonic()
            while feed.attempts < 3:  # the third try begun: two timed out
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now
                assert sum(gaps) < 60, "the tries did not time out"
        assert len(held) >= 2
        assert max(gaps) < 1.0, f"the loop stalled {max(gaps):.2f} s"
        lines = [r for r in caplog.records if r.name == FEED_LOG and r.levelno >= logging.WARNING]
        assert len(lines) == 1, [r.getMessage() for r in lines]
        assert "nothing" in lines[0].getMessage()
    finally:
        server.close()
        for writer in held:
            writer.close()
        engine.dispose()


ADMIN_DRAIN = """
import sys
from gputui.scheduler.store.sqlstore import SqlStore

store = SqlStore.open(sys.argv[1])
with store.transaction() as tx:
    host = tx.host("gpu01")
    host.drained_at, host.drained_by, host.drain_reason = 5.0, "admin", "from elsewhere"
    tx.put_host(host)
store.close()
"""


async def test_a_commit_by_another_process_reaches_a_subscribed_console(
    pg_url: str, tmp_path: Path
) -> None:
    sock = tmp_path / "head.sock"
    head = Head(
        SqlStore.open(pg_url),
        ScriptedHosts({"gpu01": 2}),
        HeadSettings(socket=sock),
        host_pools={"gpu01": "a100"},
    )
    await head.start()
    try:
        client = await AsyncHeadClient.open_local(sock)
        try:
            console = console_backend(client, local=True)
            first = await console.subscribe(timeout=10)
            assert first["state"]["hosts"]["gpu01"]["drain"] is None
            assert isinstance(head.changes, PgChangeFeed)
            await asyncio.wait_for(head.changes.listening.wait(), 20)
            done = await asyncio.create_subprocess_exec(sys.executable, "-c", ADMIN_DRAIN, pg_url)
            assert await asyncio.wait_for(done.wait(), 60) == 0

            async def drained() -> dict[str, Any]:
                async for push in console.pushes():
                    state = push.get("state") if push.get("push") == "state" else None
                    drain = (state or {}).get("hosts", {}).get("gpu01", {}).get("drain")
                    if drain is not None:
                        return dict(drain)
                raise AssertionError("the pushes ended")

            drain = await asyncio.wait_for(drained(), 20)
            assert drain["by"] == "admin" and drain["reason"] == "from elsewhere"
        finally:
            await client.close()
    finally:
        await head.close()


def test_own_backends_are_the_stores_open_connections(pg_url: str) -> None:
    """What the feed skips: the server processes of the store's connections while they
    are open, and none of them once closed (the server may reuse an id)."""
    store = SqlStore.open(pg_url)
    try:
        with store.transaction() as tx, store.snapshot() as view:  # two connections at once
            tx.hosts()
            view.hosts()
            with connect(pg_url) as admin:
                rows = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid()"
                ).fetchall()
            pids = set(store._own.pids) if store._own is not None else set()
            assert len(pids) == 2 and pids <= {r[0] for r in rows}
    finally:
        store.close()
    assert store._own is not None and store._own.pids == set()
