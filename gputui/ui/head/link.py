"""``HeadLink``: the console's scheduler side of its connection to the head, owned by the app.

It runs in an app worker, a part of the console's one connection to the head
(``channel.HeadChannel``: the local socket when ``head.socket`` is on this machine,
else through SSH to ``head.host`` and its socket there; the telemetry source rides
it too): subscribe on each connection, and post what the head says as small
messages (``HeadState``, ``HeadNotice``); when the head cannot be reached or the
connection drops, post ``HeadUnreachable`` with the reason (the channel tries again
with a growing wait, and this subscribes again on the new connection). Each
connection is asked through its ``SchedulerBackend`` (``LinkSession.backend``):
requests (claim, submit, ...) go through ``ask``, which fails at once with a
``HeadError`` saying why while the head is away, or when the scheduler lacks the
capability (``lacks`` says so before anything is sent): no request waits silently
or is dropped without a word. No widget does any of this; they get the messages.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from textual.message import Message

from gputui.common.i18n import _
from gputui.common.text import clean
from gputui.config.models import Config
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.backend import Answer, AsyncBackend, Unsupported, require
from gputui.scheduler.client.channel import BACKOFF_CAP_S, BACKOFF_FIRST_S, HeadChannel
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.head_backend import console_backend
from gputui.scheduler.client.ssh import is_local
from gputui.ui.head.view import HeadView
from gputui.wire.words import shown

log = logging.getLogger(__name__)

SUBSCRIBE_TIMEOUT_S = 15.0
_READ_ONLY = ("show", "logs", "queue", "claims", "env", "usage", "report", "bookings", "estimates")
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
    """The head tells this user something happened: a job started, ended, was preempted.
    ``text`` in the user's language where the head sent its words, ``english`` as the
    head wrote it."""

    kind: str
    text: str
    job_id: int | None = None
    claim_id: int | None = None
    english: str = ""


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

    @property
    def closed_reason(self) -> str | None:
        return self.client.closed_reason

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
        channel: HeadChannel[AsyncHeadClient] | None = None,
        backoff_first: float = BACKOFF_FIRST_S,
        backoff_cap: float = BACKOFF_CAP_S,
        where: str | None = None,
    ) -> None:
        """``opener`` and ``where`` (what the status line names) for a scheduler that is
        not a head (Slurm); else the head of hosts.yaml's ``head:`` section, over
        ``channel`` (the console's connection, shared with its telemetry source; one
        of its own, with that backoff, when not given)."""
        if config.head is None and opener is None:
            raise ValueError(_("hosts.yaml has no head: section"))
        self.config = config
        self.head = config.head
        self._where = where
        self._post = post
        self._channel: HeadChannel[AsyncHeadClient] | HeadChannel[LinkSession]
        if opener is not None:
            self._channel = HeadChannel(
                opener, backoff_first=backoff_first, backoff_cap=backoff_cap
            )
        else:
            self._channel = channel or HeadChannel.to_head(
                config, backoff_first=backoff_first, backoff_cap=backoff_cap
            )
        self._session: LinkSession | None = None
        self.reason: str | None = _("connecting to the head")
        """Why requests cannot be sent now; None while connected."""
        self.view: HeadView | None = None
        """The newest state the head pushed."""

    @property
    def connected(self) -> bool:
        return self._session is not None and self.reason is None

    def where(self) -> str:
        if self._where is not None or self.head is None:
            return self._where or _("the scheduler")
        if is_local(self.head):
            return str(Path(self.head.socket).expanduser())
        return f"{','.join(self.head.hosts)}:{self.head.socket}"

    # -- the worker ---------------------------------------------------------------

    async def run(self) -> None:
        """Subscribe on each connection the channel brings, relay what comes; runs
        until cancelled."""
        try:
            await self._channel.serve(self)
        finally:
            self._session = None
            self.reason = _("closed")

    async def follow(self, conn: AsyncHeadClient | LinkSession, ready: Callable[[], None]) -> None:
        """One connection: subscribe, relay its pushes until it ends."""
        session = conn if isinstance(conn, LinkSession) else LinkSession(conn, local=conn.local)
        try:
            backend = session.backend
            require(backend, ("subscribe",))
            first = await backend.subscribe(timeout=SUBSCRIBE_TIMEOUT_S)
            self._session, self.reason = session, None
            ready()
            self._state(first.get("state"), first.get("seq"))
            told = first.get("notices")  # what the head kept while we were away
            for notice in told if isinstance(told, list) else []:
                self._notice(notice)
            async for push in backend.pushes():
                self._push(push)
        finally:
            self._session = None

    def away(self, why: str) -> None:
        self.reason = clean(why, 300)
        self._post(HeadUnreachable(self.reason))

    def retry_now(self) -> None:
        """Skip the rest of the wait before the next attempt."""
        self._channel.retry_now()

    async def close(self) -> None:
        """Nothing to do: the worker running ``run`` ends the link when cancelled."""

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
            english = clean(notice.get("text", ""), 512)
            self._post(
                HeadNotice(
                    kind=clean(notice.get("kind", ""), 32),
                    text=clean(shown(english, notice.get("msg"), notice.get("args")), 512),
                    job_id=job_id if isinstance(job_id, int) else None,
                    claim_id=claim_id if isinstance(claim_id, int) else None,
                    english=english,
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
            why = self.reason or _("not connected")
            raise HeadError("unreachable", _("head unreachable ({why})").format(why=why))
        require(session.backend, (op,))
        try:
            return await request(session.backend)
        except HeadError as exc:
            if exc.code == "unreachable" and op not in _READ_ONLY:
                # The answer was lost with the connection: the head may have acted.
                raise HeadError(
                    "unreachable",
                    _(
                        "lost the head while asking {op}; it may or may not have been done"
                        " (look again once it is back)"
                    ).format(op=op),
                ) from None
            raise
