"""Who is calling: the kernel says (``SO_PEERCRED``), the system's user database adds the rest.

A request never names its own user. Through SSH (direct-streamlocal), the peer
of the head's socket is the sshd child running as the SSH user, so the same
rule names the right person there too.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct
from dataclasses import dataclass

HEAD_ACTOR = "gputui-head"
"""The user the head's own actions are audited as (uid 0)."""
_UCRED = struct.Struct("3i")


@dataclass(frozen=True, slots=True)
class Caller:
    """A connected client, as the head knows it."""

    uid: int
    user: str
    group: str
    """The primary group's name (accounting)."""
    groups: frozenset[str]
    admin: bool
    pid: int = 0

    def owns(self, uid: int) -> bool:
        return self.uid == uid


def peer_ids(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def user_name(uid: int) -> str:
    """The name of ``uid`` as ``caller_for`` gives it (``uid1234`` without an entry)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


def caller_for(pid: int, uid: int, gid: int, admin_group: str | None) -> Caller:
    """The ``Caller`` for a peer's ids: name and groups from the system, admin by group.

    A uid with no passwd entry is still a caller (``uid1234``), in no group but its
    primary one; root is always an admin (it can do all of this by hand anyway).
    """
    try:
        entry = pwd.getpwuid(uid)
        user, primary = entry.pw_name, entry.pw_gid
        try:
            gids = set(os.getgrouplist(user, primary))
        except OSError:
            gids = {primary}
    except KeyError:
        user, gids = f"uid{uid}", {gid}
        primary = gid
    names: set[str] = set()
    for g in gids:
        try:
            names.add(grp.getgrgid(g).gr_name)
        except KeyError:
            names.add(str(g))
    try:
        group = grp.getgrgid(primary).gr_name
    except KeyError:
        group = str(primary)
    admin = uid == 0 or (admin_group is not None and admin_group in names)
    return Caller(uid=uid, user=user, group=group, groups=frozenset(names), admin=admin, pid=pid)
