"""What the head's health board keeps across a restart of the head: a host that shows
fewer GPUs than it had before is a problem, though the new head never saw it whole."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from headkit import running_head
from test_health_board_head import ask

HOST = "gpu01"


async def _problems(sock: Path) -> list[dict[str, Any]]:
    answer = await asyncio.to_thread(ask, sock, "health")
    assert answer["ok"], answer
    return list(answer["result"]["problems"])


async def test_fewer_gpus_than_before_is_remembered_across_a_restart(tmp_path: Path) -> None:
    async with running_head(tmp_path, {HOST: 4}) as (head, _, sock):
        deadline = asyncio.get_running_loop().time() + 15
        while len(head.watch.present_gpus()) < 4:
            assert asyncio.get_running_loop().time() < deadline, "the four GPUs never came"
            await asyncio.sleep(0.05)
        assert not [p for p in await _problems(sock) if p["code"] == "gpu-missing"]
    # The host comes back with one GPU fewer (fallen off the bus), to a new head.
    async with running_head(tmp_path, {HOST: 3}) as (_, _, sock):
        deadline = asyncio.get_running_loop().time() + 15
        while True:
            missing = [p for p in await _problems(sock) if p["code"] == "gpu-missing"]
            if missing:
                break
            assert asyncio.get_running_loop().time() < deadline, "fewer GPUs not noticed"
            await asyncio.sleep(0.05)
        (found,) = missing
        assert (found["severity"], found["host"], found["title"]) == (
            "crit",
            HOST,
            "3 of 4 GPUs (seen before)",
        )
