"""``HeadLink``: the console's one connection to the scheduler's head, owned by the app.

It runs in an app worker: connect (the local socket when ``head.socket`` is on this
machine, else through SSH to ``head.host`` and its socket there), subscribe, and
post what the head says as small messages (``HeadState``, ``HeadNotice``); when the
head cannot be reached or the connection drops, post ``HeadUnreachable`` with the
reason and try again with a growing wait. Each connection is asked through its
``SchedulerBackend`` (``LinkSession.backend``): requests (claim, submit, ...) go
through ``ask``, which fails at once with a ``HeadError`` saying why while the head
is away, or when the scheduler lacks the capability (``lacks`` says so before
anything is sent): no request waits silently or is dropped without a word. No
widget does any of this; they get the messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from textual.message import Message

from gputui.common.text import clean
from gputui.config.models import Config
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.backend import Answer, AsyncBackend, Unsupported, require
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.head_backend import console_backend
from gputui.scheduler.client.ssh import is_local, open_head_ssh
from gputui.ui.head.view import HeadView

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.5
BACKOFF_CAP_S = 30.0
SUBSCRIBE_TIMEOUT_S = 15.0
_READ_ONLY = ("show", "logs", "queue", "claims", "env", "usage", "report")
"""Requests that change nothing: one lost with the connection is simply unanswered."""


@dataclass
class HeadState(Message):
    """The head's state changed (queue, claims, who holds which GPU): the newest one.

    Only the latest state matters, so a burst collapses into one (``can_replace``).
    """

    view: HeadView

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, HeadState)


@dataclass
class HeadNotice(Message):
    """The head tells this user something happened: a job started, ended, was preempted."""

    kind: str
    text: str
    job_id: int | None = None
    claim_id: int | None = None


@dataclass
class HeadForceFreeStep(Message):
    """A step of a force-free run this console asked for, as it ended at the head."""

    step: Any


@dataclass
class HeadUnreachable(Message):
    """The head cannot be reached (or the connection to it dropped); ``reason`` says why."""

    reason: str


class Carrier(Protocol):
    """What carries a link's requests: the head's client, or Slurm's console backend."""

    closed_reason: str | None

    async def close(self) -> None: ...


class LinkSession:
    """One open connection to the head: the backend the console asks through, and
    what carries it (closed with it)."""

    def __init__(
        self,
        client: Carrier,
        *,
        local: bool,
        closer: Callable[[], Awaitable[None]] | None = None,
        backend: AsyncBackend | None = None,
    ) -> None:
        """``local``: the head runs on this machine; ``backend``: the scheduler over
        ``client`` (the head's own, ``console_backend``, unless given)."""
        self.client = client
        if backend is None:
            assert isinstance(client, AsyncHeadClient)
            backend = console_backend(client, local=local)
        self.backend = backend
        self._closer = closer

    async def close(self) -> None:
        await self.client.close()
        if self._closer is not None:
            with contextlib.suppress(Exception):
                await self._closer()


Opener = Callable[[], Awaitable[LinkSession]]


