"""One user cannot lock the others out of the head: real Unix users on a real head
socket (the accounts of ``test_authz``; needs root, skips otherwise).

Alice holds more connections than one user may; the ones over her cap are told why
and closed, and bob, root and an admin are served all along. A connection that never
finishes a request is closed after the request timeout, however slowly it trickles;
one that finished its request and now only listens is kept.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asuser import Child
from headthread import LineClient, ThreadedHead, poll, said_something
from test_authz import ADMINS, ALICE, People, people  # noqa: F401  (the fixture)

from gputui.scheduler.server.listener import Limits

CAP = 8
HELD = 20
TIMEOUT_S = 1.5


@pytest.fixture
def capped(people: People) -> Iterator[ThreadedHead]:  # noqa: F811
    """A head whose socket the test users reach, with a small per-user cap."""
    tmp = Path(tempfile.mkdtemp(prefix="gputui-conns-", dir="/tmp"))
    tmp.chmod(0o755)
    limits = Limits(per_user=CAP, request_timeout_s=TIMEOUT_S)
    try:
        with ThreadedHead(tmp, {"gpu01": 4}, admin_group=ADMINS, limits=limits) as head:
            yield head
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _hold(path: str, ready: int, release: int, others: list[int]) -> list[dict[str, Any]]:
    """As alice: open ``HELD`` connections, each with a finished request (so none
    times out), say so on ``ready``, hold them until ``release`` closes; what the
    head told the ones it refused."""
    for fd in others:
        os.close(fd)
    socks = []
    for _ in range(HELD):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        sock.sendall(b'{"id": 1, "op": "whoami", "args": {}}\n')
        socks.append(sock)
    poll(lambda: all(said_something(s) for s in socks), what="an answer on each")
    told = []
    for sock in socks:
        sock.settimeout(10)
        told.append(json.loads(sock.makefile("rb").readline()))
    os.write(ready, b"r")
    os.read(release, 1)  # until the test lets go
    return told


def test_one_user_holding_many_connections_does_not_lock_out_others(
    capped: ThreadedHead,
    people: People,  # noqa: F811
) -> None:
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    alice = people.alice
    child = Child(
        alice.uid,
        alice.gid,
        alice.groups,
        lambda: _hold(str(capped.sock), ready_w, release_r, [ready_r, release_w]),
    )
    try:
        os.close(ready_w)
        os.close(release_r)
        assert select.select([ready_r], [], [], 60)[0], "alice's connections were not made"
        # Alice is at her cap; everyone else is served.
        assert people.bob.ok(capped.sock, "whoami")["user"] == people.bob.name
        assert people.carol.ok(capped.sock, "whoami")["admin"] is True
        with LineClient(capped.sock) as root:
            assert root.ok("whoami")["user"] == "root"
        refused = alice.call(capped.sock, "whoami")
        assert refused["ok"] is False and refused["error"]["code"] == "busy"
        os.close(release_w)
        release_w = -1
        told = child.result(60)
    finally:
        child.kill()
        for fd in (ready_r, release_w):
            if fd >= 0:
                os.close(fd)
    answered = [t["result"]["user"] for t in told if t["ok"]]
    busy = [t["error"] for t in told if not t["ok"]]
    assert answered == [ALICE] * CAP
    assert len(busy) == HELD - CAP
    assert {b["code"] for b in busy} == {"busy"}
    assert busy[0]["message"] == (
        f"{ALICE} already holds {CAP} connections to the head,"
        " the most one user may (head.max_connections_per_user)"
    )
    # Her connections gone, she is served again.
    poll(lambda: alice.call(capped.sock, "whoami").get("ok"), what="alice served again")
    assert capped.problems == []


def _closed_after(sock: socket.socket, since: float) -> tuple[float, list[dict[str, Any]]]:
    """Seconds from ``since`` until the head closed ``sock``; what it said first."""
    sock.settimeout(TIMEOUT_S + 10)
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except ConnectionResetError:
            # The head closed with part of our request unread: the kernel resets the
            # connection once what it had sent is read.
            break
        if not chunk:
            break
        data += chunk
    return time.monotonic() - since, [json.loads(line) for line in data.splitlines()]


def test_a_connection_that_never_finishes_a_request_is_closed(
    capped: ThreadedHead,
    people: People,  # noqa: F811
) -> None:
    path = str(capped.sock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    trickle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.connect(path)
        listener.sendall(b'{"id": 1, "op": "subscribe", "args": {}}\n')
        start = time.monotonic()
        silent.connect(path)
        waited, said = _closed_after(silent, start)
        assert TIMEOUT_S - 0.1 <= waited < TIMEOUT_S + 5
        assert [s["error"]["code"] for s in said] == ["timeout"]
        assert said[0]["error"]["message"] == "no complete request within 1.5 s; closing"
        # A byte at a time, each well inside the timeout: the request as a whole is not.
        trickle.connect(path)
        start = time.monotonic()
        closed = False
        for byte in b'{"id": 2, "op": "whoami", "args": {}}'[:-1]:
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            if said_something(trickle):
                break
            select.select([trickle], [], [], TIMEOUT_S / 5)  # pace: a slow client
        waited, said = _closed_after(trickle, start)
        assert closed or [s["error"]["code"] for s in said] == ["timeout"]
        assert waited < TIMEOUT_S + 5
        # The subscriber finished its request: it is kept, however long it listens.
        listener.setblocking(False)
        data = listener.recv(1 << 20)
        assert data and json.loads(data.split(b"\n")[0])["ok"] is True
        with pytest.raises(BlockingIOError):
            while listener.recv(1 << 20):
                pass
    finally:
        for sock in (listener, silent, trickle):
            sock.close()
