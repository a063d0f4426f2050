"""The seam between the scheduler and its callers: ``SchedulerBackend``.

The CLI and the console reach scheduling only through this interface: list the
queue and the claims, submit, act on jobs, claim and release GPUs, drain, explain,
count usage, subscribe to the state. One implementation today, the head
(``head_backend.HeadBackend``); a second (Slurm) implements the same methods.

Answers have the shape of the head's wire (``gputui.scheduler.server.wire``): every backend
answers in it, so what the CLI prints and what the console shows do not depend on
the backend. One protocol serves both kinds of caller: ``R_co`` is what a request
returns (an answer, or an awaitable of one for the console) and ``P_co`` what
``pushes`` returns (an iterator, or an async iterator).

A backend that lacks a capability says so in one line (``Unsupported``) before
anything is asked: a caller checks every capability it will use first (``require``),
so nothing fails half-way (a ``gputui run`` never claims GPUs it could not release).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from gputui.common.i18n import N_, _
from gputui.scheduler.client.errors import HeadError

if TYPE_CHECKING:
    import socket

    from gputui.common.jobenv import JobSetup
    from gputui.scheduler.client.terminal import TerminalLink

Answer = dict[str, Any]
"""An answer, in the head's wire shape."""

R_co = TypeVar("R_co", covariant=True)
P_co = TypeVar("P_co", covariant=True)

ANSWER_WITHIN_S: Final = 30.0
"""How long a request waits for its answer unless its caller says otherwise."""

CAPABILITIES: Final[dict[str, str]] = {
    "queue": N_("list the queue"),
    "claims": N_("list claims"),
    "submit": N_("queue a job"),
    "cancel": N_("cancel a job"),
    "kill": N_("kill a job"),
    "preempt": N_("preempt a job"),
    "hold": N_("hold a job"),
    "release_hold": N_("release a held job"),
    "requeue": N_("requeue a job"),
    "show": N_("show a job"),
    "logs": N_("show a job's output"),
    "wait": N_("wait for a job"),
    "explain": N_("explain why a job waits"),
    "estimates": N_("estimate when waiting jobs start"),
    "claim": N_("claim GPUs"),
    "release": N_("release GPUs"),
    "env": N_("name a claim's GPUs"),
    "hosts": N_("list its hosts"),
    "hold_claim": N_("hold a claim for one process's life"),
    "resume_claim": N_("take a claim back after a reconnect"),
    "quota": N_("count quotas"),
    "usage": N_("count usage"),
    "report": N_("write a usage report"),
    "history": N_("list finished jobs"),
    "drain": N_("drain"),
    "undrain": N_("undrain"),
    "unfence": N_("unfence"),
    "force_free": N_("force a GPU free"),
    "audit": N_("show an audit trail"),
    "whoami": N_("say who you are"),
    "notices": N_("keep notices"),
    "notify_set": N_("send notices to a chat channel"),
    "notify_clear": N_("send notices to a chat channel"),
    "notify_show": N_("send notices to a chat channel"),
    "notify_test": N_("send notices to a chat channel"),
    "health": N_("keep a health board"),
    "health_ack": N_("acknowledge a problem"),
    "gpus": N_("list its GPUs"),
    "incident": N_("keep a host's history"),
    "subscribe": N_("send its state as it changes"),
    "book": N_("book GPUs ahead"),
    "unbook": N_("cancel a booking"),
    "bookings": N_("list bookings"),
    "attach": N_("attach to a job's terminal"),
}
"""Every capability a backend may have (a method of ``SchedulerBackend`` each), and
how the line that says a backend lacks it words it."""


class Unsupported(HeadError):
    """What a backend cannot do, said in one line (code ``unsupported``)."""

    def __init__(self, backend: str, capability: str) -> None:
        known = CAPABILITIES.get(capability)
        what = _(known) if known is not None else capability.replace("_", " ")
        super().__init__(
            "unsupported",
            _("the {backend} scheduler cannot {what}").format(backend=backend, what=what),
        )
        self.capability = capability


