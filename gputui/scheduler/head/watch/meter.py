"""``HeadMeter``: the daemon's side of the meter.

Host snapshots go in (``observe``, on the event loop); who holds each GPU is read
from a snapshot of the store on the reader thread after every commit that changed
the allocations (``allocations_changed``), so the writer never waits for it; what
was counted goes to the writer as an internal ``meter`` item about once a minute
(``tick``), and straight to the store at a clean shutdown (``close``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from gputui.config.scheduler import Power
from gputui.scheduler.head.batch import Item
from gputui.scheduler.policy.accounting import OpenHolder
from gputui.scheduler.policy.meter import Holder, Meter, Metered, Reading, slice_readings
from gputui.scheduler.store.api import Store, StoreFailure
from gputui.telemetry import HostSnapshot
from gputui.wire.messages import GpuInfo

log = logging.getLogger("gputui.scheduler.head.daemon")

FLUSH_S = 60.0


def holders_of(rows: Iterable[OpenHolder]) -> dict[str, Holder]:
    return {
        uuid: Holder(user, group, project, pool, start, job=job)
        for uuid, start, user, group, project, pool, job in rows
    }


class HeadMeter:
    def __init__(
        self,
        store: Store,
        read: Callable[[Callable[[], Any]], Awaitable[Any]],
        post: Callable[[Item], bool],
        clock: Callable[[], float],
        flush_s: float = FLUSH_S,
        *,
        power: Callable[[], Power] | None = None,
    ) -> None:
        """``read``: runs a function on the reader thread; ``post``: hands an item to
        the writer (False when its inbox is full); ``power``: the config's ``power:``
        now (held-but-idle cards are counted apart unless its mode is ``off``)."""
        self.store = store
        self.meter = Meter()
        self.holders: dict[str, Holder] = {}
        self._read = read
        self._post = post
        self._clock = clock
        self._power = power
        self.flush_s = flush_s
        self._flushed_at = clock()
        self._refresh: asyncio.Task[None] | None = None
        self._stale = False

    def load(self, rows: Iterable[OpenHolder]) -> None:
        self.holders = holders_of(rows)

    def ended(self, ends: Iterable[tuple[str, float]]) -> None:
        """Allocations just ended (committed): their holders are charged up to the end
        and no further, kept so the GPU's next sample charges the time up to it."""
        for uuid, at in ends:
            holder = self.holders.get(uuid)
            if holder is not None and holder.until is None:
                self.holders[uuid] = replace(holder, until=at)

    def observe(self, snap: HostSnapshot) -> None:
        sample = snap.sample
        if sample is None:
            return
        readings = []
        infos: dict[str, GpuInfo] | None = None  # made for the first MIG card only
        for gpu in sample.gpus:
            if gpu.state == "lost":
                self.meter.forget(gpu.uuid)
                for piece in gpu.mig:
                    self.meter.forget(piece.uuid)
                continue
            readings.append(Reading(gpu.uuid, gpu.util_gpu, gpu.power_w, gpu.util_mem))
            if gpu.mig:  # MIG slices: each its share of the card's power (no NVML reading)
                if infos is None:
                    infos = {g.uuid: g for g in snap.hello.gpus} if snap.hello is not None else {}
                info = infos.get(gpu.uuid)
                profiles = {m.uuid: m.profile for m in info.mig} if info is not None else {}
                model = info.name if info is not None else ""
                pieces = ((m.uuid, profiles.get(m.uuid), m.util_gpu) for m in gpu.mig)
                readings.extend(slice_readings(gpu.power_w, model, pieces))
        power = self._power() if self._power is not None else None
        on = power is not None and power.mode != "off"
        self.meter.idle_after_s = power.idle_minutes * 60 if power is not None and on else None
        at = self._clock()
        self.meter.observe(
            snap.name, sample, readings, at, self.holders, max_gap_s=snap.stale_after_s
        )
        for reading in readings:  # an ended holder's last time is charged now: gone
            holder = self.holders.get(reading.uuid)
            if holder is not None and holder.until is not None and holder.until <= at:
                del self.holders[reading.uuid]

    def pending(self) -> Metered:
        """A copy of what is counted and not yet stored (for a live ``usage`` answer)."""
        return self.meter.pending.copy()

    # -- who holds what ------------------------------------------------------------------

    def allocations_changed(self) -> None:
        """Read the holders again (one read at a time; a change during it reads again)."""
        self._stale = True
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.get_running_loop().create_task(self._read_holders())

    async def _read_holders(self) -> None:
        def read() -> list[OpenHolder]:
            with self.store.snapshot() as tx:
                return tx.usage.open_holders()

        while self._stale:
            self._stale = False
            try:
                rows = await self._read(read)
            except Exception as exc:  # the next change (or flush) reads again
                log.error("head: could not read who holds the GPUs: %s", exc)
                return
            fresh = holders_of(rows)
            for uuid, holder in self.holders.items():  # ended, its last sample not yet in
                now = fresh.get(uuid)
                # (the same allocation still open in a snapshot read before it ended)
                if holder.until is not None and (now is None or now.since == holder.since):
                    fresh[uuid] = holder
            self.holders = fresh

    # -- to the store ----------------------------------------------------------------------

    def tick(self) -> None:
        if self._clock() - self._flushed_at >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Hand what was counted to the writer (kept for the next try if it is full)."""
        self._flushed_at = self._clock()
        taken = self.meter.take()
        if taken and not self._post(Item("meter", payload=taken)):
            self.meter.pending.merge(taken)
        self.allocations_changed()  # and mend the holder map, should a change be missed

    async def close(self, unapplied: Iterable[Item]) -> None:
        """At shutdown, with the writer stopped: store what was counted, including the
        ``meter`` items still waiting in its inbox."""
        if self._refresh is not None:
            self._refresh.cancel()
            await asyncio.gather(self._refresh, return_exceptions=True)
        for item in unapplied:
            if item.kind == "meter" and isinstance(item.payload, Metered):
                self.meter.pending.merge(item.payload)
        taken = self.meter.take()
        if not taken:
            return
        try:
            with self.store.transaction() as tx:
                tx.usage.add_metered(
                    taken.usage_rows(), taken.cluster_rows(), taken.job_rows(), taken.idle_rows()
                )
        except (StoreFailure, OSError) as exc:
            log.error("head: the last minute of GPU use was not stored: %s", exc)
