"""``PtyLine``: one interactive job's terminal, attached through its host's helper.

The helper forwards between its session and the job's supervisor (``remote.ptyops``);
this end registers a listener for the attachment's ``pty`` messages on the host's
feed before it asks to attach (output may come before the answer), and writes input,
window sizes and acknowledgements as requests whose answers nobody waits for: they
go out in order, and a failure shows as the attachment's ``closed`` message.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable

from gputui.fleet.link import HostLink
from gputui.fleet.session import HelperSession
from gputui.telemetry import RequestOutcome
from gputui.wire.messages import Pty
from gputui.wire.ops import (
    PtyCloseRequest,
    PtyOpenRequest,
    PtyOpenResult,
    PtySendRequest,
)

PtyListener = Callable[[Pty], None]
_AIDS = itertools.count(1)


class PtyLine:
    """An open attachment: what to send on, and how to let go."""

    def __init__(self, link: HostLink, session: HelperSession, aid: int) -> None:
        self.link = link
        self.session = session
        self.aid = aid
        self.closed = False

    def send(
        self,
        data: str | None = None,
        *,
        rows: int | None = None,
        cols: int | None = None,
        ack: int | None = None,
    ) -> bool:
        """Input (base64), a size, an acknowledgement; False once the line is gone."""
        if self.closed or self.link.session is not self.session:
            return False
        request = PtySendRequest(aid=self.aid, data=data, rows=rows, cols=cols, ack=ack)
        try:
            self.session.send(request.line(self.session.next_id()))
        except Exception:  # a transport that closed under us: gone, said once
            return False
        return True

    def close(self) -> None:
        """Detach (the job goes on); no more messages come to the listener."""
        if self.closed:
            return
        self.closed = True
        self.link.feed.terminals.pop(self.aid, None)
        if self.link.session is self.session:
            with contextlib.suppress(Exception):  # gone: the helper let go with its session
                self.session.send(PtyCloseRequest(aid=self.aid).line(self.session.next_id()))


async def open_pty(
    link: HostLink,
    ns: str,
    *,
    job_id: int,
    rows: int,
    cols: int,
    listener: PtyListener,
) -> tuple[RequestOutcome[PtyOpenResult], PtyLine | None]:
    """Attach to job ``job_id``'s terminal on ``link``'s host: the line, or why not."""
    session = link.session
    aid = next(_AIDS)
    link.feed.terminals[aid] = listener
    request = PtyOpenRequest(ns=ns, job_id=job_id, aid=aid, rows=rows, cols=cols)
    outcome = await link.request(request)
    if not outcome.ok or session is None or link.session is not session:
        link.feed.terminals.pop(aid, None)
        if outcome.ok and session is not None:  # attached on a session now gone
            return RequestOutcome(False, f"lost the connection to {link.name}", "lost"), None
        return outcome, None
    return outcome, PtyLine(link, session, aid)
