"""Naming a host or a GPU in a request: how one is looked up, and the one line that
says it names nothing (with the names that would have done), the same for every op
that takes one (submit, claim, drain, unfence, force-free, health).

Pure: plain strings and the head's ``Words`` (the line's template and args, for a
client to show in its user's language), no store, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from gputui.common.i18n import N_
from gputui.wire.words import Words, say

HOSTS_SHOWN = 8
GPUS_SHOWN = 16


class _Card(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def uuid(self) -> str: ...


Card = TypeVar("Card", bound=_Card)


def no_host_words(name: str, known: Iterable[str]) -> Words:
    """``no host named 'x' (hosts: a, b)``: the first few known names, or none."""
    shown = ", ".join(sorted(set(known))[:HOSTS_SHOWN])
    if not shown:
        return say(N_("no host named {host} (hosts: none)"), host=repr(name))
    return say(N_("no host named {host} (hosts: {hosts})"), host=repr(name), hosts=shown)


def no_host(name: str, known: Iterable[str]) -> str:
    return no_host_words(name, known).english()


def no_gpu_words(target: str, host: str, gpus: Iterable[_Card]) -> Words:
    """``no GPU 'a:9' (GPUs of a: 0, 1)``: the host's GPU indexes, or none."""
    indexes = ", ".join(map(str, sorted({g.index for g in gpus})[:GPUS_SHOWN]))
    if not indexes:
        return say(N_("no GPU {gpu} (GPUs of {host}: none)"), gpu=repr(target), host=host)
    return say(
        N_("no GPU {gpu} (GPUs of {host}: {indexes})"), gpu=repr(target), host=host, indexes=indexes
    )


def no_gpu(target: str, host: str, gpus: Iterable[_Card]) -> str:
    return no_gpu_words(target, host, gpus).english()


def gpus_named(gpus: Sequence[Card], ref: str) -> list[Card]:
    """One host's GPUs that ``ref`` names: an index (the card, not its MIG slices,
    which share its index), or a uuid in any case (a slice's ``MIG-`` one too)."""
    if ref.isascii() and ref.isdigit():
        return [g for g in gpus if g.index == int(ref) and getattr(g, "mig_profile", None) is None]
    return [g for g in gpus if g.uuid.lower() == ref.lower()]
