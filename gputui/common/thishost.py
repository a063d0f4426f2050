"""Which of the head's hosts this machine is (``gputui env`` and ``gputui run``
without ``--host``).

A hosts.yaml name is the admin's choice and need not be the machine's hostname
(``gpu-a`` for ``dgx-0413.cluster.example``). So the head's host table (each
host's name, address and whether it is ``local: true``) is matched against this
machine: a ``local: true`` host is this machine when the head runs here (its
socket is reached directly, not over SSH); otherwise a host whose name or address
is this machine's hostname, short name or FQDN, or whose address is (or resolves
to) one of this machine's own IP addresses. Exactly one must match: none, or
several, is one line naming the choices (``--host`` picks one).

Stdlib only (the CLI stays light).
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gputui.common.i18n import N_, _

NOT_A_NAME = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
SHOWN = 12
"""At most this many host names in the one line that names the choices."""


class NoHost(Exception):
    """This machine is none, or more than one, of the head's hosts: one line."""


@dataclass(frozen=True, slots=True)
class HeadHost:
    """One row of the head's host table (``hosts`` request)."""

    name: str
    address: str
    local: bool = False


@dataclass(frozen=True, slots=True)
class Here:
    """What this machine is called and where it answers."""

    hostname: str
    names: frozenset[str]
    """Hostname, short name and FQDN, lower case."""
    addresses: frozenset[str]
    """Its own IP addresses (loopback left out), normalised."""
    on_head: bool
    """The head runs on this machine (its socket is reached directly)."""


def _ip(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.split("%", 1)[0]))
    except ValueError:
        return None


def _proc_addresses(fib_trie: Path, if_inet6: Path) -> set[str]:
    """This machine's own addresses as Linux lists them (none where it does not)."""
    found: set[str] = set()
    try:
        lines = fib_trie.read_text().splitlines()
    except OSError:
        lines = []
    for before, line in itertools.pairwise(lines):
        if "/32 host LOCAL" in line:  # the address is the last field of the line above
            ip = _ip(before.split()[-1]) if before.split() else None
            if ip is not None:
                found.add(ip)
    try:
        rows = if_inet6.read_text().splitlines()
    except OSError:
        rows = []
    for row in rows:
        hexed = row.split()[0] if row.split() else ""
        if len(hexed) == 32:
            ip = _ip(":".join(hexed[i : i + 4] for i in range(0, 32, 4)))
            if ip is not None:
                found.add(ip)
    return found


def here(
    *,
    on_head: bool,
    fib_trie: Path = Path("/proc/net/fib_trie"),
    if_inet6: Path = Path("/proc/net/if_inet6"),
) -> Here:
    hostname = socket.gethostname().lower()
    names = {hostname, hostname.split(".")[0]}
    with contextlib.suppress(OSError):
        names.add(socket.getfqdn().lower())
    addresses = _proc_addresses(fib_trie, if_inet6)
    for name in sorted(names):
        addresses |= resolve(name)
    addresses = {a for a in addresses if _own(a)}
    names -= NOT_A_NAME  # what a machine with no name of its own resolves to
    return Here(hostname, frozenset(n for n in names if n), frozenset(addresses), on_head)


def _own(address: str) -> bool:
    """Whether an address names this machine alone (not loopback, not link-local)."""
    ip = ipaddress.ip_address(address)
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified)


def resolve(name: str) -> set[str]:
    """The IP addresses ``name`` resolves to (none when it does not)."""
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return set()
    return {ip for info in infos if (ip := _ip(str(info[4][0]))) is not None}


def pick(
    hosts: Sequence[HeadHost],
    me: Here,
    resolver: Callable[[str], Iterable[str]] = resolve,
) -> str:
    """The name of the one host in ``hosts`` that is this machine; ``NoHost`` with
    one line naming the choices when none or several are."""
    if me.on_head:
        local = [h.name for h in hosts if h.local]
        if len(local) == 1:
            return local[0]
    # A local host is the head's machine: when the head runs elsewhere, not this one.
    others = [h for h in hosts if me.on_head or not h.local]
    found = [h for h in others if _named(h, me)] or [
        h for h in others if me.addresses & {_ip(h.address) or "", *resolver(h.address)}
    ]
    names = sorted({h.name for h in found})
    if len(names) == 1:
        return names[0]
    shown = ", ".join(names[:SHOWN] if names else sorted(h.name for h in hosts)[:SHOWN])
    listed = names or [h.name for h in hosts]
    more = len(listed) - SHOWN
    what = me.hostname or "?"
    if not names and not hosts:
        raise NoHost(_("the head has no hosts; name one with --host"))
    said = (_SEVERAL if names else _NONE)[more > 0]
    raise NoHost(_(said).format(what=what, shown=shown, more=more))


_SEVERAL = (
    N_("this machine ({what}) matches several of the head's hosts: {shown}; name one with --host"),
    N_(
        "this machine ({what}) matches several of the head's hosts: {shown} and {more} more;"
        " name one with --host"
    ),
)
_NONE = (
    N_("this machine ({what}) is none of the head's hosts ({shown}); name one with --host"),
    N_(
        "this machine ({what}) is none of the head's hosts ({shown} and {more} more);"
        " name one with --host"
    ),
)
"""Why no host was picked: (without, with) ``and N more`` names."""


def _named(host: HeadHost, me: Here) -> bool:
    for text in (host.name, host.address):
        low = text.lower()
        if low in me.names or (_ip(low) or "") in me.addresses:
            return True
    return False
