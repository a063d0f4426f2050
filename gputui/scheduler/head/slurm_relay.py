"""The head as Slurm's relay: one poll of slurmctld for every console.

With both ``head:`` and ``slurm:`` in hosts.yaml, Slurm stays the scheduler and the
head relays what consoles read of it: every ``slurm.refresh_s`` it takes one
``SlurmBackend.snapshot`` (one ``squeue``, one ``sinfo``, one ``scontrol show job -d``
while a job runs) and answers the ``slurm`` request from memory. N consoles then
cost slurmctld what one does. What a user *does* (cancel, submit, hold) never goes
through the head: the verbs and the console run Slurm's commands as that user, so
Slurm's permissions decide.

A fence becomes a node drain: the head's health rules fence a GPU that fails (an Xid,
a lost card); in front of Slurm, each refresh drains every node with a fenced GPU
(``scontrol update State=DRAIN Reason="gputui fence: ..."``, as the head: Slurm's
admin) and resumes a node it drained once no fence is left there, never a node an
admin drained (a drain whose reason is not the head's is left alone). Slurm cannot
drain one GPU: the whole node stops taking work until the card is back.

Energy: each poll's running jobs and their GPU indexes go to the head's Slurm meter
(``watch.slurm_meter``, through ``on_poll``), which charges the power samples of the
hosts the head watches to the job that held each GPU, stored by hour and job
(``slurm_energy``); ``gputui usage`` and ``report`` on Slurm join them with sacct's
GPU-hours, job by job.

The head runs as root, and root sees every job. Where Slurm hides jobs from other
users (``PrivateData`` with ``jobs``), the relay would show them to everyone: it
refuses instead (one log line, and the ``slurm`` request answers ``unavailable``),
and consoles ask Slurm themselves, as their users.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from gputui.common.i18n import N_
from gputui.config.slurm import SlurmConfig
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm.backend import SlurmBackend
from gputui.scheduler.client.slurm.runner import Runner
from gputui.wire.words import say

log = logging.getLogger(__name__)

FENCE_MARK = "gputui fence:"
"""How a drain the head made for a fence begins its reason (the head lifts only those)."""


def private_jobs(config_text: str) -> bool:
    """Whether ``scontrol show config`` says Slurm hides jobs from other users."""
    m = re.search(r"(?m)^PrivateData\s*=\s*(.*)$", config_text)
    return m is not None and bool(re.search(r"\bjobs\b", m.group(1), re.IGNORECASE))


class SlurmRelay:
    """Polls Slurm for every console; ``answer`` is the newest snapshot."""

    def __init__(
        self,
        conf: SlurmConfig,
        *,
        backend: SlurmBackend | None = None,
        clock: Callable[[], float] = time.time,
        fences: Callable[[], Mapping[str, str]] = dict,
        on_poll: Callable[[list[dict[str, Any]], dict[int, dict[str, list[int]]]], None]
        | None = None,
    ) -> None:
        """``fences``: host -> why, for each host with a GPU the head fenced;
        ``on_poll``: told each poll's jobs and GPU indexes (the energy meter)."""
        self.conf = conf
        self.fences = fences
        self.on_poll = on_poll
        if backend is None:
            runner = Runner(
                conf.login, timeout_s=conf.command_timeout_s, ssh_config=conf.ssh_config
            )
            backend = SlurmBackend(
                runner, partitions=conf.partitions, qos=conf.qos, nodes=conf.nodes
            )
        self.backend = backend
        self.clock = clock
        self.polls = 0
        self._latest: dict[str, Any] | None = None
        self._refused: set[tuple[str, str]] = set()
        """(node, change) Slurm refused, logged once until it is accepted."""
        self._why: str | None = "no answer from Slurm yet"

    def answer(self) -> dict[str, Any]:
        """The newest snapshot (``at``: when it was taken); ``HeadError`` while there
        is none to give, or the last poll failed, or the newest is older than three
        refreshes, saying why (a console then asks Slurm itself, and says so)."""
        latest = self._latest
        if latest is None or self._why is not None:
            if self._why is not None:
                raise HeadError.of("unavailable", say(N_("slurm: {why}"), why=self._why))
            raise HeadError.of("unavailable", say(N_("slurm: no answer from Slurm yet")))
        if self.clock() - latest["at"] > 3 * self.conf.refresh_s:
            raise HeadError.of(
                "unavailable", say(N_("slurm: the head's last answer from Slurm is stale"))
            )
        return latest

    async def _drain_fenced(self, nodes: list[dict[str, str]]) -> None:
        fenced = {self.conf.node_of(host): why for host, why in self.fences().items()}
        # sinfo -N says a node once for each of its partitions: act once a node.
        for record in {r["name"]: r for r in nodes}.values():
            name, state, reason = record["name"], record["state"].lower(), record["reason"]
            ours = reason.startswith(FENCE_MARK)
            if name in fenced and "drain" not in state:
                why = f"{FENCE_MARK} {fenced[name]}"[:200]
                await self._scontrol(name, "State=DRAIN", f"Reason={why}")
            elif name not in fenced and "drain" in state and ours:
                await self._scontrol(name, "State=RESUME")

    async def _scontrol(self, node: str, *change: str) -> None:
        done = await asyncio.to_thread(
            self.backend.runner.run, "scontrol", "update", f"NodeName={node}", *change
        )
        if done.code == 0:
            self._refused.discard((node, change[0]))
            log.info("slurm: node %s %s", node, " ".join(change))
        elif (node, change[0]) not in self._refused:  # said once, not every refresh
            self._refused.add((node, change[0]))
            log.warning("slurm: node %s %s refused: %s", node, change[0], done.err.strip()[:200])

    async def _public(self) -> bool:
        """Whether Slurm shows every user's jobs to every user: only then may the head
        (root, who sees all) relay them. Not known (Slurm not answering) is not yes."""
        done = await asyncio.to_thread(self.backend.runner.run, "scontrol", "show", "config")
        if done.code != 0:
            self._why = "cannot read Slurm's configuration yet (is slurmctld up?)"
            return False
        if private_jobs(done.out):
            self._why = (
                "Slurm hides jobs from other users (PrivateData=jobs): the head does not"
                " relay them; each console asks Slurm as its own user"
            )
            return False
        return True

    async def run(self) -> None:
        public = False
        while True:
            started = time.monotonic()
            if not public:
                public = await self._public()
                if not public:
                    log.warning("slurm relay off: %s", self._why)
                    if "PrivateData" in (self._why or ""):
                        return
                    await asyncio.sleep(self.conf.refresh_s)
                    continue
            try:
                snap = await asyncio.to_thread(self.backend.snapshot)
            except HeadError as exc:
                self._why = exc.message
                log.warning("slurm relay: %s", exc.message)
            else:
                self.polls += 1
                self._why = None
                if self.on_poll is not None:
                    self.on_poll(snap.jobs, snap.indexes)
                await self._drain_fenced(snap.nodes)
                self._latest = {
                    "at": self.clock(),
                    "jobs": snap.jobs,
                    "indexes": {str(k): v for k, v in snap.indexes.items()},
                    "nodes": snap.nodes,
                }
            spent = time.monotonic() - started
            await asyncio.sleep(max(0.0, self.conf.refresh_s - spent))
