"""What one client may cost a real ``gputui head`` process: its memory stays bounded
while 200 subscribers never read, while one client sends requests and never reads
the answers, and while hundreds of connections each leave a long line unfinished;
a client that stays over its bound is dropped, and everyone else is served all along.

The head's resident memory and open sockets are read from ``/proc``; the clients are
plain sockets. The head's one host is unreachable, so every submission queues and
the pushed state grows with the queue.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import poll, said_something
from test_durability import HeadProcess

from gputui.scheduler.client import HeadClient

STALL_S = 8
LONG_ARG = "x" * 4000
QUEUED = 80
"""Queued jobs of ~4 KB each: a pushed state (and a ``queue`` answer) of ~350 KB."""
SLACK = 2
"""Sockets the head may open meanwhile (its SSH attempts to its unreachable host)."""
GROWTH_MAX = 120 << 20
"""The most the head's memory may grow in each test (without bounds it passes this
within a few seconds, and the test stops it there)."""


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_sockets(pid: int) -> int:
    """The head's open sockets (its database files come and go with its readers)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


def hung_up(sock: socket.socket) -> bool:
    """Whether the head closed ``sock``, seen without reading what it was sent (reading
    would relieve a stalled subscriber, which then is not dropped)."""
    watch = select.poll()
    watch.register(sock, select.POLLRDHUP)
    return any(event & (select.POLLRDHUP | select.POLLHUP) for _, event in watch.poll(0))


def closed_by_head(sock: socket.socket) -> bool:
    """Read what ``sock`` was sent; True once the head has closed it (never blocks
    long: call it only once the head is expected to have closed it)."""
    sock.settimeout(10)
    try:
        while sock.recv(1 << 20):
            pass
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return True


@pytest.fixture
def head(tmp_path: Path) -> Iterator[HeadProcess]:
    process = HeadProcess(
        tmp_path,
        f"  max_connections_per_user: 1000\n  client_stall_s: {STALL_S}\n  request_timeout_s: 6\n",
    )
    process.start()
    try:
        with HeadClient(process.sock, timeout=30) as client:
            for n in range(QUEUED):
                client.call("submit", {"argv": ["train", LONG_ARG, str(n)], "gpus": 1})
        yield process
    finally:
        process.stop()


def connect(path: Path, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        socks.append(sock)
    return socks


def test_rss_stays_bounded_while_200_subscribers_never_read(head: HeadProcess) -> None:
    assert head.process is not None
    pid = head.process.pid
    subscribers = connect(head.sock, 200)
    try:
        for sock in subscribers:
            sock.sendall(b'{"id": 1, "op": "subscribe", "args": {}}\n')
        poll(
            lambda: all(said_something(s) for s in subscribers),
            timeout=60,
            what="every subscribe answered",
        )
        base, sockets = rss(pid), open_sockets(pid)
        peak, changes = base, 0
        with HeadClient(head.sock, timeout=30) as client:
            until = time.monotonic() + STALL_S - 2
            while time.monotonic() < until and peak - base < GROWTH_MAX:
                # Each submission changes the state every subscriber is pushed.
                client.call("submit", {"argv": ["more", LONG_ARG], "gpus": 1})
                changes += 1
                peak = max(peak, rss(pid))
        assert changes > 20
        assert peak - base < GROWTH_MAX, f"grew {(peak - base) >> 20} MiB in {changes} changes"
        # Over their bound for client_stall_s: dropped, and their memory with them.
        poll(
            lambda: all(hung_up(sock) for sock in subscribers),
            timeout=STALL_S + 20,
            what="the head to close the 200 subscribers that never read",
        )
        poll(
            lambda: open_sockets(pid) <= sockets - 200 + SLACK,
            timeout=STALL_S + 20,
            what="the 200 subscribers that never read to be dropped",
        )
        assert all(closed_by_head(sock) for sock in subscribers)
        with HeadClient(head.sock, timeout=10) as client:
            assert client.call("ping")["pong"] is True
    finally:
        for sock in subscribers:
            sock.close()


def test_a_client_that_never_reads_its_answers_is_held_back_then_dropped(
    head: HeadProcess,
) -> None:
    assert head.process is not None
    pid = head.process.pid
    base, sockets = rss(pid), open_sockets(pid)
    flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    flood.connect(str(head.sock))
    flood.settimeout(30)  # a head that stops reading it holds the send up
    sent = [0]
    stop = threading.Event()

    def send() -> None:
        with contextlib.suppress(OSError):  # the head stops reading: the send times out
            while not stop.is_set() and sent[0] < 100_000:
                flood.sendall(
                    json.dumps({"id": sent[0], "op": "queue", "args": {}}).encode() + b"\n"
                )
                sent[0] += 1

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    peak = base
    try:
        while sender.is_alive() and peak - base < GROWTH_MAX:
            peak = max(peak, rss(pid))
            with HeadClient(head.sock, timeout=10) as client:  # others are served meanwhile
                assert client.call("ping")["pong"] is True
        assert peak - base < GROWTH_MAX, f"grew {(peak - base) >> 20} MiB, {sent[0]} requests"
        assert sent[0] < 100_000, "the head read every request of a client that reads nothing"
        poll(
            lambda: open_sockets(pid) <= sockets + SLACK,
            timeout=STALL_S + 20,
            what="the client that never reads to be dropped",
        )
        assert closed_by_head(flood)
    finally:
        stop.set()
        flood.close()
        sender.join(10)


def test_unfinished_lines_cost_the_head_a_small_fixed_buffer(head: HeadProcess) -> None:
    """300 connections each send 900 KiB of a line and never its end: the head keeps
    at most a small buffer of each (one of them, per user, may grow to the cap), and
    closes them when the request timeout passes; a long request still goes through."""
    assert head.process is not None
    pid = head.process.pid
    base, sockets = rss(pid), open_sockets(pid)
    socks = connect(head.sock, 300)
    try:
        left = dict.fromkeys(socks, 900 * 1024)
        chunk = b'{"id": 1, "op": "submit", "args": {"argv": ["' + b"y" * 65536
        for sock in socks:
            sock.setblocking(False)
        while left:  # until the head takes no more of any of them for 2 s
            _, writable, _ = select.select([], list(left), [], 2.0)
            if not writable:
                break
            for sock in writable:
                with contextlib.suppress(BlockingIOError):
                    left[sock] -= sock.send(chunk[: left[sock]])
                if left[sock] <= 0:
                    del left[sock]
        assert len(left) > 250, "the head read whole unfinished lines of most connections"
        grown = rss(pid) - base
        assert grown < 80 << 20, f"{grown >> 20} MiB for 300 unfinished lines"
        poll(
            lambda: open_sockets(pid) <= sockets + SLACK,
            timeout=30,
            what="the unfinished requests to time out",
        )
        assert all(closed_by_head(sock) for sock in socks)
    finally:
        for sock in socks:
            sock.close()
    with HeadClient(head.sock, timeout=30) as client:
        long_argv = ["train", *["z" * 1000] * 200]  # ~200 KB: over the small buffer
        assert client.call("submit", {"argv": long_argv, "gpus": 1})["job"]["state"] == "queued"
