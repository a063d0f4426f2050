"""The head's side of a terminal: a client that does not read is detached, not buffered for.

The connection is a real Unix socket whose far end nobody reads; the terminal line
stands in at the ``HostOps`` seam (what the host would be asked), as ``headkit``'s
scripted hosts do.
"""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from headkit import running_head

from gputui.config.scheduler import SchedulerConfig
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.head.terminals import UNSENT_MAX, Attached
from gputui.scheduler.server.connection import Connection
from gputui.scheduler.server.peer import Caller
from gputui.wire.messages import Pty


class RecordedLine:
    """A terminal line that records what the head asked of it."""

    def __init__(self) -> None:
        self.closed = False
        self.sent: list[dict[str, object]] = []

    def send(
        self,
        data: str | None = None,
        *,
        rows: int | None = None,
        cols: int | None = None,
        ack: int | None = None,
    ) -> bool:
        self.sent.append({"data": data, "rows": rows, "cols": cols, "ack": ack})
        return not self.closed

    def close(self) -> None:
        self.closed = True


async def test_a_client_that_leaves_its_terminal_unread_is_detached() -> None:
    near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _reader, writer = await asyncio.open_unix_connection(sock=near)
        caller = Caller(uid=1000, user="alice", group="alice", groups=frozenset(), admin=False)
        conn = Connection(caller, writer, 1)
        attached = Attached(conn, 5)
        line = RecordedLine()
        attached.line = line
        chunk = base64.b64encode(b"x" * 49152).decode()
        at = 0
        while not attached.ended:
            assert at < 64 * UNSENT_MAX, "never detached"
            attached.on_message(Pty(aid=1, kind="out", at=at, data=chunk))
            at += 49152
        assert line.closed
        assert UNSENT_MAX < conn.unsent() < UNSENT_MAX + 4 * len(chunk)  # bounded
        # What comes after is not sent at all.
        unsent = conn.unsent()
        attached.on_message(Pty(aid=1, kind="out", at=at, data=chunk))
        assert conn.unsent() == unsent
        # The client, reading at last, finds the reason at the end of what it was sent.
        far.setblocking(False)
        received = b""
        deadline = asyncio.get_running_loop().time() + 10
        while not received.endswith(b"\n") or b'"closed"' not in received[-200:]:
            assert asyncio.get_running_loop().time() < deadline, received[-200:]
            try:
                received += far.recv(1 << 20)
            except BlockingIOError:
                await asyncio.sleep(0)  # the loop sends the rest as room is made
        assert received.rstrip().endswith(
            b'{"push":"pty","job":5,"kind":"closed","why":"client too slow"}'
        )
        writer.close()
    finally:
        near.close()
        far.close()


NO_MIN_RUNTIME = SchedulerConfig.model_validate(
    {"preemption": {"min_runtime_minutes": 0}}, strict=False
)


async def _running(client: AsyncHeadClient, job_id: int) -> bool:
    return (await client.call("show", {"job_id": job_id}))["job"]["state"] == "running"


async def test_an_interactive_job_is_never_preempted_even_of_a_preemptible_class(
    tmp_path: Path,
) -> None:
    rules = Rules(sched=NO_MIN_RUNTIME)
    async with running_head(tmp_path, {"gpu01": 4}, rules=rules) as (_head, hosts, sock):
        client = await AsyncHeadClient.open_local(sock)
        try:
            low = {"argv": ["bash"], "gpus": 4, "cwd": "/", "priority": "low"}
            shell = (await client.call("submit", {**low, "pty": True}))["job"]
            assert shell["preemptible"] is False and shell["interactive"] is True
            await wait_for(lambda: _running(client, shell["id"]))
            urgent = {"argv": ["x"], "gpus": 2, "cwd": "/", "priority": "urgent"}
            waiting = (await client.call("submit", urgent))["job"]  # decided in its batch
            view = (await client.call("show", {"job_id": shell["id"]}))["job"]
            assert view["state"] == "running" and hosts.signals == []
            assert (await client.call("show", {"job_id": waiting["id"]}))["job"]["state"] == (
                "queued"
            )
            # The same job without a terminal is preempted at once (the scene is right).
            await client.call("cancel", {"job_id": waiting["id"]})
            await client.call("kill", {"job_id": shell["id"]})  # (the scripted host ends it)
            plain = (await client.call("submit", low))["job"]
            await wait_for(lambda: _running(client, plain["id"]))
            signalled = len(hosts.signals)
            await client.call("submit", urgent)
            view = (await client.call("show", {"job_id": plain["id"]}))["job"]
            assert view["state"] == "preempting" or view["requeues"] == 1, view
            (run,) = [launch.key for launch in hosts.launches if launch.job_id == plain["id"]]
            assert hosts.signals[signalled:] == [("gpu01", run, "TERM")]
        finally:
            await client.close()


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "not in time"
        await asyncio.sleep(0.02)
