"""A ProxyJump chain, ``[user@]host[:port][,...]``, parsed the one way: hosts.yaml's
``proxy_jump`` is checked with it when the file is loaded (a bad one is a
``FILE:LINE`` error, not a failure at connect time), and the fleet connects through
the hops it gives (``gputui.fleet.jumps``). Pure: no SSH library here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.common.i18n import _

MAX_PORT = 65535


class JumpError(ValueError):
    """A chain that is no ProxyJump: ``proxy_jump SPEC: WHY`` (the line's English
    shape whatever the language ``why`` is in)."""

    def __init__(self, spec: str, why: str) -> None:
        super().__init__(f"proxy_jump {spec!r}: {why}")


@dataclass(frozen=True, slots=True)
class Hop:
    """One ``[user@]host[:port]`` of a ProxyJump chain."""

    user: str | None
    host: str
    port: int | None

    def __str__(self) -> str:
        where = f"[{self.host}]" if ":" in self.host else self.host
        where = f"{where}:{self.port}" if self.port is not None else where
        return f"{self.user}@{where}" if self.user else where


Chain = tuple[Hop, ...]


def parse_chain(spec: str) -> Chain:
    """``[user@]host[:port][,...]`` (``[v6addr]:port`` too) -> the hops, first first;
    ``none`` (as in ssh_config) -> no hops. ``ValueError`` naming what is wrong."""
    if spec.strip().lower() == "none":
        return ()
    parts = [part.strip() for part in spec.split(",")]
    if not all(parts):
        raise JumpError(spec, _("empty hop"))
    return tuple(parse_hop(part) for part in parts)


def _port(spec: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_PORT:
        raise JumpError(spec, _("port must be a number from 1 to {most}").format(most=MAX_PORT))
    return int(text)


def parse_hop(spec: str) -> Hop:
    """``[user@]host[:port]`` (``[v6addr]:port`` too) -> a ``Hop``."""
    user, at, rest = spec.rpartition("@")
    if at and not user:
        raise JumpError(spec, _("empty user before '@'"))
    port: int | None = None
    if rest.startswith("["):
        host, closed, tail = rest[1:].partition("]")
        if not closed or (tail and not tail.startswith(":")):
            raise JumpError(spec, _("an address in brackets is [addr] or [addr]:port"))
        if tail:
            port = _port(spec, tail[1:])
    elif rest.count(":") == 1:
        host, _colon, port_text = rest.partition(":")
        port = _port(spec, port_text)
    else:
        host = rest
    if not host:
        raise JumpError(spec, _("no host"))
    if any(c.isspace() for c in host) or not host.isprintable():
        raise JumpError(spec, _("a space or an unprintable character in the host"))
    return Hop(user or None, host, port)
