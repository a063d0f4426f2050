"""A channel's server that answers one byte at a time never times out a socket read,
so its send outlives its timeout on the outbox's thread. The outbox then gives that
channel no second thread (its retries fail at once until the first ends), so a
user's slow server never takes the threads every other channel's notices need."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from chatserver import ChatServer
from headthread import LineClient, ThreadedHead, poll, refusal

from gputui.config.notify import NotifyConfig, TeamChannel

TOKEN = "dtTOKEN0123456789"


class DripServer:
    """Accepts HTTP requests and answers each a byte every 0.05 s, forever (until
    closed); counts the connections. (Forty bytes a send's wait of 2 s: a loaded
    machine may stall this thread a while, never that long.)"""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            while not self._stop.wait(0.05):
                try:
                    conn.sendall(b"H")
                except OSError:
                    return

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


def test_a_dripping_server_holds_one_thread_and_never_the_others_notices(
    tmp_path: Path,
) -> None:
    drip = DripServer()
    try:
        with ChatServer() as chat:
            team = TeamChannel(name="lab", url=f"{chat.base}/robot/send?access_token={TOKEN}")
            config = NotifyConfig(
                channels=[team], senders=1, tries=20, timeout_s=2.0, backoff_s=0.01,
                backoff_max_s=0.05, user_private=True,  # the stand-ins are on loopback
            )  # fmt: skip
            with (
                ThreadedHead(tmp_path, {"gpu01": 4}, notify=config) as th,
                LineClient(th.sock) as c,
            ):
                c.ok("notify_set", {"url": f"json://127.0.0.1:{drip.port}/", "events": ["start"]})
                jobs = [
                    int(c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"])
                    for _ in range(3)
                ]
                poll(
                    lambda: (
                        th.rows("SELECT count(*) FROM notify_sent WHERE state = 'failed'") == [(3,)]
                    ),
                    what="the slow channel's three given up",
                    timeout=60,
                )
                heard = chat.wait(
                    lambda h: all(any(f"job {j} " in str(x.body) for x in h) for j in jobs),
                    what="the team's notices of all three starts",
                )
                assert heard
                # Sixty tries in all, one thread: the first connection never ends.
                assert drip.connections == 1, drip.connections
    finally:
        drip.close()


def test_a_users_channels_on_one_slow_server_hold_one_thread_between_them(
    tmp_path: Path,
) -> None:
    drip = DripServer()
    try:
        with ChatServer() as chat:
            team = TeamChannel(name="lab", url=f"{chat.base}/robot/send?access_token={TOKEN}")
            config = NotifyConfig(
                channels=[team], senders=1, tries=20, timeout_s=2.0, backoff_s=0.01,
                backoff_max_s=0.05, user_private=True,  # the stand-ins are on loopback
            )  # fmt: skip
            with (
                ThreadedHead(tmp_path, {"gpu01": 4}, notify=config) as th,
                LineClient(th.sock) as c,
            ):
                for name in ("a", "b", "c"):
                    url = f"json://127.0.0.1:{drip.port}/{name}"
                    c.ok("notify_set", {"url": url, "name": name, "events": ["start"]})
                jobs = [
                    int(c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"])
                    for _ in range(2)
                ]
                chat.wait(
                    lambda h: all(any(f"job {j} " in str(x.body) for x in h) for j in jobs),
                    what="the team's notices of both starts",
                )
                poll(
                    lambda: (
                        th.rows("SELECT count(*) FROM notify_sent WHERE state = 'failed'") == [(6,)]
                    ),
                    what="the user's six given up",
                    timeout=60,
                )
                assert drip.connections == 1, drip.connections
    finally:
        drip.close()


def test_one_notify_test_at_a_time_for_a_user(tmp_path: Path) -> None:
    with ChatServer() as chat:
        chat.mode = "hang"
        config = NotifyConfig(timeout_s=5.0, user_private=True)
        with (
            ThreadedHead(tmp_path, {"gpu01": 1}, notify=config) as th,
            LineClient(th.sock) as c,
            LineClient(th.sock) as again,
        ):
            c.ok("notify_set", {"url": f"{chat.base}/robot/send?access_token={TOKEN}"})
            c.send(b'{"id": 99, "op": "notify_test", "args": {}}\n')
            chat.wait(lambda h: len(h) == 1, what="the first test's send")
            code, line = refusal(again.ask("notify_test"))
            assert (code, line) == ("refused", "your last notify test is still being sent")
            chat.release()
            assert c.read()["id"] == 99
            assert len(c.ok("notify_test")["results"]) == 1  # the next, once it ended
