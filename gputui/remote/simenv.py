"""Which host processes belong to which simulated GPU, read from their environment.

A process whose environment has ``GPUTUI_SIM_GPU=<index or uuid>[,...]`` runs on
those simulated GPUs, holding ``GPUTUI_SIM_MEM_MIB`` MiB at ``GPUTUI_SIM_UTIL`` % load.
/proc/PID/environ is readable for one's own processes (or as root).
"""

from __future__ import annotations

import os
import time
from typing import Callable, NamedTuple

from .procs import parse_stat_start_ticks

ENV_GPU = "GPUTUI_SIM_GPU"
ENV_MEM = "GPUTUI_SIM_MEM_MIB"
ENV_UTIL = "GPUTUI_SIM_UTIL"
DEFAULT_MEM_MIB = 2048
DEFAULT_UTIL = 90


class SimProc(NamedTuple):
    pid: int
    targets: tuple[str, ...]
    mem_mib: int
    util: int


def _int_env(value: bytes | None, default: int, low: int, high: int) -> int:
    try:
        return max(low, min(high, int(value))) if value is not None else default
    except ValueError:
        return default


class EnvScanner:
    """Finds processes that declare a simulated GPU in their environment.

    Each pid's environment is read once; later scans only list /proc and re-read the
    stat line of the few simulated processes (start time, zombie state).
    """

    def __init__(
        self,
        proc: str = "/proc",
        min_interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.proc = proc
        self.min_interval = min_interval
        self.clock = clock
        self._known: dict[int, tuple[int, SimProc] | None] = {}
        self._last = -1e18
        self._procs: list[SimProc] = []

    def _stat(self, pid: int) -> tuple[int | None, bool]:
        try:
            with open(f"{self.proc}/{pid}/stat", "rb") as fh:
                data = fh.read(4096)
        except OSError:
            return None, False
        close = data.rfind(b")")
        zombie = data[close + 1 : close + 4].strip()[:1] in (b"Z", b"X")
        return parse_stat_start_ticks(data), zombie

    def _classify(self, pid: int) -> tuple[int, SimProc] | None:
        try:
            with open(f"{self.proc}/{pid}/environ", "rb") as fh:
                env = fh.read(1 << 20)
        except OSError:
            return None
        if ENV_GPU.encode() not in env:
            return None
        values: dict[bytes, bytes] = {}
        for item in env.split(b"\0"):
            if item.startswith(b"GPUTUI_SIM_"):
                key, _, value = item.partition(b"=")
                values[key] = value
        raw = values.get(ENV_GPU.encode(), b"").decode("ascii", errors="replace")
        targets = tuple(t.strip().lower() for t in raw.split(",") if t.strip())
        if not targets:
            return None
        ticks, _ = self._stat(pid)
        mem = _int_env(values.get(ENV_MEM.encode()), DEFAULT_MEM_MIB, 0, 1 << 22)
        util = _int_env(values.get(ENV_UTIL.encode()), DEFAULT_UTIL, 0, 100)
        return (ticks or 0), SimProc(pid, targets, mem, util)

    def snapshot(self) -> list[SimProc]:
        now = self.clock()
        if now - self._last < self.min_interval:
            return self._procs
        self._last = now
        try:
            pids = {int(n) for n in os.listdir(self.proc) if n.isdigit()}
        except OSError:
            pids = set()
        for pid in list(self._known):
            if pid not in pids:
                del self._known[pid]
        found: list[SimProc] = []
        for pid in pids:
            if pid not in self._known:
                self._known[pid] = self._classify(pid)
            entry = self._known[pid]
            if entry is None:
                continue
            ticks, zombie = self._stat(pid)
            if ticks is None or zombie:
                continue
            if ticks != entry[0]:  # pid reused: classify the new process
                entry = self._known[pid] = self._classify(pid)
                if entry is None:
                    continue
            found.append(entry[1])
        self._procs = found
        return found
