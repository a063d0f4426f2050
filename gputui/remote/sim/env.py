"""Which host processes belong to which simulated GPU, read from their environment.

A process whose environment has ``GPUTUI_SIM_GPU=<index or uuid>[,...]`` runs on
those simulated GPUs, holding ``GPUTUI_SIM_MEM_MIB`` MiB at ``GPUTUI_SIM_UTIL`` % load.
/proc/PID/environ is readable for one's own processes (or as root).

A simulator whose own environment has ``GPUTUI_SIM_SCOPE=S`` counts only processes
whose environment has the same ``GPUTUI_SIM_SCOPE`` (one without it: only processes
without it), so two simulators on one machine (two demos, test runs side by side)
never take each other's processes for their own. The helper passes its scope on to
the jobs it starts in sim mode (``launch.job_env``).
"""

from __future__ import annotations

import os
import time
from typing import Callable, NamedTuple

from ..procs import parse_stat_start_ticks

ENV_GPU = "GPUTUI_SIM_GPU"
ENV_MEM = "GPUTUI_SIM_MEM_MIB"
ENV_UTIL = "GPUTUI_SIM_UTIL"
ENV_SCOPE = "GPUTUI_SIM_SCOPE"
DEFAULT_MEM_MIB = 2048
DEFAULT_UTIL = 90
_ENV_FIRST_READ = 16384
_ENV_MAX = 1 << 20
_EMPTY_ENV_RETRIES = 3


class _NotYet(Exception):
    """The environment read empty: maybe a process still inside exec."""


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

    Each pid's environment is read once. Listing /proc costs time in proportion to
    every process on the host, so it happens at most every ``list_interval`` seconds
    (new processes show up within that); in between, a snapshot only re-reads the
    stat line of the few simulated processes already known (exit, zombie, pid reuse).
    """

    def __init__(
        self,
        proc: str = "/proc",
        min_interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        list_interval: float = 2.0,
        scope: str | None = None,
    ) -> None:
        """``scope``: whose processes count (default: this process's GPUTUI_SIM_SCOPE)."""
        self.proc = proc
        self.scope = (os.environ.get(ENV_SCOPE, "") if scope is None else scope).encode()
        self.min_interval = min_interval
        self.list_interval = list_interval
        self.clock = clock
        self._known: dict[int, tuple[int, SimProc] | None] = {}
        self._sims: dict[int, tuple[int, SimProc]] = {}  # the non-None part of _known
        self._retries: dict[int, int] = {}  # pids whose environment read empty so far
        self._last = -1e18
        self._listed = -1e18
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
                # Small first read: a 1 MiB buffer per pid is an mmap and page faults.
                env = fh.read(_ENV_FIRST_READ)
                if len(env) == _ENV_FIRST_READ:
                    env += fh.read(_ENV_MAX - _ENV_FIRST_READ)
        except OSError:
            return None
        if not env:
            # Either no environment at all (kernel threads) or a process caught inside
            # exec, before the kernel set its new environment up: look again later.
            raise _NotYet()
        if ENV_GPU.encode() not in env:
            return None
        values: dict[bytes, bytes] = {}
        for item in env.split(b"\0"):
            if item.startswith(b"GPUTUI_SIM_"):
                key, _, value = item.partition(b"=")
                values[key] = value
        if values.get(ENV_SCOPE.encode(), b"") != self.scope:
            return None  # another simulator's process
        raw = values.get(ENV_GPU.encode(), b"").decode("ascii", errors="replace")
        targets = tuple(t.strip().lower() for t in raw.split(",") if t.strip())
        if not targets:
            return None
        ticks, _ = self._stat(pid)
        mem = _int_env(values.get(ENV_MEM.encode()), DEFAULT_MEM_MIB, 0, 1 << 22)
        util = _int_env(values.get(ENV_UTIL.encode()), DEFAULT_UTIL, 0, 100)
        return (ticks or 0), SimProc(pid, targets, mem, util)

    def _list(self) -> None:
        """Learn every pid in /proc: forget the gone ones, classify the new ones."""
        try:
            pids = {int(n) for n in os.listdir(self.proc) if n.isdigit()}
        except OSError:
            pids = set()
        known, sims = self._known, self._sims
        for pid in [p for p in known if p not in pids]:
            del known[pid]
            sims.pop(pid, None)
        retries = self._retries
        for pid in [p for p in retries if p not in pids]:
            del retries[pid]
        for pid in pids:
            if pid not in known:
                try:
                    entry = self._classify(pid)
                except _NotYet:
                    retries[pid] = retries.get(pid, 0) + 1
                    if retries[pid] < _EMPTY_ENV_RETRIES:
                        continue  # not remembered: read again at the next listing
                    entry = None
                retries.pop(pid, None)
                known[pid] = entry
                if entry is not None:
                    sims[pid] = entry

    def snapshot(self) -> list[SimProc]:
        now = self.clock()
        if now - self._last < self.min_interval:
            return self._procs
        self._last = now
        if now - self._listed >= self.list_interval:
            self._listed = now
            self._list()
        found: list[SimProc] = []
        known, sims = self._known, self._sims
        for pid, entry in list(sims.items()):
            ticks, zombie = self._stat(pid)
            if ticks is None:  # gone: a new process with this pid is classified afresh
                del sims[pid]
                known.pop(pid, None)
                continue
            if zombie:
                continue
            if ticks != entry[0]:  # pid reused: classify the new process
                try:
                    fresh = self._classify(pid)
                except _NotYet:
                    del sims[pid]
                    known.pop(pid, None)  # unknown again: the next listing reads it
                    continue
                known[pid] = fresh
                if fresh is None:
                    del sims[pid]
                    continue
                sims[pid] = fresh
                found.append(fresh[1])
                continue
            found.append(entry[1])
        self._procs = found
        return found
