"""Which GPUs a job's processes see: the environment variables for its cards' vendor.

An NVIDIA job gets ``CUDA_VISIBLE_DEVICES`` with its cards' UUIDs. An AMD job gets
``ROCR_VISIBLE_DEVICES`` with its cards as ROCm's runtime names them (``GPU-<16 hex>``,
or the card's index among the AMD cards where it has no such UUID), and
``HIP_VISIBLE_DEVICES`` numbering those it sees from 0 (HIP counts after ROCr has
hidden the others); ``CUDA_VISIBLE_DEVICES`` is set empty, so a CUDA program in it sees
no NVIDIA card of a mixed host (HIP reads ``CUDA_VISIBLE_DEVICES`` only where
``HIP_VISIBLE_DEVICES`` is unset). Placement never mixes vendors in one job; a launch
that does is refused.
"""

from __future__ import annotations

from typing import Mapping

from .signals import RequestError


def visible_env(gpus: list[str], amd: Mapping[str, str]) -> dict[str, str]:
    """The visibility variables for a job on ``gpus`` (UUIDs); ``amd`` maps the host's
    AMD cards' UUIDs to their ``ROCR_VISIBLE_DEVICES`` names. ``RequestError`` when the
    cards are of both vendors."""
    rocr = [amd[u] for u in gpus if u in amd]
    if not rocr:
        return {"CUDA_VISIBLE_DEVICES": ",".join(gpus)}
    if len(rocr) != len(gpus):
        raise RequestError(
            "bad-request", "gpu_uuids mixes NVIDIA and AMD cards: a job runs on one vendor's"
        )
    return {
        "ROCR_VISIBLE_DEVICES": ",".join(rocr),
        "HIP_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(rocr))),
        "CUDA_VISIBLE_DEVICES": "",
    }
