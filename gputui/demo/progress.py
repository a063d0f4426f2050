"""What the demo prints while it starts, before the console opens: the head, then
each host (connecting, ready), then the one line that points the CLI at the head.

A ``Report`` is any ``(subject, state, detail)`` callable; ``StartLines`` writes one
line per change. A big demo (more than ``MANY`` hosts) gets a count instead of a
line per host, at each quarter of the way and at the end.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from gputui.common.i18n import N_, _, ngettext
from gputui.common.text import cells, clean, fit

Report = Callable[[str, str, str], None]
"""``report(subject, state, detail)``: subject a host's name or ``head``."""

STATES = {"starting": N_("starting"), "connecting": N_("connecting"), "ready": N_("ready")}
"""The states a start line shows, in the reader's language where drawn."""
SUBJECTS = {"head": N_("head"), "hosts": N_("hosts")}
"""The subjects that are no host's name: the demo's head, and the hosts counted."""
STATE_W = 10
"""The state column's width in cells (``connecting``)."""

MANY = 16
SOCKET_ENV = "GPUTUI_HEAD_SOCKET"


def export_line(socket: Path | str) -> str:
    """The one line that points the CLI, in a shell, at the demo's head."""
    return f"export {SOCKET_ENV}={shlex.quote(str(socket))}"


class StartLines:
    """Writes the demo's start to ``out``, one line per host and state."""

    def __init__(self, out: TextIO, hosts: Sequence[str]) -> None:
        self.out = out
        self.hosts = list(hosts)
        self.many = len(self.hosts) > MANY
        self.width = max([cells(_(SUBJECTS["head"])), *(cells(h) for h in self.hosts)])
        if self.many:
            self.width = max(5, cells(_(SUBJECTS["hosts"])), cells(_(SUBJECTS["head"])))
        self.ready: set[str] = set()
        self._connecting_said = False
        self._quarter = 0

    def __call__(self, subject: str, state: str, detail: str = "") -> None:
        if subject in self.hosts:
            if state == "ready":
                self.ready.add(subject)
            if self.many:
                self._count(state)
                return
        self._line(subject, state, detail)

    def _count(self, state: str) -> None:
        total = len(self.hosts)
        if state == "connecting":
            if not self._connecting_said:
                self._connecting_said = True
                self._line(
                    "hosts", "connecting", ngettext("{n} host", "{n} hosts", total).format(n=total)
                )
            return
        quarter = 4 * len(self.ready) // total
        if quarter > self._quarter:
            self._quarter = quarter
            state = "ready" if quarter == 4 else "connecting"
            self._line(
                "hosts",
                state,
                _("{ready}/{total} ready").format(ready=len(self.ready), total=total),
            )

    def _line(self, subject: str, state: str, detail: str) -> None:
        said = _(SUBJECTS[subject]) if subject in SUBJECTS else clean(subject, 64)
        shown = _(STATES[state]) if state in STATES else clean(state, 20)
        width = max(STATE_W, *(cells(_(s)) for s in STATES.values()))
        first = fit(said, max(self.width, cells(said)))
        text = f"  {first}  {fit(shown, width)}  {clean(detail, 200)}"
        print(text.rstrip(), file=self.out, flush=True)
