"""Who holds a GPU's device files open: the ``holders`` request's scan of /proc.

When a card's memory stays in use with no process NVML can name (a zombie
context, a process in another PID namespace, a debugger), the one place left to
look is which processes have ``/dev/nvidiaN`` (that card) or the shared
``/dev/nvidiactl`` and ``/dev/nvidia-uvm`` open: each ``/proc/PID/fd`` link. A
process whose fds cannot be read (another user's, when the helper is not root)
is counted, not named. At most ``MAX_HOLDERS`` are listed; a note says when more
were found. ``proc`` and ``dev`` are parameters so a test can point the scan at a
tree it built.
"""

from __future__ import annotations

import os
from typing import Any

from .procs import PROC, read_command, read_uid, user_name

MAX_HOLDERS = 256
"""Also the client wire's limit (``gputui.wire.ops`` keeps its own copy)."""
MAX_FDS = 65536
"""fds read per process at most (a process with millions of sockets stays cheap)."""
MAX_PIDS = 1 << 22
SHARED = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
"""Device files every CUDA process holds, whichever card it uses."""
COMMAND_CELLS = 256
UID_NONE = 2**32 - 1


def _pids(proc: str) -> list[int]:
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    # A pid's directory is its number as the kernel writes it, with no leading zero:
    # "01" is no pid's (read as 1, its files would be looked for under "1").
    pids = [int(n) for n in names if n.isascii() and n.isdigit() and n[:1] != "0" and len(n) < 9]
    return sorted(p for p in pids if 0 < p < MAX_PIDS)


def _held(proc: str, pid: int, wanted: dict[str, str]) -> list[str] | None:
    """The device names in ``wanted`` that ``pid`` holds; None when its fds are not readable."""
    found: set[str] = set()
    try:
        with os.scandir(f"{proc}/{pid}/fd") as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_FDS:
                    break
                try:
                    target = os.readlink(entry.path)
                except OSError:
                    continue
                name = wanted.get(target)
                if name is not None:
                    found.add(name)
    except FileNotFoundError:
        return []  # it exited while the scan ran
    except OSError:  # PermissionError: another user's process, and this helper is not root
        return None
    return sorted(found)


def scan_holders(minor: int, *, proc: str = PROC, dev: str = "/dev") -> dict[str, Any]:
    """The processes holding GPU ``minor``'s device file (``dev/nvidia<minor>``) or a
    shared one open, as the ``holders`` result's value."""
    card = f"nvidia{minor}"
    wanted = {f"{dev}/{name}": name for name in (card, *SHARED)}
    holders: list[dict[str, Any]] = []
    unreadable = found = 0
    me = os.getpid()
    for pid in _pids(proc):
        held = _held(proc, pid, wanted)
        if held is None:
            unreadable += 1
            continue
        if not held:
            continue
        found += 1
        if len(holders) >= MAX_HOLDERS:
            continue
        uid = read_uid(pid, proc)
        if uid is not None and not 0 <= uid < UID_NONE:
            uid = None  # (uid_t)-1 is "no one"; anything larger is not a uid
        holders.append(
            {
                "pid": pid,
                "uid": uid,
                "user": user_name(uid),
                "command": (read_command(pid, proc) or "")[:COMMAND_CELLS],
                "devices": held,
                "card": card in held,
                "helper": pid == me,
            }
        )
    notes = []
    if found > len(holders):
        notes.append(f"{found} processes hold them; the first {len(holders)} are listed")
    if unreadable:
        notes.append(
            f"{unreadable} processes of other users could not be read (the helper is not root)"
        )
    return {
        "device": f"{dev}/{card}",
        "holders": holders,
        "found": found,
        "unreadable": unreadable,
        "notes": notes,
    }
