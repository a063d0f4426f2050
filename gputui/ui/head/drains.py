"""The console's drain (``D``) and force-free (``F``) keys, mixed into the app.

``F`` on a GPU asks why, then opens ``ForceFreeScreen`` and asks the head to
``force_free`` the card; the steps the head pushes as they end go to the modal, then
the verdict. Admins only (the head refuses anyone else, and the console says so
first when the head has told it who this user is).

``D``: drain or undrain a GPU or a host.

On a GPU row it drains that GPU, on a host row the whole host; on a card (or a host
whose every card) that is drained already it undrains. It asks for a reason (the
head audits it) and sends ``drain`` or ``undrain``; the head refuses anyone who is
not an admin, and the console shows the refusal in the head's words. A drained card
takes no new claim or job; what runs there finishes.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from gputui.scheduler.client import HeadError
from gputui.ui.gpu_view import GpuRow, Row
from gputui.ui.head.audit import AuditActions
from gputui.ui.head.link import HeadForceFreeStep, HeadLink
from gputui.ui.screens.confirm import ReasonScreen
from gputui.ui.screens.forcefree import ForceFreeScreen

FORCE_FREE_TIMEOUT_S = 900.0
"""A run waits a grace period and a sample or two; a reset can take minutes."""


class DrainActions(AuditActions):
    """The drain part of ``GpuTuiApp`` (a mixin, under ``HeadActions``)."""

    def drain_row(self, row: Row | None) -> None:
        link = self._link("drain")
        if link is None:
            return
        if row is None:
            self._refuse("drain", "select a GPU (or a host) first")
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
        question = Text(f"{op.capitalize()} {what}?\n", "bold")
        question.append(
            "It takes new claims and jobs again."
            if drained
            else "It takes no new claim or job; what runs there finishes."
        )

        def answered(reason: str | None) -> None:
            if reason:
                args = {"target": target, "reason": reason}
                self._request(f"{op} {what}", self._send_drain(link, op, what, args))

        self.push_screen(ReasonScreen(question, op.capitalize()), answered)

    async def _send_drain(self, link: HeadLink, op: str, what: str, args: dict[str, Any]) -> None:
        result = await self._call(link, f"{op} {what}", op, args)
        if result is not None:
            outcome = result.get("outcome") if isinstance(result, dict) else None
            text = (
                f"{what}: {outcome}" if isinstance(outcome, str) and outcome else f"{what}: {op}ed"
            )
            self.notify(text, title=op, timeout=6, markup=False)

    # -- force-free ------------------------------------------------------------------

    _force_free_screen: ForceFreeScreen | None = None

    def force_free_row(self, row: Row | None) -> None:
        link = self._link("force-free")
        if link is None:
            return
        if not isinstance(row, GpuRow):
            self._refuse("force-free", "select a GPU first")
            return
        view = link.view
        refused = view.me.refused("force-free a GPU") if view is not None else None
        if refused:
            self._refuse("force-free", refused)
            return
        what = f"{row.host} GPU {row.index}"
        question = Text(f"Force-free {what}?\n", "bold")
        question.append(
            "It drains the card, kills its jobs, releases its claims, SIGTERMs then"
            " SIGKILLs every process on it, and checks that the memory came back."
        )

        def answered(reason: str | None) -> None:
            if not reason:
                return
            screen = ForceFreeScreen(what, reason)
            self._force_free_screen = screen
            self.push_screen(screen)
            args = {"host": row.host, "gpu": str(row.index), "reason": reason}
            self._request(f"force-free {what}", self._send_force_free(link, screen, args))

        self.push_screen(ReasonScreen(question, "Force-free"), answered)

    async def _send_force_free(
        self, link: HeadLink, screen: ForceFreeScreen, args: dict[str, Any]
    ) -> None:
        try:
            answer = await link.call("force_free", args, timeout=FORCE_FREE_TIMEOUT_S)
        except HeadError as exc:
            screen.done(None, exc.message)
            return
        finally:
            if self._force_free_screen is screen:
                self._force_free_screen = None
        screen.done(answer)

    def on_head_force_free_step(self, message: HeadForceFreeStep) -> None:
        screen = self._force_free_screen
        if screen is not None:
            screen.step(message.step)
