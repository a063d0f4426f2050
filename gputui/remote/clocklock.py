"""The ``clocks`` request: lock a held-but-idle card's graphics clocks low, or reset them.

The head decides (``power.mode: lock``); the helper only acts. ``lock`` takes the
lowest graphics clock the card supports at its highest memory clock
(``nvmlDeviceGetSupportedMemoryClocks``, ``nvmlDeviceGetSupportedGraphicsClocks``)
and pins the card there (``nvmlDeviceSetGpuLockedClocks(handle, low, low)``);
``reset`` undoes it (``nvmlDeviceResetGpuLockedClocks``). Both need root and a Volta
or newer card. A card that cannot (older than Volta, NotSupported, NoPermission, a
binding without the call) is remembered by uuid for the life of this helper: the
next ``lock`` of it answers from memory and calls nothing, so a head that asks again
never makes the driver retry in a loop. A new card (another uuid) is asked afresh.
At exit the helper resets the cards it locked (``reset_all``).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from .gpus import Gpu, GpuLost
from .nvml import NA, NVML_DEVICE_ARCH_VOLTA

MAX_MHZ = 100_000
GIVE_UP = frozenset({"NotSupported", "NoPermission", "FunctionNotFound"})
"""NVML errors that will not change while this helper runs: remembered per card."""


class ClockLocks:
    """What this helper locked, and which cards cannot be locked (thread-safe: the
    requests run on the helper's worker threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.locked: dict[str, int] = {}
        """GPU uuid -> the graphics clock (MHz) it was locked at."""
        self.unsupported: dict[str, str] = {}
        """GPU uuid -> why its clocks cannot be locked."""
        self.closed = False
        """The helper is exiting: what it locked was reset, and nothing more is locked."""

    def lock(self, gpu: Gpu) -> dict[str, Any]:
        with self._lock:
            if self.closed:  # a request still running as the helper exits
                return _answer(gpu, False, error="Exiting", message="the helper is exiting")
            why = self.unsupported.get(gpu.uuid)
            if why is not None:
                return _answer(gpu, False, supported=False, error=why, remembered=True)
            arch = gpu.read("nvmlDeviceGetArchitecture")
            old = isinstance(arch, int) and not isinstance(arch, bool) and arch >= 0
            if old and arch < NVML_DEVICE_ARCH_VOLTA:
                why = f"architecture {arch} is older than Volta"
                return self._give_up(gpu, "NotSupported", why)
            low = self._lowest(gpu)
            if isinstance(low, NA):
                return self._failed(gpu, low)
            done = gpu.read("nvmlDeviceSetGpuLockedClocks", low, low)
            if isinstance(done, NA):
                return self._failed(gpu, done)
            self.locked[gpu.uuid] = low
            return _answer(gpu, True, mhz=low)

    def reset(self, gpu: Gpu) -> dict[str, Any]:
        with self._lock:
            if gpu.uuid in self.unsupported:  # never locked, and cannot be
                return _answer(gpu, False, supported=False, error=self.unsupported[gpu.uuid])
            done = gpu.read("nvmlDeviceResetGpuLockedClocks")
            if isinstance(done, NA):
                if done.error in GIVE_UP:
                    self.locked.pop(gpu.uuid, None)
                return _answer(gpu, gpu.uuid in self.locked, error=done.error, message=done.message)
            self.locked.pop(gpu.uuid, None)
            return _answer(gpu, False)

    def reset_all(self, gpus: list[Gpu]) -> None:
        """At exit: the cards this helper locked run free again (best effort); a lock
        still in flight waits for this and then locks nothing."""
        with self._lock:
            self.closed = True
        for gpu in gpus:
            if gpu.uuid in self.locked:
                with contextlib.suppress(GpuLost):
                    self.reset(gpu)

    def _lowest(self, gpu: Gpu) -> int | NA:
        mems = gpu.read("nvmlDeviceGetSupportedMemoryClocks")
        mem = _top(mems, max)
        if isinstance(mem, NA):
            return mem
        return _top(gpu.read("nvmlDeviceGetSupportedGraphicsClocks", mem), min)

    def _failed(self, gpu: Gpu, na: NA) -> dict[str, Any]:
        if na.error in GIVE_UP:
            return self._give_up(gpu, na.error, na.message)
        return _answer(gpu, False, error=na.error, message=na.message)  # may pass: asked again

    def _give_up(self, gpu: Gpu, error: str, message: str) -> dict[str, Any]:
        self.unsupported[gpu.uuid] = error
        return _answer(gpu, False, supported=False, error=error, message=message)


def _top(values: Any, pick: Any) -> int | NA:
    """The max (or min) of a list of clocks NVML gave, or ``NA`` when there is none."""
    if isinstance(values, NA):
        return values
    try:
        clocks = [int(v) for v in values if 0 < int(v) <= MAX_MHZ]
    except (TypeError, ValueError):
        return NA("Unknown", "clock list not readable")
    if not clocks:
        return NA("NotSupported", "no supported clocks listed")
    value: int = pick(clocks)
    return value


def _answer(gpu: Gpu, locked: bool, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": gpu.index, "uuid": gpu.uuid, "locked": locked}
    out.update({"supported": True, "error": None, "message": "", "mhz": None})
    out.update(extra)
    out["message"] = str(out["message"])[:300]
    return out
