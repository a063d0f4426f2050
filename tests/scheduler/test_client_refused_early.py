"""A head that refuses a connection before reading from it (``busy``: the caller is at
its cap) and closes it: the client says the head's refusal, not "unreachable", even
when its request is written after the close (a broken pipe)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.sync import HeadClient

BUSY = b'{"id":null,"ok":false,"error":{"code":"busy","message":"too many connections"}}\n'


def test_a_refusal_sent_before_the_request_is_what_the_client_says(tmp_path: Path) -> None:
    path = tmp_path / "head.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    closed = threading.Event()

    def refuse() -> None:
        conn, _ = server.accept()
        conn.sendall(BUSY)
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()
        closed.set()

    worker = threading.Thread(target=refuse)
    worker.start()
    try:
        client = HeadClient(path, timeout=10)
        client.connect()
        assert closed.wait(10)
        with pytest.raises(HeadError) as told:
            client.call("whoami", {})
        assert told.value.code == "busy", told.value
        client.close()
    finally:
        worker.join(10)
        server.close()
