"""The shell line ``gputui env`` prints (and the console copies), and the variables
``gputui run`` sets, built only from validated GPU UUIDs.

``eval "$(gputui env)"`` runs whatever the line says, so the client builds it itself
from the UUIDs of the user's claims, each checked against :data:`GPU_UUID`: nothing
else the head sends (or anyone posing as the head) ever reaches the shell. A value
that is not a GPU UUID is refused, never quoted or cleaned into the line.

Imports only ``re``: a scheduler verb and the wire models both use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "GPU_UUID",
    "GPU_UUID_PATTERN",
    "ROCM_UUID",
    "ROCM_UUID_PATTERN",
    "export_line",
    "gpu_uuids",
    "visible_env",
]

GPU_UUID_PATTERN = r"(GPU|MIG)-[0-9A-Za-z/-]{1,96}"
"""A GPU or MIG UUID as NVML gives it (``MIG-GPU-…/1/0`` too): no character a shell
treats specially, no comma (the separator of ``CUDA_VISIBLE_DEVICES``)."""
GPU_UUID = re.compile(GPU_UUID_PATTERN)
"""Use with ``fullmatch`` (a ``$`` would let a trailing newline through)."""
ROCM_UUID_PATTERN = r"GPU-[0-9a-f]{16}"
"""An AMD card's UUID as ROCm names it (``rocminfo``; the helper's ``amd.ROCR_UUID_RE``,
kept equal by a test): an NVIDIA UUID is never of this form (it has dashes)."""
ROCM_UUID = re.compile(ROCM_UUID_PATTERN)
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


def visible_env(uuids: Iterable[str]) -> dict[str, str]:
    """The variables that show a program these GPUs: ``CUDA_VISIBLE_DEVICES`` with their
    UUIDs; for AMD cards (all of them in ROCm's form), ``ROCR_VISIBLE_DEVICES`` with
    their UUIDs, ``HIP_VISIBLE_DEVICES`` counting them from 0 and an empty
    ``CUDA_VISIBLE_DEVICES`` (as the helper sets for a job: ``remote.visible``).
    ``ValueError`` for anything that is not a GPU UUID."""
    checked = gpu_uuids(list(uuids))
    if checked and all(ROCM_UUID.fullmatch(u) for u in checked):
        return {
            "ROCR_VISIBLE_DEVICES": ",".join(checked),
            "HIP_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(checked))),
            "CUDA_VISIBLE_DEVICES": "",
        }
    return {"CUDA_VISIBLE_DEVICES": ",".join(checked)}


def export_line(uuids: Iterable[str]) -> str:
    """``export CUDA_VISIBLE_DEVICES=UUID,…`` for these GPUs (for AMD cards, the
    ``visible_env`` variables, one ``export`` each, joined by ``; ``); ``ValueError``
    for anything that is not a GPU UUID."""
    return "; ".join(f"export {name}={value}" for name, value in visible_env(uuids).items())
