"""MIG slices as the head sees them: each slice a card of its own.

A helper reports a MIG-enabled GPU once, with its slices under it (``GpuInfo.mig``,
``GpuSample.mig``). The head places slices, not the card: each slice is a ``Gpu``
row keyed by its ``MIG-`` UUID (``cards_of``), and each sample of the card gives
each slice a ``GpuSample`` of its own (``with_slices``): the card's state, the
slice's memory and utilisation, and the card's processes that NVML lists on the
slice. So liveness, health, idle release, ownership and ``gputui gpus`` read a
slice exactly as they read a card.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from gputui.wire.fields import unchecked
from gputui.wire.messages import GpuInfo, GpuSample


class Card(NamedTuple):
    """A schedulable unit a host's ``hello`` lists: a whole card or a MIG slice."""

    uuid: str
    card_index: int
    model: str
    memory_mib: int
    mig_profile: str | None = None
    mig_parent: str | None = None
    mig_enabled: bool = False
    vendor: str = "nvidia"
    """Whose card it is (``GpuInfo.vendor``): an AMD card is in a pool of its own."""


def cards_of(gpus: Iterable[GpuInfo]) -> list[Card]:
    """Every card of a ``hello`` and, under a MIG-enabled one, each of its slices (the
    card's index; model ``<card> MIG <profile>``). A slice with no profile NVML could
    name is left out: no request could ask for it."""
    out: list[Card] = []
    for g in gpus:
        enabled = bool(g.mig_mode)
        out.append(
            Card(
                g.uuid,
                g.index,
                g.name,
                g.memory_total_mib or 0,
                mig_enabled=enabled,
                vendor=g.vendor,
            )
        )
        if not enabled:
            continue
        for s in g.mig:
            if s.profile is None:
                continue
            model = f"{g.name} MIG {s.profile}"[:128]
            out.append(
                Card(
                    s.uuid,
                    g.index,
                    model,
                    s.memory_total_mib or 0,
                    s.profile,
                    g.uuid,
                    vendor=g.vendor,
                )
            )
    return out


def slice_samples(gpu: GpuSample) -> Iterator[GpuSample]:
    """Each slice of ``gpu`` (its latest sample) as a card's sample of its own."""
    for s in gpu.mig:
        pids = set(s.pids)
        yield GpuSample(
            index=gpu.index,
            uuid=s.uuid,
            state=gpu.state,
            message=gpu.message,
            util_gpu=s.util_gpu,
            mem_used_mib=s.mem_used_mib,
            mem_total_mib=s.mem_total_mib,
            processes=tuple(p for p in gpu.processes if p.pid in pids),
            errors=s.errors,
        )


def with_slices(gpus: Iterable[GpuSample]) -> Iterator[GpuSample]:
    """Every card of a sample, each MIG-enabled one followed by its slices."""
    for g in gpus:
        yield g
        if g.mig:
            yield from slice_samples(g)


def on_slices(gpus: Iterable[GpuSample]) -> Iterator[GpuSample]:
    """Every card of a sample as ownership reads it: a process NVML lists on a slice
    is on that slice (not on its card too); the rest stay where they are."""
    for g in gpus:
        if not g.mig:
            yield g
            continue
        sliced = {p for s in g.mig for p in s.pids}
        yield unchecked(g, processes=tuple(p for p in g.processes if p.pid not in sliced))
        yield from slice_samples(g)