class Capable(Protocol):
    @property
    def name(self) -> str: ...
    def supports(self, capability: str) -> bool: ...


def require(backend: Capable, needs: Iterable[str]) -> None:
    """``Unsupported`` for the first of ``needs`` that ``backend`` lacks, before any
    request is sent."""
    for capability in needs:
        if not backend.supports(capability):
            raise Unsupported(backend.name, capability)


class SchedulerBackend(Capable, Protocol[R_co, P_co]):
    """Everything the CLI and the console ask of a scheduler.

    ``timeout``: seconds to wait for the answer (None: no bound). Optional values
    left at None are not sent, so the scheduler's own defaults apply.
    """

    @property
    def local(self) -> bool:
        """Whether the scheduler runs on this machine (the name of this host is then
        the one it knows it by)."""
        ...

    # -- the queue ----------------------------------------------------------------------

    def queue(
        self,
        *,
        all: bool = False,
        user: str | None = None,
        limit: int | None = None,
        after: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def submit(
        self,
        *,
        argv: Sequence[str],
        gpus: int = 1,
        cwd: str | None = None,
        preemptible: bool = False,
        pool: str | None = None,
        host: str | None = None,
        name: str | None = None,
        time_limit_s: float | None = None,
        priority: str | None = None,
        project: str | None = None,
        after: Sequence[int] | None = None,
        after_ok: bool = False,
        setup: JobSetup | None = None,
        array: str | None = None,
        script: str | None = None,
        output: str | None = None,
        booking: int | None = None,
        mig: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def cancel(
        self,
        job_id: int,
        *,
        reason: str | None = None,
        task: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def kill(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def preempt(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def hold(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def release_hold(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def requeue(
        self,
        job_id: int,
        *,
        reason: str | None = None,
        force: bool = False,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def show(self, job_id: int, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...
    def logs(
        self,
        job_id: int,
        *,
        offset: int = 0,
        max_bytes: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def wait(self, job_id: int, *, timeout: float | None = None) -> R_co:
        """Until the job ends (no bound by default)."""
        ...

    def explain(self, job_id: int, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...
    def estimates(self, *, limit: int = 100, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...

    # -- claims ------------------------------------------------------------------------

    def claims(
        self,
        *,
        all: bool = False,
        user: str | None = None,
        limit: int | None = None,
        after: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def claim(
        self,
        *,
        gpus: int | None = None,
        gpu_refs: Sequence[str] = (),
        pool: str | None = None,
        model: str | None = None,
        host: str | None = None,
        project: str | None = None,
        duration_s: float | None = None,
        note: str = "",
        wait: bool = True,
        mig: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def release(
        self,
        *,
        claim_ids: Sequence[int] = (),
        gpu_refs: Sequence[str] = (),
        all: bool = False,
        reason: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def env(self, host: str | None = None, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...
    def book(
        self,
        *,
        start: float,
        duration_s: float,
        gpus: int | None = None,
        gpu_refs: Sequence[str] = (),
        pool: str | None = None,
        model: str | None = None,
        host: str | None = None,
        note: str = "",
        maint: bool = False,
        reason: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def unbook(
        self,
        booking_id: int,
        *,
        reason: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def bookings(
        self,
        *,
        all: bool = False,
        since: float | None = None,
        until: float | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def hosts(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...

    # -- accounting --------------------------------------------------------------------

    def quota(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...
    def usage(
        self,
        *,
        since: float,
        until: float,
        by: str = "user",
        hourly: bool = False,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def report(
        self, *, since: float, until: float, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def history(
        self,
        *,
        since: float,
        until: float,
        user: str | None = None,
        all_users: bool = False,
        states: Sequence[str] = (),
        limit: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co:
        """Finished jobs that ended in ``[since, until)``, newest first: the caller's,
        ``user``'s or everyone's, each with its exit, GPU-hours, busy share and energy."""
        ...

    # -- the cards (admins) --------------------------------------------------------------

    def drain(
        self, target: str, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def undrain(
        self, target: str, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def unfence(
        self, target: str, *, reason: str | None = None, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def force_free(
        self,
        *,
        host: str,
        gpu: str,
        reason: str,
        reset: bool = False,
        on_step: Callable[[Any], None] | None = None,
        timeout: float | None = None,
    ) -> R_co:
        """``on_step`` gets each step as it ends, where the transport delivers them
        to this request (no bound on the wait by default)."""
        ...

    # -- records -------------------------------------------------------------------------

    def audit(
        self,
        *,
        since: float | None = None,
        limit: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def whoami(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...
    def notices(self, *, all: bool = False, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...
    def notify_set(
        self,
        url: str,
        *,
        secret: str | None = None,
        events: Sequence[str] | None = None,
        name: str = "default",
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def notify_clear(
        self, name: str | None = None, *, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def notify_show(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co: ...
    def notify_test(
        self, name: str | None = None, *, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def health(
        self, hosts: Sequence[str] | None = None, *, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def health_ack(
        self, key: str, note: str, *, timeout: float | None = ANSWER_WITHIN_S
    ) -> R_co: ...
    def gpus(
        self,
        *,
        pool: str | None = None,
        free: bool = False,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...
    def incident(
        self,
        host: str,
        *,
        since: float,
        gpu: int | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> R_co: ...

    # -- the state as it changes -----------------------------------------------------------

    def subscribe(self, *, timeout: float | None = ANSWER_WITHIN_S) -> R_co:
        """The state now (and the notices kept while away); then ``pushes``."""
        ...

    def pushes(self) -> P_co:
        """After ``subscribe``: every pushed message (state, notice, step), as it comes."""
        ...


SyncBackend = SchedulerBackend[Answer, Iterator[Answer]]
"""A backend for one blocking process (the CLI)."""
AsyncBackend = SchedulerBackend[Awaitable[Answer], AsyncIterator[Answer]]
"""A backend for an asyncio caller (the console)."""


class SessionBackend(SchedulerBackend[Answer, Iterator[Answer]], Protocol):
    """A blocking backend that can hold a claim for as long as one process lives
    (``gputui run``): the claim ends when the connection that made it does."""

    def hold_claim(
        self,
        *,
        gpus: int,
        host: str,
        note: str,
        pool: str | None = None,
        timeout: float | None = ANSWER_WITHIN_S,
    ) -> Answer:
        """Claim GPUs for this connection, waiting in line (never sent again on a new
        connection: a replayed answer would name GPUs being taken back)."""
        ...

    def resume_claim(self, claim_id: int, *, timeout: float | None = ANSWER_WITHIN_S) -> Answer:
        """Take ``claim_id`` back onto a new connection after the old one dropped."""
        ...

    def connection(self) -> socket.socket | None:
        """The open connection, to wait on (None: not connected)."""
        ...

    def next_message(self) -> Answer:
        """The next message on the connection, whatever it is (``HeadError``
        ``unreachable``: the connection is gone)."""
        ...

    def hang_up(self) -> None:
        """Close the connection (the next request opens a new one)."""
        ...

    def attach(self, job_id: int, *, rows: int, cols: int) -> TerminalLink:
        """Interactive job ``job_id``'s terminal, attached on a connection of its own
        (``HeadError`` when the head refuses: not the caller's, not interactive ...)."""
        ...


class Call:
    """One request as a transport sends it (a plain class: a verb's start pays for no
    dataclass machinery)."""

    __slots__ = ("args", "bound", "on_push", "op", "timeout")

    def __init__(
        self,
        op: str,
        args: Answer,
        timeout: float | None = ANSWER_WITHIN_S,
        bound: bool = False,
        on_push: Callable[[Answer], None] | None = None,
    ) -> None:
        self.op = op
        self.args = args
        self.timeout = timeout
        self.bound = bound
        """Bound to the connection it is sent on: never sent again on a new one."""
        self.on_push = on_push
        """Gets each push that belongs to this request (its progress)."""


class Transport(Protocol[R_co, P_co]):
    """How a backend's requests reach its scheduler: ``send`` one, read ``pushes``."""

    def send(self, call: Call) -> R_co: ...
    def pushes(self) -> P_co: ...
