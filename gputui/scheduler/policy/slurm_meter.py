"""Energy of Slurm's jobs from the samples a relaying head receives: who held which GPU.

In front of Slurm (``head:`` and ``slurm:``) the head allocates nothing; Slurm does.
Each of the relay's polls says which running job holds which GPU: by index where
``scontrol show job -d`` gives one (``gres`` IDX), else per node. ``holdings`` turns
a poll into, per host, the holder of each index and the jobs that hold the node's
other GPUs as a whole; ``SlurmMeter`` counts the time between two samples of a GPU,
its power times that time as energy (clamped as the head's ``Meter`` clamps), to
each holder of the GPU then, from the job's start on.

A job that holds GPUs per node (no IDX) is charged a share of each GPU of that node
that no indexed job holds: its GPU count over those GPUs' count (or over the node's
per-node jobs' GPU count, if Slurm lists more), so the node's power is split across
its jobs by GPU count. Its rows say so (``per_node``).

Pure apart from the times the daemon passes in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.scheduler.policy.accounting import split_hours
from gputui.scheduler.policy.meter import (
    MAX_GAP_S,
    GpuSpans,
    Reading,
    clamp_power,
    clamp_util,
)

SlurmKey = tuple[int, int]
"""(UTC hour, Slurm job id): a ``slurm_energy`` row's primary key."""
SlurmRow = tuple[int, int, str, str, float, float, float, bool]
"""A ``slurm_energy`` row: hour, job, user, partition, GPU-seconds held, GPU-seconds
busy, energy (J), whether any of it was a per-node share."""


@dataclass(frozen=True, slots=True)
class SlurmHolder:
    """A running Slurm job on a GPU: charged ``share`` of the GPU from ``since``."""

    job: int
    user: str
    partition: str
    since: float
    share: float = 1.0
    per_node: bool = False
    until: float | None = None
    """When the job was last seen holding it (None: it holds it still)."""


@dataclass(frozen=True, slots=True)
class Holding:
    """One host's GPUs in one poll: the job on each index Slurm named, and the jobs
    that hold GPUs of the node without indexes, with how many each."""

    by_index: Mapping[int, SlurmHolder] = field(default_factory=dict)
    per_node: Sequence[tuple[SlurmHolder, int]] = ()

    def ended(self, at: float, jobs: Iterable[int]) -> Holding | None:
        """Only the holders among ``jobs``, each ended at ``at`` (None: none of them)."""
        gone = set(jobs)
        by_index = {i: replace(h, until=at) for i, h in self.by_index.items() if h.job in gone}
        per_node = [(replace(h, until=at), n) for h, n in self.per_node if h.job in gone]
        return Holding(by_index, per_node) if by_index or per_node else None

    def jobs(self) -> set[int]:
        return {h.job for h in self.by_index.values()} | {h.job for h, _ in self.per_node}


