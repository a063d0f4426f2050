"""Consoles attached to interactive jobs' terminals (``attach``, ``pty_in``, ``detach``).

The head only forwards bytes: between a client's connection and the job's terminal,
kept by its supervisor on the GPU host and reached through the head's helper session
there (``HostOps.open_pty``). It never runs a shell of its own. Who may attach is
decided here, from the connection's ``SO_PEERCRED`` identity: the job's owner, or an
admin. One terminal per connection.

Output is pushed as ``{"push": "pty", "job": N, "kind": "out", "at": OFFSET,
"data": BASE64}``; the client acknowledges what it has shown (``pty_in`` with
``ack``), and the supervisor sends no more than a window past that, so a slow client
makes nothing pile up anywhere (it misses what the job's ring overwrote meanwhile,
and is told how much: ``skipped``). A connection that still leaves more than
``UNSENT_MAX`` unread is detached all the same. ``kind: end`` carries the job's exit
(``exit_code``, ``signal``, ``why``: ``time`` or ``idle`` when a limit ended it);
``kind: closed`` says the attachment ended while the job goes on (``why``).

``pty_in`` is not answered unless it fails: keystrokes need no reply each.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.head import actions
from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.forcefree import TxFn
from gputui.scheduler.head.hostops import HostOps, TerminalLine
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.read_args import AttachArgs, PtyInArgs
from gputui.scheduler.store.api import Store, Tx
from gputui.wire.messages import Pty
from gputui.wire.words import say

log = logging.getLogger(__name__)

UNSENT_MAX = 1 << 18
"""Bytes a connection may leave unread before its terminal is detached (the window
keeps it far below this unless the host misbehaves)."""


class Attached:
    """One connection's terminal: where its pushes go."""

    def __init__(self, conn: Connection, job_id: int) -> None:
        self.conn = conn
        self.job_id = job_id
        self.line: TerminalLine | None = None
        self.ended = False

    def on_message(self, message: Pty) -> None:
        """A ``pty`` message from the host (in the helper session's line handler)."""
        if self.ended:
            return
        push: dict[str, Any] = {"push": "pty", "job": self.job_id, "kind": message.kind}
        if message.kind == "out":
            push["at"] = message.at
            push["data"] = message.data
            if message.skipped:
                push["skipped"] = message.skipped
        else:
            self.ended = True
            push["exit_code"] = message.exit_code
            push["signal"] = message.signal
            push["why"] = message.why
        if message.kind == "out" and self.conn.unsent() > UNSENT_MAX:
            self.ended = True
            push = {"push": "pty", "job": self.job_id, "kind": "closed", "why": "client too slow"}
            if self.line is not None:
                self.line.close()
        self.conn.send(push)

    def close(self) -> None:
        self.ended = True
        if self.line is not None:
            self.line.close()


class Terminals:
    """Every attached terminal, by connection."""

    def __init__(
        self,
        store: Store,
        hosts: HostOps,
        read: Callable[[Callable[[], Any]], Awaitable[Any]],
        call_tx: Callable[[TxFn], Awaitable[Any]],
    ) -> None:
        self.store = store
        self.hosts = hosts
        self._read = read
        self.call_tx = call_tx
        self._attached: dict[Connection, Attached] = {}

    def __len__(self) -> int:
        return len(self._attached)

    async def attach(self, conn: Connection, request: wire.Request) -> None:
        args: AttachArgs = request.args
        current = self._attached.get(conn)
        if current is not None and not current.ended:
            conn.send(
                wire.error(
                    request.id,
                    "busy",
                    say(N_("attached to job {job_id} already"), job_id=current.job_id),
                )
            )
            return

        caller = conn.caller

        def target() -> tuple[str | None, int, str, bool, Owner]:
            with self.store.snapshot() as tx:
                job = tx.job(args.job_id)
                if job is None:
                    raise wire.Refusal("unknown-job", say(N_("no job {job}"), job=args.job_id))
                if not (caller.owns(job.uid) or caller.admin):
                    raise wire.Refusal(
                        "denied",
                        say(N_("job {id} belongs to {user}"), id=job.id or 0, user=job.user),
                    )
                key = actions.run_key(job.id or 0, job.launches)
                owner = Owner(job.id or 0, job.uid, job.user)
                return job.host, key, job.state, job.interactive, owner

        try:
            host, key, state, interactive, owner = await self._read(target)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        except Exception as exc:  # the store failed: say so, never leave the caller waiting
            log.error("head: attach lookup failed: %s", exc)
            conn.send(wire.error(request.id, "store", say(N_("could not read the job"))))
            return
        job_id = args.job_id
        if not interactive:
            why = say(
                N_("job {job} has no terminal (only jobs started with gputui run --pty have)"),
                job=job_id,
            )
            conn.send(wire.error(request.id, "no-terminal", why))
            return
        if state != "running" or host is None:
            conn.send(
                wire.error(
                    request.id,
                    "not-running",
                    say(N_("job {job_id} is {state}"), job_id=job_id, state=state),
                )
            )
            return
        if not caller.owns(owner.uid):  # an admin at another's terminal: on the record first
            try:
                await self.call_tx(_audit(caller, owner))
            except wire.Refusal as refusal:
                conn.send(wire.refused(request.id, refusal))
                return
        attached = Attached(conn, job_id)
        self._attached[conn] = attached
        answer, line = await self.hosts.open_pty(
            host, key, args.rows, args.cols, attached.on_message
        )
        if line is None or conn.closed:
            if line is not None:
                line.close()
            if self._attached.get(conn) is attached:
                del self._attached[conn]
            conn.send(wire.error(request.id, answer.code or "host", answer.message))
            return
        attached.line = line
        conn.send(wire.response(request.id, {"attached": job_id, "host": host}))

    def write(self, conn: Connection, request: wire.Request) -> None:
        args: PtyInArgs = request.args
        attached = self._attached.get(conn)
        if attached is None or attached.line is None or attached.ended:
            conn.send(
                wire.error(request.id, "not-attached", say(N_("no terminal is attached here")))
            )
            return
        sent = attached.line.send(args.data, rows=args.rows, cols=args.cols, ack=args.ack)
        if not sent:
            attached.ended = True
            conn.send(wire.error(request.id, "not-attached", say(N_("the job's terminal is gone"))))

    def detach(self, conn: Connection, request: wire.Request) -> None:
        attached = self._attached.pop(conn, None)
        if attached is not None:
            attached.close()
        conn.send(wire.response(request.id, {"detached": attached is not None}))

    def dropped(self, conn: Connection) -> None:
        """The connection is gone: its terminal is let go (the job goes on)."""
        attached = self._attached.pop(conn, None)
        if attached is not None:
            attached.close()


ACTION = "attach"


@dataclass(frozen=True, slots=True)
class Owner:
    """A job and whose it is, as read for an attach."""

    job_id: int
    uid: int
    user: str


def _audit(caller: Caller, job: Owner) -> TxFn:
    """An admin attaching to another's terminal: audited, and its owner told."""

    def write(tx: Tx, ctx: Context) -> None:
        target = f"job {job.job_id}"
        row = actions.audited(
            tx, ctx, caller, ACTION, target=target, owner=job.user, reason="gputui attach"
        )
        row.outcome = "attached to its terminal"
        text = say(
            N_("job {id}: {admin} (admin) attached to its terminal"),
            id=job.job_id,
            admin=caller.user,
        )
        actions.notice(tx, ctx, job.uid, "admin", text, job_id=job.job_id)

    return write
