"""Naming a host or a GPU in a request: how one is looked up, and the one line that
says it names nothing (with the names that would have done), the same for every op
that takes one (submit, claim, drain, unfence, force-free, health).

Pure: plain strings, no store, no wire.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

HOSTS_SHOWN = 8
GPUS_SHOWN = 16


class _Card(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def uuid(self) -> str: ...


Card = TypeVar("Card", bound=_Card)


def no_host(name: str, known: Iterable[str]) -> str:
    """``no host named 'x' (hosts: a, b)``: the first few known names, or none."""
    shown = ", ".join(sorted(set(known))[:HOSTS_SHOWN]) or "none"
    return f"no host named {name!r} (hosts: {shown})"


def no_gpu(target: str, host: str, gpus: Iterable[_Card]) -> str:
    """``no GPU 'a:9' (GPUs of a: 0, 1)``: the host's GPU indexes, or none."""
    indexes = sorted({g.index for g in gpus})[:GPUS_SHOWN]
    return f"no GPU {target!r} (GPUs of {host}: {', '.join(map(str, indexes)) or 'none'})"


def gpus_named(gpus: Sequence[Card], ref: str) -> list[Card]:
    """One host's GPUs that ``ref`` names: an index, or a uuid in any case."""
    if ref.isascii() and ref.isdigit():
        return [g for g in gpus if g.index == int(ref)]
    return [g for g in gpus if g.uuid.lower() == ref.lower()]
