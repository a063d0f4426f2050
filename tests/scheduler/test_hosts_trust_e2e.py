"""Issue 14's 1.1, end to end: a stranger's ./hosts.yaml captures nothing.

Alice drops a hosts.yaml into a shared directory that points at a socket she
listens on. Bob, whose own ~/.config/gputui/hosts.yaml names the real head, runs
``gputui submit`` (a command line with a secret) and ``gputui env`` there. Her file
is skipped with one line; nothing reaches her socket; the real head has his job,
owned by him; his env line names his claim's GPUs. Real users, a real head, the real
entry point in a child dropped to bob's uid.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import LineClient, ThreadedHead
from realusers import User, as_user, made_users

from gputui.cli import claims, here, jobs, verbs  # noqa: F401  (loaded before the fork)
from gputui.common import locations
from gputui.entry import main

pytestmark = pytest.mark.root


class Listener:
    """Alice's "head": takes connections and keeps every byte it is sent."""

    def __init__(self, path: Path, owner: User) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        os.chown(path, owner.uid, owner.gid)
        path.chmod(0o777)
        self.sock.listen(16)
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(65536) or b"(connected)")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def world() -> Iterator[tuple[User, User, Path]]:
    tmp = Path(tempfile.mkdtemp(prefix="gputui-trust-", dir="/tmp"))
    tmp.chmod(0o755)
    try:
        with made_users(2, "gte") as (alice, bob):
            yield alice, bob, tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _cli(*argv: str) -> int:
    locations._warned.clear()
    return main(list(argv))


def test_a_strangers_hosts_yaml_captures_no_submission_and_no_env_line(
    world: tuple[User, User, Path],
) -> None:
    alice, bob, tmp = world
    shared = tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    trap = Listener(tmp / "alice.sock", alice)
    theirs = shared / "hosts.yaml"
    theirs.write_text(
        f"head:\n  socket: {tmp / 'alice.sock'}\n"
        "hosts:\n  - name: here\n    local: true\n    python: /tmp/alice-python\n"
    )
    os.chown(theirs, alice.uid, alice.gid)
    try:
        with ThreadedHead(tmp / "head", {"gpu01": 2}) as th:
            own = bob.home / ".config" / "gputui"
            own.mkdir(parents=True)
            (own / "hosts.yaml").write_text(f"head:\n  socket: {th.sock}\n")
            for path in (bob.home / ".config", own, own / "hosts.yaml"):
                os.chown(path, bob.uid, bob.gid)
            submit = ("submit", "-g", "1", "--", "train", "--token=SECRET")
            ran = as_user(bob, _cli, *submit, cwd=shared)
            skipped = f"gputui: skipped hosts.yaml (owner {alice.name}): not owned by you or root"
            assert (ran.value, ran.err.splitlines()) == (0, [skipped])
            job_id = int(ran.out)
            assert th.rows("SELECT uid, argv FROM job WHERE id = ?", job_id) == [
                (bob.uid, '["train","--token=SECRET"]')
            ]
            ran = as_user(bob, _cli, "claim", "-g", "1", "--host", "gpu01", cwd=shared)
            assert ran.value == 0, ran.err
            ran = as_user(bob, _cli, "env", "--host", "gpu01", cwd=shared)
            assert (ran.value, ran.err.splitlines()) == (0, [skipped])
            with LineClient(th.sock) as root:
                claims = root.ok("claims", {"all": True})["claims"]
            mine = [u for c in claims if c["user"] == bob.name for u in c["gpu_uuids"]]
            assert ran.out == f"export CUDA_VISIBLE_DEVICES={','.join(mine)}\n"
    finally:
        trap.close()
    assert trap.received == []
