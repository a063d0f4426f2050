"""The ``SchedulerBackend`` seam: the CLI asks the scheduler only through it, a
capability a backend lacks is one line before anything is asked, and the same
``HeadBackend`` serves the console over the asyncio client (a real head, real
sockets)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead

from gputui.cli import verbs
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.backend import (
    CAPABILITIES,
    SchedulerBackend,
    SessionBackend,
    Unsupported,
    require,
)
from gputui.scheduler.client.head_backend import HeadBackend, console_backend
from gputui.scheduler.client.session import HeadSession, head_session


class Lacking:
    """A scheduler that lacks ``lacks``: the head's backend, with those taken away.
    Every request asked of it is kept in ``asked``."""

    def __init__(self, inner: Any, lacks: set[str]) -> None:
        self.inner = inner
        self.lacks = lacks
        self.asked: list[str] = []

    @property
    def name(self) -> str:
        return "test"

    def supports(self, capability: str) -> bool:
        return capability not in self.lacks and self.inner.supports(capability)

    def __getattr__(self, name: str) -> Any:
        if name in CAPABILITIES:
            self.asked.append(name)
        return getattr(self.inner, name)


def _queued(sock: Path, count: int) -> list[int]:
    """``count`` jobs that wait (each wants more GPUs than are free)."""
    with LineClient(sock) as c:
        c.ok("claim", {"gpus": 2, "note": "all of them"})
        return [
            c.ok("submit", {"argv": ["sleep", "60"], "gpus": 2})["job"]["id"] for _ in range(count)
        ]


@pytest.mark.parametrize(
    ("argv", "lacks", "line"),
    [
        (["preempt", "{0}", "{1}"], {"preempt"}, "the test scheduler cannot preempt a job"),
        (["cancel", "{0}"], {"cancel"}, "the test scheduler cannot cancel a job"),
        (["drain", "gpu01", "--reason", "fan"], {"drain"}, "the test scheduler cannot drain"),
        (
            ["run", "-g", "1", "--host", "gpu01", "--", "/bin/true"],
            {"resume_claim"},
            "the test scheduler cannot take a claim back after a reconnect",
        ),
    ],
)
def test_a_capability_the_scheduler_lacks_is_one_line_and_nothing_is_asked(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    lacks: set[str],
    line: str,
) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th:
        ids = _queued(th.sock, 2)
        before = th.snapshot()
        with head_session(str(th.sock), None) as head:
            scheduler = Lacking(head, lacks)
            code = verbs.main([a.format(*ids) for a in argv], backend=scheduler)
        out = capsys.readouterr()
        assert (code, out.out, out.err) == (1, "", f"gputui {argv[0]}: {line}\n")
        assert scheduler.asked == []
        assert th.snapshot() == before  # nothing half done: no claim, no job touched


def test_the_same_verb_through_a_scheduler_that_has_it_acts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control for the test above: its stand-in passes what it has through."""
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th:
        ids = _queued(th.sock, 2)
        with head_session(str(th.sock), None) as head:
            scheduler = Lacking(head, {"kill"})
            code = verbs.main(["cancel", str(ids[0]), str(ids[1])], backend=scheduler)
        out = capsys.readouterr()
        assert (code, out.err) == (0, "")
        told = "cancelled: cancelled before it ran"
        assert out.out.splitlines() == [f"job {ids[0]}: {told}", f"job {ids[1]}: {told}"]
        assert scheduler.asked == ["cancel", "cancel"]
        assert th.rows("SELECT state FROM job ORDER BY id") == [("cancelled",), ("cancelled",)]


def test_every_method_a_caller_may_ask_is_a_capability_and_the_head_has_them_all() -> None:
    """One list of capabilities (what ``require`` checks and ``Unsupported`` words),
    and it is the protocol's requests."""
    plumbing = {"name", "local", "supports", "pushes", "connection", "next_message", "hang_up"}
    asked = {
        name
        for protocol in (SchedulerBackend, SessionBackend)
        for name in dir(protocol)
        if not name.startswith("_")
    }
    assert asked - plumbing == set(CAPABILITIES)
    require(HeadBackend(object()), CAPABILITIES)
    for name in CAPABILITIES:
        assert callable(getattr(HeadSession, name))


def test_what_a_scheduler_cannot_do_is_said_in_one_line_with_its_own_code() -> None:
    said = Unsupported("slurm", "release_hold")
    assert (said.code, said.message) == (
        "unsupported",
        "the slurm scheduler cannot release a held job",
    )
    with pytest.raises(Unsupported) as caught:
        require(Lacking(HeadBackend(object()), {"usage"}), ["queue", "usage"])
    assert caught.value.capability == "usage"


async def test_the_console_reaches_the_head_through_the_same_backend(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th:
        ids = _queued(th.sock, 1)
        client = await AsyncHeadClient.open_local(th.sock)
        try:
            head = console_backend(client, local=True)
            first = await head.subscribe(timeout=10)
            assert [j["id"] for j in first["state"]["jobs"]] == ids
            submitted = (await head.submit(argv=["sleep", "60"], gpus=2, cwd=str(tmp_path)))["job"]
            assert submitted["state"] == "queued"
            jobs = (await head.queue(all=True))["jobs"]
            assert [j["id"] for j in jobs] == [*ids, submitted["id"]]
            assert (await head.cancel(submitted["id"]))["job"]["state"] == "cancelled"

            async def told_cancelled() -> None:
                async for push in head.pushes():
                    state = push.get("state") if push.get("push") == "state" else None
                    jobs = [j for j in (state or {}).get("jobs", ()) if j["id"] == submitted["id"]]
                    if jobs and jobs[0]["state"] == "cancelled":
                        return

            await asyncio.wait_for(told_cancelled(), 10)
        finally:
            await client.close()


async def test_the_asyncio_client_hands_a_requests_own_pushes_to_it(tmp_path: Path) -> None:
    """``force_free``'s steps reach ``on_step`` (and still ``pushes``, as before)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = json.loads(await reader.readline())
        for step in ("drain", "stop"):
            push = {"push": "force-free", "id": request["id"], "step": {"step": step}}
            writer.write(json.dumps(push).encode() + b"\n")
        other = {"push": "force-free", "id": request["id"] + 1, "step": {"step": "not mine"}}
        writer.write(json.dumps(other).encode() + b"\n")
        answer = {"id": request["id"], "ok": True, "result": {"free": True}}
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()

    server = await asyncio.start_unix_server(serve, str(tmp_path / "head.sock"))
    client = await AsyncHeadClient.open_local(tmp_path / "head.sock")
    steps: list[Any] = []
    try:
        head = console_backend(client, local=True)
        result = await head.force_free(
            host="gpu01", gpu="0", reason="stuck", on_step=steps.append, timeout=5
        )
        assert result == {"free": True}
        assert steps == [{"step": "drain"}, {"step": "stop"}]
        pushes = client.pushes()
        pushed = [await anext(pushes) for _ in range(3)]
        await pushes.aclose()
        assert [p["step"]["step"] for p in pushed] == ["drain", "stop", "not mine"]
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