class HeadLink:
    """Keeps one subscription to the head; ``ask`` sends requests over it."""

    def __init__(
        self,
        config: Config,
        post: Callable[[Message], Any],
        *,
        opener: Opener | None = None,
        backoff_first: float = BACKOFF_FIRST_S,
        backoff_cap: float = BACKOFF_CAP_S,
        where: str | None = None,
    ) -> None:
        """``opener`` and ``where`` (what the status line names) for a scheduler that is
        not a head (Slurm); else the head of hosts.yaml's ``head:`` section."""
        if config.head is None and opener is None:
            raise ValueError("hosts.yaml has no head: section")
        self.config = config
        self.head = config.head
        self._where = where
        self._post = post
        self._opener = opener
        self._backoff_first = backoff_first
        self._backoff_cap = backoff_cap
        self._socket = Path(config.head.socket if config.head else "").expanduser()
        self._session: LinkSession | None = None
        self._wake = asyncio.Event()
        self.reason: str | None = "connecting to the head"
        """Why requests cannot be sent now; None while connected."""
        self.view: HeadView | None = None
        """The newest state the head pushed."""

    @property
    def connected(self) -> bool:
        return self._session is not None and self.reason is None

    def where(self) -> str:
        if self._where is not None or self.head is None:
            return self._where or "the scheduler"
        if is_local(self.head):
            return str(Path(self.head.socket).expanduser())
        return f"{','.join(self.head.hosts)}:{self.head.socket}"

    # -- the worker ---------------------------------------------------------------

    async def run(self) -> None:
        """Connect, subscribe, relay; reconnect with backoff. Runs until cancelled."""
        delay = self._backoff_first
        while True:
            subscribed = False
            try:
                session = await self._open()
                try:
                    backend = session.backend
                    require(backend, ("subscribe",))
                    first = await backend.subscribe(timeout=SUBSCRIBE_TIMEOUT_S)
                    self._session, self.reason = session, None
                    subscribed = True
                    self._state(first.get("state"), first.get("seq"))
                    told = first.get("notices")  # what the head kept while we were away
                    for notice in told if isinstance(told, list) else []:
                        self._notice(notice)
                    async for push in backend.pushes():
                        self._push(push)
                    why = session.client.closed_reason or "the head closed the connection"
                finally:
                    self._session = None
                    await session.close()
            except HeadError as exc:
                why = exc.message
            except asyncio.CancelledError:
                self.reason = "closed"
                raise
            except Exception as exc:  # anything the transport raised: one line, retried
                why = self._describe(exc)
            self.reason = clean(why, 300)
            self._post(HeadUnreachable(self.reason))
            if subscribed:
                delay = self._backoff_first
            wait = random.uniform(delay / 2, delay)
            delay = min(self._backoff_cap, delay * 2)
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def retry_now(self) -> None:
        """Skip the rest of the wait before the next attempt."""
        self._wake.set()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _state(self, state: Any, seq: Any) -> None:
        if not isinstance(state, dict):
            return
        view = HeadView.parse(state, seq if isinstance(seq, int) else 0)
        self.view = view
        self._post(HeadState(view))

    def _push(self, push: dict[str, Any]) -> None:
        kind = push.get("push")
        if kind == "state":
            self._state(push.get("state"), push.get("seq"))
        elif kind == "force-free":
            self._post(HeadForceFreeStep(push.get("step")))
        elif kind == "notice":
            self._notice(push.get("notice"))

    def _notice(self, notice: Any) -> None:
        if isinstance(notice, dict):
            job_id, claim_id = notice.get("job_id"), notice.get("claim_id")
            self._post(
                HeadNotice(
                    kind=clean(notice.get("kind", ""), 32),
                    text=clean(notice.get("text", ""), 512),
                    job_id=job_id if isinstance(job_id, int) else None,
                    claim_id=claim_id if isinstance(claim_id, int) else None,
                )
            )

    # -- requests -----------------------------------------------------------------

    def lacks(self, needs: Iterable[str]) -> str | None:
        """One line saying the first of ``needs`` the scheduler connected now cannot do;
        None when it can do them all (or nothing is connected: ``ask`` says that)."""
        session = self._session
        if session is None:
            return None
        try:
            require(session.backend, needs)
        except Unsupported as exc:
            return exc.message
        return None

    async def ask(self, op: str, request: Callable[[AsyncBackend], Awaitable[Answer]]) -> Answer:
        """``request`` asked of the scheduler connected now (``op``: the capability it
        uses): its answer, or ``HeadError`` saying why not. Nothing is sent when the
        head is away or the scheduler lacks ``op``."""
        session = self._session
        if session is None or self.reason is not None:
            raise HeadError("unreachable", f"head unreachable ({self.reason or 'not connected'})")
        require(session.backend, (op,))
        try:
            return await request(session.backend)
        except HeadError as exc:
            if exc.code == "unreachable" and op not in _READ_ONLY:
                # The answer was lost with the connection: the head may have acted.
                raise HeadError(
                    "unreachable",
                    f"lost the head while asking {op}; it may or may not have been done"
                    " (look again once it is back)",
                ) from None
            raise

    # -- connecting ----------------------------------------------------------------

    async def _open(self) -> LinkSession:
        if self._opener is not None:
            return await self._opener()
        assert self.head is not None  # without a head there is always an opener
        if is_local(self.head):
            path = self._socket
            try:
                return LinkSession(await AsyncHeadClient.open_local(path), local=True)
            except HeadError as exc:
                if len(self.head.hosts) > 1:  # a leader gone from here: the other head
                    return await self._open_ssh()
                # "head unreachable at PATH: why" -> "why (PATH)": the bar says the rest,
                # and the reason comes before a long path that may be cut.
                why = exc.message.removeprefix(f"head unreachable at {path}: ")
                raise HeadError(exc.code, f"{why} ({path})") from None
        return await self._open_ssh()

    async def _open_ssh(self) -> LinkSession:
        """The head's socket through an SSH connection to its host (``headssh``)."""
        reader, writer, closer = await open_head_ssh(self.config)
        client = AsyncHeadClient(reader, writer)
        client.start()
        return LinkSession(client, local=False, closer=closer)

    @staticmethod
    def _describe(exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        return clean(f"{type(exc).__name__}: {text}" if not str(exc) else text, 300)
