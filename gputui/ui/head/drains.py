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

from gputui.ui.gpu_view import GpuRow, Row
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.model import ClusterModel
from gputui.ui.screens.confirm import ReasonScreen


class DrainActions:
    """``D`` on the main screen: ask for a reason, then ask the head."""

    def __init__(self, app: App[None], asks: HeadRequests, model: ClusterModel) -> None:
        self.app = app
        self.asks = asks
        self.model = model

    def drain_row(self, row: Row | None) -> None:
        asks = self.asks
        link = asks.usable("drain")
        if link is None:
            return
        if row is None:
            asks.refuse("drain", "select a GPU (or a host) first")
            return
        states = self.model.head_states
        if isinstance(row, GpuRow):
            gpu = self.model.gpu(row)
            target, what = f"{row.host}:{row.index}", f"{row.host} GPU {row.index}"
            drained = gpu is not None and states.get(gpu.uuid) == "drained"
        else:
            entry = self.model.hosts.get(row.host)
            uuids = [g.uuid for g in entry.gpus.values()] if entry is not None else []
            target, what = row.host, f"host {row.host}"
            drained = bool(uuids) and all(states.get(u) == "drained" for u in uuids)
        op = "undrain" if drained else "drain"
        if not asks.able(link, lambda why: asks.refuse(op, why), op):
            return
        question = Text(f"{op.capitalize()} {what}?\n", "bold")
        question.append(
            "It takes new claims and jobs again."
            if drained
            else "It takes no new claim or job; what runs there finishes."
        )

        def answered(reason: str | None) -> None:
            if reason:
                asks.request(f"{op} {what}", self._send(link, op, what, target, reason))

        self.app.push_screen(ReasonScreen(question, op.capitalize()), answered)

    async def _send(self, link: HeadLink, op: str, what: str, target: str, reason: str) -> None:
        undrain = op == "undrain"
        result = await self.asks.call(
            link,
            f"{op} {what}",
            op,
            lambda b: (b.undrain if undrain else b.drain)(target, reason=reason),
        )
        if result is not None:
            outcome = result.get("outcome") if isinstance(result, dict) else None
            text = (
                f"{what}: {outcome}" if isinstance(outcome, str) and outcome else f"{what}: {op}ed"
            )
            self.app.notify(text, title=op, timeout=6, markup=False)
