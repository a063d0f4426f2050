"""Claims from the main screen: ``c`` claims the selected GPU (on a host line it asks
how many, in the claim form), ``u`` releases, ``e`` copies the env line; and what a
granted or queued claim says.

Each checks what it can first (a GPU the head does not know, one someone holds, a
claim that is not yours) and says so in one line; the head has the last word and
its refusal is shown in its own words.
"""

from __future__ import annotations

from typing import Any

from textual.app import App

from gputui.common.i18n import N_, _, ngettext
from gputui.common.job_words import reason_text
from gputui.common.text import clean
from gputui.scheduler.client.errors import HeadError
from gputui.ui.clipboard import copy_line
from gputui.ui.gpu_view import GpuRow, HostRow, Row
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.head.view import env_line, holder_ref
from gputui.ui.model import ClusterModel


class ClaimActions:
    """Claim, release and the env line, asked of the head in app workers."""

    def __init__(self, app: App[None], asks: HeadRequests, model: ClusterModel) -> None:
        self.app = app
        self.asks = asks
        self.model = model

    def claim_row(self, row: Row | None) -> None:
        """``c`` on a GPU line: claim that one GPU (a host line opens the claim form,
        which asks how many: ``HeadConsole.key``)."""
        asks = self.asks
        link = asks.usable(N_("claim"), "claim")
        view = asks.view
        if link is None or view is None:
            return
        if not isinstance(row, GpuRow):
            asks.refuse(N_("claim"), _("select a GPU (or a host) first"))
            return
        gpu = self.model.gpu(row)
        if gpu is None or gpu.uuid not in {g.uuid for g in view.gpus}:
            asks.refuse(
                N_("claim"),
                _("the head does not know {host} GPU {index}").format(
                    host=row.host, index=row.index
                ),
            )
            return
        holder = self.model.holders.get(gpu.uuid)
        if holder is not None:
            if holder.user == view.me.user:
                said = _("{host} GPU {index} is held by {holder} (yours); C claims any free GPUs")
            else:
                said = _(
                    "{host} GPU {index} is held by {holder} ({user}'s); C claims any free GPUs"
                )
            asks.refuse(
                N_("claim"),
                said.format(
                    host=row.host, index=row.index, holder=holder_ref(holder), user=holder.user
                ),
            )
            return
        what = _("{host} GPU {index}").format(host=row.host, index=row.index)
        asks.request(_("claim {what}").format(what=what), self._claim(link, what, [gpu.uuid]))

    async def _claim(self, link: HeadLink, what: str, uuids: list[str]) -> None:
        result = await self.asks.call(
            link,
            _("claim {what}").format(what=what),
            "claim",
            lambda b: b.claim(gpu_refs=uuids, wait=False, note=""),
        )
        if result is not None:
            await self.answered(link, what, result.get("claim") or {})

    async def _env_text(self, link: HeadLink, host: str, fallback: list[Any]) -> str:
        """What ``gputui env --host HOST`` prints (every claim of yours there)."""
        try:
            result = await link.ask("env", lambda b: b.env(host or None))
        except HeadError:
            result = {}
        line = env_line(result.get("uuids"))
        return line if line else env_line(fallback)

    async def answered(self, link: HeadLink, what: str, claim: dict[str, Any]) -> None:
        """Say what came of a claim: granted (its env line copied) or waiting in line."""
        if claim.get("state") == "active":
            host = clean(claim.get("host") or "", 64)
            env = await self._env_text(link, host, claim.get("gpu_uuids") or [])
            granted = _("claim {id} granted").format(id=claim.get("id"))
            await self.tell_copied(granted, env, what)
        else:
            reason = reason_text(clean(claim.get("reason") or "", 80))
            self.app.notify(
                _("claim {id} waits in line ({reason})").format(id=claim.get("id"), reason=reason),
                title=_("claim queued"),
                timeout=8,
                markup=False,
            )

    async def tell_copied(self, title: str, env: str, what: str) -> None:
        """Copy ``env`` and say what that did, the line itself alone on a line of the
        notice (``N`` shows it whole, for a mouse), then ``what``."""
        if not env:
            self.app.notify(
                _("no valid GPU UUIDs to copy") + "\n" + what,
                title=title,
                severity="warning",
                markup=False,
            )
            return
        copied = await copy_line(self.app, env)
        # The same line without a clipboard: what `gputui env` prints on the host.
        shell = "" if copied.sure else "\n" + _('or, in a shell on the host: eval "$(gputui env)"')
        self.app.notify(
            f"{copied.how}\n{env}\n{what}{shell}",
            title=title,
            severity="information" if copied.sure else "warning",
            markup=False,
        )

    def release_row(self, row: Row | None) -> None:
        asks = self.asks
        link = asks.usable(N_("release"), "release")
        view = asks.view
        if link is None or view is None:
            return
        if row is None:
            asks.refuse(N_("release"), _("select a GPU (or a host) first"))
            return
        me = view.me.user
        if isinstance(row, HostRow):
            ids = [c.id for c in view.claims if c.user == me and c.host == row.host]
            what = _("your claims on {host}").format(host=row.host)
            if not ids:
                asks.refuse(N_("release"), _("no claim of yours on {host}").format(host=row.host))
                return
        else:
            gpu = self.model.gpu(row)
            holder = self.model.holders.get(gpu.uuid) if gpu is not None else None
            where = _("{host} GPU {index}").format(host=row.host, index=row.index)
            if holder is None:
                asks.refuse(N_("release"), _("nobody holds {where}").format(where=where))
                return
            if holder.kind == "job":
                asks.refuse(
                    N_("release"),
                    _("{where} is held by job {id}: cancel it on the queue screen (Q)").format(
                        where=where, id=holder.id
                    ),
                )
                return
            if holder.user != me and not view.me.admin:
                said = _("claim {id} on {where} belongs to {user}")
                asks.refuse(N_("release"), said.format(id=holder.id, where=where, user=holder.user))
                return
            ids = [holder.id]
            what = _("claim {id} ({where})").format(id=holder.id, where=where)
        asks.request(_("release {what}").format(what=what), self._release(link, what, ids))

    async def _release(self, link: HeadLink, what: str, ids: list[int]) -> None:
        result = await self.asks.call(
            link,
            _("release {what}").format(what=what),
            "release",
            lambda b: b.release(claim_ids=ids),
        )
        if result is None:
            return
        released = result.get("released") or []
        count = sum(len(c.get("gpu_uuids") or []) for c in released if isinstance(c, dict))
        self.app.notify(
            ngettext(
                "released {what}: {n} GPU free again", "released {what}: {n} GPUs free again", count
            ).format(what=what, n=count),
            title=_("released"),
            timeout=5,
            markup=False,
        )

    def env_row(self, row: Row | None) -> None:
        link = self.asks.usable(N_("show the env line"), "env")
        if link is None:
            return
        host = row.host if row is not None else ""
        self.asks.request(_("env line"), self._env(link, host))

    async def _env(self, link: HeadLink, host: str) -> None:
        result = await self.asks.call(
            link, N_("show the env line"), "env", lambda b: b.env(host or None)
        )
        if result is None:
            return
        line = env_line(result.get("uuids"))
        if not line:
            said = (
                _("no active claim of yours on {host}").format(host=host)
                if host
                else _("no active claim of yours on any host")
            )
            self.asks.refuse(N_("show the env line"), said)
            return
        title = _("env line of {host}").format(host=host) if host else _("env line of every host")
        await self.tell_copied(title, line, _("N shows the line"))
