"""``SlurmEnergy``: the relaying head's meter of Slurm's jobs (``policy.slurm_meter``).

The relay hands each poll of Slurm in (``polled``); host snapshots come in as they
arrive (``observe``, on the event loop). A job gone from a poll (ended, requeued) is
charged up to that poll and no further, kept until each of its GPUs' next sample has
charged the time up to it. What was counted goes to the writer as an internal
``slurm-meter`` item about once a minute (``tick``), and straight to the store at a
clean shutdown (``close``), as the head's own meter does.

Attribution is as fresh as the relay's last poll (``slurm.refresh_s``): a job that
starts or ends between two polls is charged from its start (Slurm's start time) but
is charged its last moments, up to the next poll, only from that poll on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gputui.scheduler.head.batch import Item
from gputui.scheduler.policy.meter import Reading
from gputui.scheduler.policy.slurm_meter import (
    Holding,
    SlurmMeter,
    SlurmMetered,
    holders_of,
    holdings,
)
from gputui.scheduler.store.api import Store, StoreFailure
from gputui.telemetry import HostSnapshot

log = logging.getLogger("gputui.scheduler.head.daemon")

MAX_ENDING = 64
"""Polls' worth of ended jobs kept for a host until its next sample (one that sends
none for long keeps only the last ones: bounded memory, their last moments lost)."""
KIND = "slurm-meter"
"""The writer's item that stores what was counted."""


class SlurmEnergy:
    def __init__(
        self,
        post: Callable[[Item], bool],
        clock: Callable[[], float],
        *,
        host_of: Callable[[str], str],
        node_names: Callable[[str], list[str]],
        flush_s: float,
    ) -> None:
        self.meter = SlurmMeter()
        self.held: dict[str, Holding] = {}
        """Host -> who holds its GPUs, as of the last poll."""
        self.ending: dict[str, list[Holding]] = {}
        """Host -> jobs gone since, charged up to the poll that missed them."""
        self.polls = 0
        self._post = post
        self._clock = clock
        self._host_of = host_of
        self._node_names = node_names
        self.flush_s = flush_s
        self._flushed_at = clock()

    def polled(
        self,
        jobs: Iterable[Mapping[str, Any]],
        indexes: Mapping[int, Mapping[str, Sequence[int]]],
    ) -> None:
        """A poll of Slurm, just taken: who holds which GPU from now on."""
        now = self._clock()
        fresh = holdings(jobs, indexes, self._host_of, self._node_names, now)
        for host, before in self.held.items():
            after = fresh.get(host)
            gone = before.jobs() - (after.jobs() if after is not None else set())
            ended = before.ended(now, gone) if gone else None
            if ended is not None:  # (a host that sends nothing keeps the last few)
                self.ending[host] = [*self.ending.get(host, [])[-MAX_ENDING + 1 :], ended]
        self.held = fresh
        self.polls += 1

    def observe(self, snap: HostSnapshot) -> None:
        sample = snap.sample
        if sample is None:
            return
        readings, gpus = [], []
        for gpu in sample.gpus:
            if gpu.state == "lost":
                self.meter.forget(gpu.uuid)
            else:
                readings.append(Reading(gpu.uuid, gpu.util_gpu, gpu.power_w))
                gpus.append((gpu.index, gpu.uuid))
        held = [*self.ending.pop(snap.name, []), *filter(None, [self.held.get(snap.name)])]
        holders = holders_of(held, gpus) if held else {}
        self.meter.observe(
            snap.name, sample, readings, self._clock(), holders, max_gap_s=snap.stale_after_s
        )

    def pending(self) -> SlurmMetered:
        """A copy of what is counted and not yet stored."""
        return self.meter.pending.copy()

    def tick(self) -> None:
        if self._clock() - self._flushed_at >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Hand what was counted to the writer (kept for the next try if it is full)."""
        self._flushed_at = self._clock()
        taken = self.meter.take()
        if taken and not self._post(Item(KIND, payload=taken)):
            self.meter.pending.merge(taken)

    def close(self, store: Store, unapplied: Iterable[Item]) -> None:
        """At shutdown, with the writer stopped: store what was counted, including the
        items still waiting in its inbox."""
        for item in unapplied:
            if item.kind == KIND and isinstance(item.payload, SlurmMetered):
                self.meter.pending.merge(item.payload)
        taken = self.meter.take()
        if not taken:
            return
        try:
            with store.transaction() as tx:
                tx.usage.add_slurm_energy(taken.rows())
        except (StoreFailure, OSError) as exc:
            log.error("head: the last minute of Slurm jobs' energy was not stored: %s", exc)
