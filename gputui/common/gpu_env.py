"""The shell line ``gputui env`` prints (and the console copies), built only from
validated GPU UUIDs.

``eval "$(gputui env)"`` runs whatever the line says, so the client builds it itself
from the UUIDs of the user's claims, each checked against :data:`GPU_UUID`: nothing
else the head sends (or anyone posing as the head) ever reaches the shell. A value
that is not a GPU UUID is refused, never quoted or cleaned into the line.

Imports only ``re``: a scheduler verb and the wire models both use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["GPU_UUID", "GPU_UUID_PATTERN", "export_line", "gpu_uuids"]

GPU_UUID_PATTERN = r"(GPU|MIG)-[0-9A-Za-z/-]{1,96}"
"""A GPU or MIG UUID as NVML gives it (``MIG-GPU-…/1/0`` too): no character a shell
treats specially, no comma (the separator of ``CUDA_VISIBLE_DEVICES``)."""
GPU_UUID = re.compile(GPU_UUID_PATTERN)
"""Use with ``fullmatch`` (a ``$`` would let a trailing newline through)."""
MAX_UUIDS = 256
"""The most GPUs one line names (the head's claim limit)."""


def gpu_uuids(values: object) -> list[str]:
    """``values`` as a list of GPU UUIDs; ``ValueError`` unless every item is one."""
    if not isinstance(values, list) or len(values) > MAX_UUIDS:
        raise ValueError(f"not a list of at most {MAX_UUIDS} GPU UUIDs")
    for value in values:
        if not isinstance(value, str) or GPU_UUID.fullmatch(value) is None:
            raise ValueError("not a GPU UUID")
    return list(values)


def export_line(uuids: Iterable[str]) -> str:
    """``export CUDA_VISIBLE_DEVICES=UUID,…`` for these GPUs; ``ValueError`` for
    anything that is not a GPU UUID."""
    checked = gpu_uuids(list(uuids))
    return f"export CUDA_VISIBLE_DEVICES={','.join(checked)}"
