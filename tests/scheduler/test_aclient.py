"""The console's asynchronous client: requests that overlap on one connection.

The server is a real Unix socket that holds its answers until the test sends
them, so the order in which they come is the test's, not the scheduler's.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from gputui.scheduler.client.aio import AsyncHeadClient


def answer(request: dict[str, Any], result: dict[str, Any]) -> bytes:
    return json.dumps({"id": request["id"], "ok": True, "result": result}).encode() + b"\n"


async def test_a_request_answered_after_another_finished_still_gets_its_answer(
    tmp_path: Path,
) -> None:
    # The console sends requests while others wait (the usage screen asks for two at
    # once; a job's output is polled while a claim is made): when the first one's
    # answer comes alone and it finishes, the second still gets its own.
    received: asyncio.Queue[tuple[dict[str, Any], asyncio.StreamWriter]] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            await received.put((json.loads(line), writer))

    server = await asyncio.start_unix_server(serve, str(tmp_path / "head.sock"))
    client = await AsyncHeadClient.open_local(tmp_path / "head.sock")
    try:
        first = asyncio.create_task(client.call("whoami", timeout=3))
        second = asyncio.create_task(client.call("queue", timeout=3))
        (one, writer), (two, _) = await received.get(), await received.get()
        assert (one["op"], two["op"]) == ("whoami", "queue") and one["id"] != two["id"]
        writer.write(answer(one, {"user": "alice"}))
        assert await first == {"user": "alice"}
        writer.write(answer(two, {"jobs": []}))
        assert await second == {"jobs": []}
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
