"""A GPU model's short label, for a column that has room for a few cells.

``model_label("NVIDIA A100-SXM4-80GB", 81920)`` is ``A100-80G``: the family, and the
memory where the family comes in more than one size (the name says it, or the card
reports it). ``NVIDIA GeForce RTX 3090`` is ``3090``, ``NVIDIA L40S`` is ``L40S``,
``AMD Instinct MI300X`` is ``MI300X``. Form factor (SXM4, PCIe), memory type (HBM3)
and the vendor's words say nothing a team choosing a card needs at a glance; the
detail pane and ``--json`` keep the whole name.

Stdlib only (the command-line verbs use it too). The name comes from NVML on a host,
so it is untrusted: anything not printable is dropped, and the label is never empty
and never longer than ``LABEL_MAX`` cells.
"""

from __future__ import annotations

import re
from functools import lru_cache

LABEL_MAX = 8
"""The longest label: ``A100-80G``, ``H100-94G``, ``RTX8000``, ``6000Ada`` and ``1080Ti`` fit."""

_VENDOR = ("nvidia", "tesla", "geforce", "quadro", "titan", "amd", "instinct", "radeon")
_LINE = ("rtx", "gtx", "rx", "pro")
"""Words before a consumer number (``RTX 3090``, ``RX 7900``) or a workstation letter
(``RTX A6000``, ``PRO W7900``)."""
_QUALIFIERS = {"ti": "Ti", "super": "S", "ada": "Ada", "xtx": "XTX", "xt": "XT"}
"""Words after the family that make a different card: kept, short."""
_SIZED = frozenset({"A100", "A800", "H100", "H800", "V100", "P100"})
"""Families sold with more than one memory size: the label says which."""
_GB = re.compile(r"(\d{1,4})GB?", re.IGNORECASE)
_WORDS = re.compile(r"[\s\-_/]+")
MAX_MEMORY_MIB = 16 * 1024 * 1024
"""A reported memory size above this (16 TiB) is not believed."""


@lru_cache(maxsize=256)
def model_label(name: str | None, memory_mib: int | None = None) -> str:
    """The short label of a GPU model named ``name`` (NVML) with ``memory_mib`` of memory."""
    words = [w for w in _WORDS.split(_printable(name or "")) if w]
    while words and words[0].lower() in _VENDOR:
        words = words[1:]
    line = ""
    if len(words) > 1 and words[0].lower() in _LINE:
        line, words = words[0].upper(), words[1:]
    if not words:
        return "unknown"
    family = words[0]
    if line and family.isdigit() and family.endswith("000"):  # RTX 8000: not a GeForce
        family = line + family
    size: int | None = None
    for word in words[1:]:
        qualifier = _QUALIFIERS.get(word.lower())
        if qualifier is not None:
            family += qualifier
        match = _GB.fullmatch(word)
        if match is not None and size is None:
            size = int(match.group(1))
    if size is None and family.upper() in _SIZED:
        size = _gib(memory_mib)
    for label in (f"{family}-{size}G" if size else family, family, family.removeprefix(line)):
        if len(label) <= LABEL_MAX:
            return label
    return family[: LABEL_MAX - 1] + "…"


def _printable(text: str) -> str:
    """Printable ASCII only: a label is a few cells of a fixed column, never wide."""
    return "".join(ch if " " <= ch < "\x7f" else " " for ch in text[:256])


def _gib(memory_mib: int | None) -> int | None:
    """Whole GiB, as cards are sold (79.6 GiB reported is an 80 GB card)."""
    if memory_mib is None or isinstance(memory_mib, bool) or not 0 < memory_mib <= MAX_MEMORY_MIB:
        return None
    return max(1, round(memory_mib / 1024))
