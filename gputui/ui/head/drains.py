"""The console's drain key (``D``): drain or undrain a GPU or a host.

On a GPU row it drains that GPU, on a host row the whole host; on a card (or a host
whose every card) that is drained already it undrains. It asks for a reason (the
head audits it) and sends ``drain`` or ``undrain``; the head refuses anyone who is
not an admin, and the console shows the refusal in the head's words. A drained card
takes no new claim or job; what runs there finishes.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App

from gputui.common.i18n import N_, _
from gputui.common.text import clean
from gputui.ui.gpu_view import GpuRow, Row
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.model import ClusterModel
from gputui.ui.screens.confirm import ReasonScreen
from gputui.wire.words import told_text


class DrainActions:
    """``D`` on the main screen: ask for a reason, then ask the head."""

    def __init__(self, app: App[None], asks: HeadRequests, model: ClusterModel) -> None:
        self.app = app
        self.asks = asks
        self.model = model

    def drain_row(self, row: Row | None) -> None:
        asks = self.asks
        link = asks.usable(N_("drain"))
        if link is None:
            return
        if row is None:
            asks.refuse(N_("drain"), _("select a GPU (or a host) first"))
            return
        states = self.model.head_states
        if isinstance(row, GpuRow):
            gpu = self.model.gpu(row)
            target = f"{row.host}:{row.index}"
            what = _("{host} GPU {index}").format(host=row.host, index=row.index)
            drained = gpu is not None and states.get(gpu.uuid) == "drained"
        else:
            entry = self.model.hosts.get(row.host)
            uuids = [g.uuid for g in entry.gpus.values()] if entry is not None else []
            target, what = row.host, _("host {host}").format(host=row.host)
            drained = bool(uuids) and all(states.get(u) == "drained" for u in uuids)
        op = "undrain" if drained else "drain"
        if not asks.able(link, lambda why: asks.refuse(_(op), why), op):
            return
        if drained:
            asked = _("Undrain {what}?").format(what=what)
            then = _("It takes new claims and jobs again.")
        else:
            asked = _("Drain {what}?").format(what=what)
            then = _("It takes no new claim or job; what runs there finishes.")
        question = Text(asked + "\n", "bold")
        question.append(then)

        def answered(reason: str | None) -> None:
            if reason:
                asks.request(_doing(op, what), self._send(link, op, what, target, reason))

        label = _("Undrain") if drained else _("Drain")
        self.app.push_screen(ReasonScreen(question, label), answered)

    async def _send(self, link: HeadLink, op: str, what: str, target: str, reason: str) -> None:
        undrain = op == "undrain"
        result = await self.asks.call(
            link,
            _doing(op, what),
            op,
            lambda b: (b.undrain if undrain else b.drain)(target, reason=reason),
        )
        if result is not None:
            outcome = told_text(result, "outcome")
            if outcome:
                text = _("{what}: {outcome}").format(what=what, outcome=clean(outcome, 300))
            elif op == "undrain":
                text = _("{what}: undrained").format(what=what)
            else:
                text = _("{what}: drained").format(what=what)
            self.app.notify(text, title=_(op), timeout=6, markup=False)


def _doing(op: str, what: str) -> str:
    """``drain gpu01 GPU 0`` (or ``undrain …``), in the reader's language."""
    if op == "undrain":
        return _("undrain {what}").format(what=what)
    return _("drain {what}").format(what=what)
