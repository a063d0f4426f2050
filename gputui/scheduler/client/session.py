"""``HeadSession``: the head over one blocking connection, for one CLI process.

A ``SessionBackend``: besides every request of ``HeadBackend`` it holds a claim for
as long as its process lives (``gputui run``). ``head_session`` opens it the way every
CLI verb reaches the head: its socket here, or through SSH to its host.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.scheduler.client.backend import ANSWER_WITHIN_S, Answer
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.head_backend import HeadBackend
from gputui.scheduler.client.place import head_place, socket_path
from gputui.scheduler.client.sync import HeadClient

if TYPE_CHECKING:
    from gputui.scheduler.client.terminal import TerminalLink


class HeadSession(HeadBackend[Answer, Iterator[Answer]]):
    """The head over one blocking connection, for one CLI process: a ``SessionBackend``."""

    def __init__(self, client: HeadClient) -> None:
        super().__init__(client, local=client.opener is None)
        self._client = client

    def hold_claim(
        self,
        *,
        gpus: int,
        host: str,
        note: str,
        pool: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> Answer:
        body: Answer = {"gpus": gpus, "host": host, "wait": True, "session": True, "note": note}
        if pool:
            body["pool"] = pool
        return self._send("claim", body, timeout, bound=True)

    def resume_claim(self, claim_id: int, *, timeout: float | None = ANSWER_WITHIN_S) -> Answer:
        return self._send("claim", {"session": True, "resume": claim_id}, timeout, bound=True)

    def connection(self) -> socket.socket | None:
        return self._client.sock

    def next_message(self) -> Answer:
        return self._client.message()

    def hang_up(self) -> None:
        self._client.close()

    def submit_interactive(
        self,
        *,
        argv: list[str],
        gpus: int,
        cwd: str | None,
        pool: str | None = None,
        host: str | None = None,
        time_limit_s: float | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> Answer:
        """Queue an interactive job (``run --pty``): on a terminal its host keeps."""
        body: Answer = {"argv": argv, "gpus": gpus, "pty": True}
        if env:
            body["env"] = env
        optional = {"cwd": cwd, "pool": pool, "host": host, "time_limit_s": time_limit_s}
        body.update({key: value for key, value in optional.items() if value is not None})
        return self._send("submit", body, timeout)

    def attach(self, job_id: int, *, rows: int, cols: int) -> TerminalLink:
        """On a new connection, nothing read from it before (``TerminalLink`` reads
        it itself): the session's connection is closed first."""
        from gputui.scheduler.client.terminal import TerminalLink

        self._client.close()
        self._client.connect()
        sock = self._client.sock
        assert sock is not None
        link = TerminalLink(sock)
        link.attach(job_id, rows, cols)
        return link


@contextmanager
def head_session(socket_option: str | None, hosts_file: str | None) -> Iterator[HeadSession]:
    """The head as a CLI verb reaches it (``place.head_place``): its socket here, or
    through SSH to its host (only that path loads the configuration and asyncssh)."""
    path, remote = head_place(socket_option, hosts_file)
    opener = None if remote is None else _over_ssh(remote, path)
    with HeadClient(path, opener=opener) as client:
        yield HeadSession(client)


@contextmanager
def local_head(hosts_file: str | None, socket_option: str | None = None) -> Iterator[HeadSession]:
    """The head at its socket on this machine (``place.socket_path``: ``socket_option``
    first), never over SSH: ``gputui health`` and ``incident`` fall back to probing the
    hosts themselves."""
    with HeadClient(socket_path(socket_option, hosts_file)) as client:
        yield HeadSession(client)


def _over_ssh(config_file: Path, path: Path) -> Callable[[], socket.socket]:
    """Opens the head's socket here when it answers (a leader of two, on this
    machine), else over SSH (``reach.head_socket``); called again for each retry, so
    a request a head dropped goes to whichever leads then."""
    from gputui.config.loader import ConfigError, load_config
    from gputui.scheduler.client.reach import head_socket

    try:
        config = load_config(config_file)
    except ConfigError as exc:
        raise HeadError("config", "; ".join(exc.lines[:3])) from None

    def opener() -> socket.socket:
        return head_socket(config, path)

    return opener
