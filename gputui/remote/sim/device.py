"""One simulated card's state: its identity, its faults, and its readings' memory."""

from __future__ import annotations

import hashlib
import queue
import random
import threading
from typing import TYPE_CHECKING, Any

from .spec import HEALTH, MODELS

if TYPE_CHECKING:
    from .env import SimProc

_DC_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


class SimEventSet:
    def __init__(self) -> None:
        self.events: queue.Queue[Any] = queue.Queue()


class SimDevice:
    """One simulated card; ``index`` is its NVML index, its identity (UUID, serial,
    bus, noise) comes from its place in the spec, so a ``missing`` GPU before it
    changes its index and nothing else."""

    def __init__(self, index: int, model_key: str, hostname: str, seed: int) -> None:
        self.index = index
        self.model = MODELS[model_key]
        self.health = HEALTH[model_key]
        self.model_key = model_key
        digest = hashlib.sha256(f"{hostname}/{index}".encode()).hexdigest()
        d = digest
        self.uuid = f"GPU-{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"
        self.serial = str(int(digest[32:44], 16))[:13].rjust(13, "1")
        bus = _DC_BUSES[index] if index < len(_DC_BUSES) else 0x01 + index
        self.pci_bus_id = "00000000:%02X:00.0" % (bus & 0xFF)
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
        self.resets = 0
        """GPU resets done (``nvmlDeviceResetGpu``)."""

    def age(self, kind: str) -> int:
        """Samples since fault ``kind`` was armed."""
        return max(0, self.samples - self.armed.get(kind, self.samples))
