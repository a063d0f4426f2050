"""Which pool a GPU is in, by its vendor: AMD cards are pools of their own.

An NVIDIA card is in its host's pool (``hosts.yaml``). An AMD card is in ``amd-`` and
its model (``AMD Instinct MI300X`` is ``amd-mi300x``), whatever its host's pool: a
job asks for AMD cards by that pool (``--pool amd-mi300x``), and one that names no
pool takes NVIDIA cards only (``Want.fits``), so no placement ever mixes vendors.
Pure and total: any model text gives a pool name of ``[a-z0-9-]``, at most
``MAX_POOL`` characters.
"""

from __future__ import annotations

import re

__all__ = ["AMD_POOL_PREFIX", "MAX_POOL", "card_pool"]

AMD_POOL_PREFIX = "amd-"
MAX_POOL = 48
_MAKER_WORDS = re.compile(r"^(amd|advanced micro devices,? inc\.?)\s+|\binstinct\s+", re.I)
_NOT_NAME = re.compile(r"[^a-z0-9]+")


def card_pool(host_pool: str, vendor: str, model: str) -> str:
    """The pool of a GPU of ``vendor`` and ``model`` on a host in ``host_pool``."""
    if vendor != "amd":
        return host_pool
    name = _NOT_NAME.sub("-", _MAKER_WORDS.sub("", model.strip()).lower()).strip("-")
    return (AMD_POOL_PREFIX + name)[:MAX_POOL].rstrip("-") if name else "amd"