def holdings(
    jobs: Iterable[Mapping[str, Any]],
    indexes: Mapping[int, Mapping[str, Sequence[int]]],
    host_of: Callable[[str], str],
    node_names: Callable[[str], list[str]],
    now: float,
) -> dict[str, Holding]:
    """A poll (squeue's job views, scontrol's GPU indexes) as each host's ``Holding``.
    Only running jobs with GPUs hold any; a job with no start time is held from ``now``."""
    by_index: dict[str, dict[int, SlurmHolder]] = {}
    per_node: dict[str, list[tuple[SlurmHolder, int]]] = {}
    for job in jobs:
        gpus = job.get("gpus")
        if job.get("state") != "RUNNING" or not isinstance(gpus, int) or gpus <= 0:
            continue
        started = job.get("started_at")
        since = float(started) if isinstance(started, (int, float)) else now
        holder = SlurmHolder(
            int(job["id"]), str(job.get("user") or ""), str(job.get("partition") or ""), since
        )
        placed = indexes.get(int(job["id"]))
        if placed:
            for node, idx in placed.items():
                cells = by_index.setdefault(host_of(node), {})
                for i in idx:
                    cells[i] = holder
            continue
        nodes = node_names(str(job.get("host") or ""))
        each = max(1, gpus // max(1, len(nodes)))  # squeue's count is per node times nodes
        for node in nodes:
            per_node.setdefault(host_of(node), []).append((replace(holder, per_node=True), each))
    return {
        host: Holding(by_index.get(host, {}), per_node.get(host, []))
        for host in set(by_index) | set(per_node)
    }


def holders_of(
    held: Iterable[Holding], gpus: Iterable[tuple[int, str]]
) -> dict[str, tuple[SlurmHolder, ...]]:
    """A host's GPUs (index, uuid) -> who holds each, with the share each is charged."""
    gpus = list(gpus)
    out: dict[str, list[SlurmHolder]] = {}
    for holding in held:
        free = [uuid for i, uuid in gpus if i not in holding.by_index]
        for i, uuid in gpus:
            holder = holding.by_index.get(i)
            if holder is not None:
                out.setdefault(uuid, []).append(holder)
        if holding.per_node and free:
            total = max(len(free), sum(n for _, n in holding.per_node))
            shares = [replace(h, share=n / total) for h, n in holding.per_node]
            for uuid in free:
                out.setdefault(uuid, []).extend(shares)
    return {uuid: tuple(hs) for uuid, hs in out.items()}


@dataclass(slots=True)
class SlurmMetered:
    """Counted and not yet stored: (hour, job) -> [held_s, busy_s, energy_j]; per job
    its user, partition and whether a share of it was per node."""

    cells: dict[SlurmKey, list[float]] = field(default_factory=dict)
    jobs: dict[int, tuple[str, str, bool]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.cells)

    def add(self, hour: int, holder: SlurmHolder, held: float, busy: float, joules: float) -> None:
        cell = self.cells.setdefault((hour, holder.job), [0.0, 0.0, 0.0])
        cell[0] += held
        cell[1] += busy
        cell[2] += joules
        _, _, split = self.jobs.get(holder.job, ("", "", False))
        self.jobs[holder.job] = (holder.user, holder.partition, split or holder.per_node)

    def merge(self, other: SlurmMetered) -> None:
        for (hour, job), (held, busy, joules) in other.cells.items():
            user, partition, split = other.jobs[job]
            holder = SlurmHolder(job, user, partition, 0.0, per_node=split)
            self.add(hour, holder, held, busy, joules)

    def copy(self) -> SlurmMetered:
        out = SlurmMetered()
        out.merge(self)
        return out

    def rows(self) -> list[SlurmRow]:
        return [
            (hour, job, *self.jobs[job][:2], held, busy, joules, self.jobs[job][2])
            for (hour, job), (held, busy, joules) in self.cells.items()
        ]


class SlurmMeter(GpuSpans):
    """Per-GPU time between samples, charged to the Slurm jobs that held the GPU."""

    def __init__(self, max_gap_s: float = MAX_GAP_S) -> None:
        super().__init__(max_gap_s)
        self.pending = SlurmMetered()

    def observe(
        self,
        host: str,
        sample: object,
        readings: Iterable[Reading],
        at: float,
        holders: Mapping[str, Sequence[SlurmHolder]],
        *,
        max_gap_s: float | None = None,
    ) -> None:
        """Count one host's sample that arrived at ``at``."""
        for reading, dt in self.spans(host, sample, readings, at, max_gap_s):
            if dt > 0:
                self.count(
                    at - dt, at, reading.util, reading.power_w, holders.get(reading.uuid, ())
                )

    def count(
        self,
        start: float,
        end: float,
        util: float | None,
        power_w: float | None,
        holders: Sequence[SlurmHolder],
    ) -> None:
        """``[start, end)`` of one GPU at ``util`` % and ``power_w`` W, charged to each of
        ``holders`` for its share, from its ``since`` up to its ``until``."""
        if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
            return
        load = clamp_util(util)
        busy = load is not None and load > 0
        watts = clamp_power(power_w)
        for holder in holders:
            share = holder.share
            if not (math.isfinite(holder.since) and math.isfinite(share) and 0 < share <= 1):
                continue
            until = end if holder.until is None else min(end, holder.until)
            for hour, seconds in split_hours(max(start, holder.since), until):
                held = seconds * share
                self.pending.add(hour, holder, held, held if busy else 0.0, watts * held)

    def take(self) -> SlurmMetered:
        out, self.pending = self.pending, SlurmMetered()
        return out
