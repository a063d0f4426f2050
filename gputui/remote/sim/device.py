"""One simulated card: its identity, its faults, and its readings, which follow the
load its processes put on it."""

from __future__ import annotations

import hashlib
import math
import queue
import random
import threading
from typing import TYPE_CHECKING, Any

from .spec import ARCH, HEALTH, LOCKED_SHARE, MIG_LAYOUTS, MODELS, held_idle_w

if TYPE_CHECKING:
    from .env import SimProc

_DC_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


class SimEventSet:
    def __init__(self) -> None:
        self.events: queue.Queue[Any] = queue.Queue()


class SimSlice:
    """One MIG device an admin made on a simulated card (its UUID from its place)."""

    def __init__(self, slot: int, place: str, layout: tuple[str, int, int, int]) -> None:
        self.slot = slot
        d = hashlib.sha256(f"{place}/mig/{slot}".encode()).hexdigest()
        self.uuid = f"MIG-{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"
        self.profile, self.memory_mib, self.gi_slices, self.ci_slices = layout
        self.gi_id = slot + 1
        self.ci_id = 0


class SimDevice:
    """One simulated card; ``index`` is its NVML index, its identity (UUID, serial,
    bus, noise) comes from its place in the spec, so a ``missing`` GPU before it
    changes its index and nothing else. ``cluster`` (the spec's) is mixed into its
    UUID and serial, so another simulated cluster's card of the same host name and
    place is not this one."""

    def __init__(
        self, index: int, model_key: str, hostname: str, seed: int, cluster: str = ""
    ) -> None:
        self.index = index
        self.model = MODELS[model_key]
        self.health = HEALTH[model_key]
        self.model_key = model_key
        place = f"{cluster}/{hostname}/{index}" if cluster else f"{hostname}/{index}"
        digest = hashlib.sha256(place.encode()).hexdigest()
        d = digest
        self.uuid = f"GPU-{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"
        self.serial = str(int(digest[32:44], 16))[:13].rjust(13, "1")
        bus = _DC_BUSES[index] if index < len(_DC_BUSES) else 0x01 + index
        self.pci_bus_id = "00000000:%02X:00.0" % (bus & 0xFF)
        self.asic_serial = 0
        """An AMD card's unique id (amdsmi's ``asic_serial``); 0 on NVIDIA's."""
        if self.model.vendor == "amd":
            # As ROCm names it (rocminfo's Uuid): GPU- and the unique id in hex.
            self.asic_serial = int(d[:16], 16) or 1
            self.uuid = f"GPU-{self.asic_serial:016x}"
            self.serial = "69" + str(int(d[32:44], 16))[:11]
            self.pci_bus_id = "0000:%02x:00.0" % ((0xC1 + index * 0x10) & 0xFF)
        self.rng = random.Random(f"{seed}/{hostname}/{index}")
        self.faults: set[str] = set()
        self.armed: dict[str, int] = {}  # fault kind -> ``samples`` when it was armed
        self.unhang = threading.Event()
        self.xid: int | None = None
        self.lost = False
        self.samples = 0
        self.lost_at: int | None = None
        self.xid_at: int | None = None
        self.event_sets: list[SimEventSet] = []
        self.ecc_uncorrected = 0
        self.ecc_corrected = 0
        self.last: float | None = None
        self.util = 0.0
        self.power = self.model.idle_w
        self.temp = float(self.model.idle_c)
        self.procs: list[SimProc] = []
        self.slices = [
            SimSlice(i, place, one) for i, one in enumerate(MIG_LAYOUTS.get(model_key, ()))
        ]
        """Its MIG devices (empty: MIG off)."""
        self.resets = 0
        """GPU resets done (``nvmlDeviceResetGpu``)."""
        self.arch = ARCH[model_key]
        self.held_w = held_idle_w(model_key)
        self.locked_mhz: int | None = None
        """The graphics clock it is locked at (``nvmlDeviceSetGpuLockedClocks``)."""
        self.clock_locks = 0
        """Times its clocks were locked (tests count them)."""

    def age(self, kind: str) -> int:
        """Samples since fault ``kind`` was armed."""
        return max(0, self.samples - self.armed.get(kind, self.samples))

    def busy(self) -> bool:
        """Whether it reads as under load (clocks up, PCIe link up)."""
        return self.util >= 1.0 or bool(self.procs)

    def advance(self, now: float) -> None:
        """Move its readings (load, power, temperature) toward what ``procs`` put on
        it, as far as the time since the last sample lets them."""
        m = self.model
        util_target = float(min(100, sum(p.util for p in self.procs)))
        if util_target > 0:
            util_target = max(0.0, min(100.0, util_target + self.rng.uniform(-4.0, 3.0)))
        cap = m.power_limit_w * (0.6 if "throttle" in self.faults else 0.92)
        base = m.idle_w
        if self.procs:  # memory held: it stays in a high power state, unless locked low
            base = self.held_w
            if self.locked_mhz is not None:
                base = m.idle_w + (self.held_w - m.idle_w) * LOCKED_SHARE
        if self.locked_mhz is not None:
            cap = min(cap, m.idle_w + (cap - m.idle_w) * 0.35)
        power_target = base + (cap - base) * (util_target / 100.0) ** 0.9
        power_target *= 1.0 + self.rng.uniform(-0.02, 0.02)
        span = max(1.0, m.power_limit_w * 0.92 - m.idle_w)
        temp_target = m.idle_c + (m.load_c - m.idle_c) * (power_target - m.idle_w) / span
        if self.last is None:
            self.util, self.power, self.temp = util_target, power_target, temp_target
        else:
            dt = max(0.0, now - self.last)
            self.util += (util_target - self.util) * (1 - math.exp(-dt / 1.5))
            self.power += (power_target - self.power) * (1 - math.exp(-dt / 2.0))
            self.temp += (temp_target - self.temp) * (1 - math.exp(-dt / 12.0))
        self.last = now
