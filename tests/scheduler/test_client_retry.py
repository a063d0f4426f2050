"""A request the head does not answer in time is sent again once, with the same
request id, and applied once: a real head behind a proxy that swallows the head's
first answers (the head applied the request; only its answer was lost). A timeout is
never read as a refusal: when the retry is not answered either, the message says the
request may still be applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import ThreadedHead

from gputui.scheduler.client import HeadClient, HeadError
from gputui.scheduler.client.aio import AsyncHeadClient

HOST = "gpu01"


class LosingAnswers:
    """A Unix socket in front of the head that forwards everything but drops the
    first ``drop`` answers the head sends back."""

    def __init__(self, head: Path, path: Path, drop: int) -> None:
        self.head, self.drop = head, drop
        self.sent: list[dict[str, object]] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(str(self.head))
            threading.Thread(target=self._up, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, conn), daemon=True).start()

    def _up(self, conn: socket.socket, upstream: socket.socket) -> None:
        with contextlib.suppress(OSError), conn.makefile("rb") as lines:
            for line in lines:
                self.sent.append(json.loads(line))
                upstream.sendall(line)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _down(self, upstream: socket.socket, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), upstream.makefile("rb") as lines:
            for line in lines:
                if not json.loads(line).get("push"):
                    with self._lock:
                        if self.drop > 0:
                            self.drop -= 1
                            continue
                conn.sendall(line)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def head(tmp_path: Path) -> Iterator[ThreadedHead]:
    with ThreadedHead(tmp_path, {HOST: 2}) as th:
        yield th


def jobs(th: ThreadedHead) -> list[tuple[int, str]]:
    return [(int(i), str(n)) for i, n in th.rows("SELECT id, name FROM job ORDER BY id")]


def test_a_submit_whose_answer_was_lost_is_retried_and_acts_once(
    head: ThreadedHead, tmp_path: Path
) -> None:
    proxy = LosingAnswers(head.sock, tmp_path / "proxy.sock", drop=1)
    try:
        with HeadClient(tmp_path / "proxy.sock", timeout=1.0) as client:
            job = client.call("submit", {"argv": ["train"], "name": "once"})["job"]
    finally:
        proxy.close()
    assert jobs(head) == [(job["id"], "once")]
    submits = [line for line in proxy.sent if line["op"] == "submit"]
    assert len(submits) == 2 and submits[0]["rid"] == submits[1]["rid"]


def test_when_the_retry_times_out_too_the_message_says_it_may_still_be_applied(
    head: ThreadedHead, tmp_path: Path
) -> None:
    proxy = LosingAnswers(head.sock, tmp_path / "proxy.sock", drop=2)
    try:
        with (
            HeadClient(tmp_path / "proxy.sock", timeout=1.0) as client,
            pytest.raises(HeadError) as lost,
        ):
            client.call("submit", {"argv": ["train"], "name": "maybe"})
    finally:
        proxy.close()
    assert lost.value.code == "timeout"
    assert "may still be applied" in lost.value.message and "\n" not in lost.value.message
    assert [name for _, name in jobs(head)] == ["maybe"]  # applied, once


def test_the_console_client_retries_a_lost_answer_once_with_the_same_id(
    head: ThreadedHead, tmp_path: Path
) -> None:
    proxy = LosingAnswers(head.sock, tmp_path / "proxy.sock", drop=1)

    async def submit() -> dict[str, object]:
        client = await AsyncHeadClient.open_local(tmp_path / "proxy.sock")
        try:
            return await client.call("submit", {"argv": ["x"], "name": "console"}, timeout=1.0)
        finally:
            await client.close()

    try:
        job = asyncio.run(submit())["job"]
    finally:
        proxy.close()
    assert isinstance(job, dict)
    assert jobs(head) == [(job["id"], "console")]
    submits = [line for line in proxy.sent if line["op"] == "submit"]
    assert len(submits) == 2 and submits[0]["rid"] == submits[1]["rid"]
