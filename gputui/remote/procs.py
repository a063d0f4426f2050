"""What /proc says about a process: owner, command line, start time, container, parents.

Every reader returns what it could learn; a pid that vanished or is not readable
gives ``None`` fields, never an exception. ``ProcessTable`` caches the static facts
per pid (checked against the start time) so a 1 Hz sample re-reads one small file.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Iterable

try:
    import pwd
except ImportError:  # pragma: no cover - not Linux
    pwd = None  # type: ignore[assignment]

PROC = "/proc"
COMMAND_MAX = 512
ANCESTOR_DEPTH = 4
"""Parents named per process (parent, grandparent, ...): enough for a launcher's chain."""
NAME_MAX = 64
PARENTS_MAX = 1024
"""Entries in a sample's ``parents`` table (the console keeps as many: MAX_PARENTS)."""
PID_MAX = 2**22
_CONTAINER_RE = re.compile(
    r"(?:docker|containerd|podman|libpod|kubepods|crio)[^\n]*?([0-9a-f]{64})"
)


def _read(path: str, limit: int = 65536) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except (OSError, ValueError):
        return None


def read_start_ticks(pid: int, proc: str = PROC) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks after boot), or None."""
    data = _read(f"{proc}/{pid}/stat", 4096)
    return parse_stat_start_ticks(data) if data else None


def parse_stat_start_ticks(data: bytes) -> int | None:
    """Parse after the last ')' so a command name with spaces or ')' cannot shift fields."""
    return parse_stat(data)[1]


def parse_stat(data: bytes) -> tuple[int | None, int | None]:
    """(parent pid, start ticks) from a /proc/PID/stat line; None where unreadable.

    Fields are read after the last ')' so a name with spaces or ')' cannot shift them.
    """
    close = data.rfind(b")")
    if close < 0:
        return None, None
    fields = data[close + 1 :].split()
    # fields[0] is field 3 (state), fields[1] field 4 (ppid), fields[19] field 22.
    ppid = _number(fields[1]) if len(fields) > 1 else None
    ticks = _number(fields[19]) if len(fields) > 19 else None
    return (ppid if ppid is not None and ppid <= PID_MAX else None), ticks


def _number(field: bytes) -> int | None:
    try:
        value = int(field)
    except ValueError:
        return None
    return value if value >= 0 else None


def stat_name(data: bytes) -> str:
    """The name between the first '(' and the last ')' of a stat line (``comm``), cleaned."""
    open_, close = data.find(b"("), data.rfind(b")")
    if open_ < 0 or close <= open_:
        return ""
    raw = data[open_ + 1 : close].decode("utf-8", errors="replace")
    return "".join(ch if ch.isprintable() else "?" for ch in raw)[:NAME_MAX]


def read_ancestors(ppid: int | None, proc: str = PROC) -> list[dict[str, Any]]:
    """The parent chain from ``ppid`` up, nearest first: ``{"pid", "ppid", "name"}`` each.

    At most ``ANCESTOR_DEPTH``; it stops at pid 0 (the kernel, or a parent outside this
    pid namespace), at a parent that vanished, and at a loop (a pid seen twice).
    """
    chain: list[dict[str, Any]] = []
    seen: set[int] = set()
    pid = ppid
    while pid and pid not in seen and len(chain) < ANCESTOR_DEPTH:
        seen.add(pid)
        data = _read(f"{proc}/{pid}/stat", 4096)
        if not data:
            break
        up = parse_stat(data)[0]
        chain.append({"pid": pid, "ppid": up or 0, "name": stat_name(data)})
        pid = up
    return chain


def read_uid(pid: int, proc: str = PROC) -> int | None:
    """The real uid of ``pid`` (from ``status``; the owner of ``/proc/PID`` is root for
    non-dumpable and setuid processes, which would name the wrong person)."""
    try:
        with open(f"{proc}/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


_USERS: dict[int, str] = {}


def user_name(uid: int | None) -> str | None:
    """The login name for ``uid``, falling back to the number as text."""
    if uid is None:
        return None
    name = _USERS.get(uid)
    if name is None:
        name = str(uid)
        if pwd is not None:
            with contextlib.suppress(KeyError, OSError):
                name = pwd.getpwuid(uid).pw_name
        _USERS[uid] = name
    return name


def read_command(pid: int, proc: str = PROC) -> str | None:
    """The command line with NUL separators as spaces, capped; ``comm`` for kernel threads."""
    data = _read(f"{proc}/{pid}/cmdline", COMMAND_MAX * 4)
    if data:
        cmd = data.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", errors="replace")
        if cmd.strip():
            return cmd[:COMMAND_MAX]
    comm = _read(f"{proc}/{pid}/comm", 256)
    if comm:
        return comm.rstrip(b"\n").decode("utf-8", errors="replace")[:COMMAND_MAX]
    return None


def read_container(pid: int, proc: str = PROC) -> str | None:
    """A docker/containerd/podman/kubernetes container id (12 hex) from the cgroup path."""
    data = _read(f"{proc}/{pid}/cgroup", 16384)
    if not data:
        return None
    match = _CONTAINER_RE.search(data.decode("utf-8", errors="replace"))
    return match.group(1)[:12] if match else None


_BOOT_TIME: float | None = None


def boot_time(proc: str = PROC) -> float | None:
    """``btime`` from /proc/stat: the epoch second the host booted (cached)."""
    global _BOOT_TIME
    if _BOOT_TIME is None or proc != PROC:
        data = _read(proc + "/stat", 1 << 20) or b""
        found = None
        for line in data.splitlines():
            if line.startswith(b"btime "):
                try:
                    found = float(line.split()[1])
                except (IndexError, ValueError):
                    found = None
                break
        if proc != PROC:
            return found
        _BOOT_TIME = found
    return _BOOT_TIME


def clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK")) or 100
    except (ValueError, OSError, AttributeError):
        return 100


_CLK_TCK = clock_ticks()


def start_time(ticks: int | None, proc: str = PROC) -> float | None:
    if ticks is None:
        return None
    btime = boot_time(proc)
    if btime is None:
        return None
    return round(btime + ticks / float(_CLK_TCK), 2)


def describe(pid: int, proc: str = PROC, *, stat: bytes | None = None) -> dict[str, Any]:
    """Everything /proc tells about ``pid``; fields it could not read are None.

    ``ppid`` is there only when the stat line could be read: a client takes its absence
    for an older helper. The chain above it goes in the sample's ``parents`` table
    (``ProcessTable.parents``), each parent once. ``stat``: its stat line, where the
    caller has just read it (not read twice).
    """
    data = stat if stat is not None else _read(f"{proc}/{pid}/stat", 4096)
    ppid, ticks = parse_stat(data) if data else (None, None)
    uid = read_uid(pid, proc)
    info: dict[str, Any] = {
        "pid": pid,
        "uid": uid,
        "user": user_name(uid),
        "command": read_command(pid, proc) or "",
        "start_ticks": ticks,
        "start_time": start_time(ticks, proc),
        "container": read_container(pid, proc),
    }
    if ppid is not None:
        info["ppid"] = ppid
    return info


class ProcessTable:
    """Caches ``describe`` and the parent chain per pid; a changed start time (pid
    reused) or parent (the parent died and the process was re-parented) re-reads them.
    One stat read per lookup."""

    def __init__(self, proc: str = PROC) -> None:
        self.proc = proc
        self._cache: dict[int, dict[str, Any]] = {}
        self._chains: dict[int, list[dict[str, Any]]] = {}

    def lookup(self, pid: int) -> dict[str, Any]:
        data = _read(f"{self.proc}/{pid}/stat", 4096)
        ppid, ticks = parse_stat(data) if data else (None, None)
        cached = self._cache.get(pid)
        if (
            cached is not None
            and ticks is not None
            and cached["start_ticks"] == ticks
            and cached.get("ppid") == ppid
        ):
            return dict(cached)
        info = describe(pid, self.proc, stat=data)  # the stat line read above, once
        self._chains[pid] = read_ancestors(info.get("ppid"), self.proc)
        if info["start_ticks"] is not None:
            self._cache[pid] = info
        else:  # its chain is for this sample only; keep_only forgets it
            self._cache.pop(pid, None)
        return dict(info)

    def parents(self, pids: Iterable[int]) -> list[dict[str, Any]]:
        """The sample's ``parents`` table for these looked-up pids: every process up
        their chains once, nearest levels first (a cut loses the far ones), at most
        ``PARENTS_MAX``."""
        chains = [self._chains.get(pid, ()) for pid in dict.fromkeys(pids)]
        table: dict[int, dict[str, Any]] = {}
        for level in range(ANCESTOR_DEPTH):
            for chain in chains:
                if level < len(chain) and len(table) < PARENTS_MAX:
                    table.setdefault(chain[level]["pid"], chain[level])
        return list(table.values())

    def keep_only(self, pids: Iterable[int]) -> None:
        """Forget pids that are no longer on any GPU, so the cache stays small."""
        live = set(pids)
        for cache in (self._cache, self._chains):
            for pid in [p for p in cache if p not in live]:
                del cache[pid]
