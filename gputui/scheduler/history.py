"""What each GPU read lately, kept by the head for ``gputui incident``.

The head sees every sample of every host; once a ``every_s`` per host it keeps a
compact reading of each GPU (utilisation, memory, temperature, power, throttle
reasons, uncorrected ECC, state), the newest ``MAX_READINGS`` in all, shared out
per GPU (a day at a minute apart for up to ``MAX_READINGS // 1440`` GPUs, less per
GPU beyond). In memory only: a head restart starts it again (said in the answer).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gputui.telemetry import HostSnapshot, HostStatus

EVERY_S = 60.0
MAX_READINGS = 500_000
PER_GPU = 1440


@dataclass(frozen=True, slots=True)
class Reading:
    time: float
    state: str
    util: int | None
    mem_mib: int | None
    temp_c: int | None
    power_w: float | None
    throttle: str
    ecc_uncorrected: int | None

    def view(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "state": self.state,
            "util_gpu": self.util,
            "mem_used_mib": self.mem_mib,
            "temp_c": self.temp_c,
            "power_w": self.power_w,
            "throttle": self.throttle,
            "ecc_uncorrected": self.ecc_uncorrected,
        }


class History:
    """Per (host, GPU index): the readings kept, oldest first."""

    def __init__(self, every_s: float = EVERY_S, budget: int = MAX_READINGS) -> None:
        self.every_s = every_s
        self.budget = budget
        self.started: float | None = None
        self._gpus: dict[tuple[str, int], deque[Reading]] = {}
        self._last: dict[str, float] = {}
        self._per = PER_GPU

    def record(self, snap: HostSnapshot) -> None:
        sample = snap.sample
        if sample is None or sample.time is None or snap.status is not HostStatus.LIVE:
            return
        last = self._last.get(snap.name)
        if last is not None and sample.time - last < self.every_s:
            return
        self._last[snap.name] = sample.time
        if self.started is None:
            self.started = sample.time
        for gpu in sample.gpus:
            key = (snap.name, gpu.index)
            kept = self._gpus.get(key)
            if kept is None:
                kept = self._gpus[key] = deque(maxlen=self._share(len(self._gpus) + 1))
            kept.append(
                Reading(
                    sample.time,
                    gpu.state,
                    gpu.util_gpu,
                    gpu.mem_used_mib,
                    gpu.temp_c,
                    gpu.power_w,
                    "+".join(gpu.throttle or ()),
                    gpu.ecc_uncorrected,
                )
            )

    def _share(self, gpus: int) -> int:
        """Each GPU's share of the budget once there are ``gpus``; a smaller share cuts
        every GPU's readings kept so far to it (the oldest go)."""
        share = max(10, min(PER_GPU, self.budget // max(gpus, 1)))
        if share != self._per:
            self._per = share
            for key, kept in self._gpus.items():
                self._gpus[key] = deque(kept, maxlen=share)
        return share

    def readings(self, host: str, gpu: int | None, since: float) -> Iterable[tuple[int, Reading]]:
        """(GPU index, reading) of ``host`` (one GPU of it, or all) since ``since``."""
        for (name, index), kept in sorted(self._gpus.items()):
            if name != host or (gpu is not None and index != gpu):
                continue
            for reading in kept:
                if reading.time >= since:
                    yield index, reading


def incident_view(history: History, host: str, gpu: int | None, since: float) -> dict[str, Any]:
    """The ``incident`` answer: the readings kept, and since when the head has kept any."""
    return {
        "every_s": history.every_s,
        "kept_since": history.started,
        "readings": [
            {"gpu": index, **reading.view()}
            for index, reading in history.readings(host, gpu, since)
        ],
    }
