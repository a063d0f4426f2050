"""The ``holders`` and ``reset`` requests: what a force-free asks of a GPU's host.

``holders`` lists what holds the card's device files open (``holders``).
``reset`` is refused with the reason while any process is on the card or when the
card is not the one the caller named (its uuid), so a renumbered host never resets
the wrong one; past those checks the helper's resetter does it (``gpureset``:
``nvidia-smi --gpu-reset`` on a real host, ``nvmlDeviceResetGpu`` on the
simulator). A card or host that cannot reset (NotSupported on GeForce, no
nvidia-smi, not root, a timeout) is an answer, ``reset: false`` with why, never a
crash. Both run on the helper's worker threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .gpureset import timeout_from
from .gpus import Gpu, GpuLost
from .holders import scan_holders
from .nvml import NA
from .signals import UUID_RE, RequestError

if TYPE_CHECKING:
    from .helper import Helper

MAX_INDEX = 63
_PIDS_SHOWN = 8


def _gpu(helper: Helper, req: dict[str, Any]) -> Gpu:
    index = req.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_INDEX:
        raise RequestError(
            "bad-request", f"index must be a GPU index 0-{MAX_INDEX}, got {str(index)[:20]!r}"
        )
    for gpu in helper.gpus:
        if gpu.index == index:
            return gpu
    raise RequestError("unknown-gpu", f"no GPU {index} on this host ({len(helper.gpus)} GPUs)")


def _minor(gpu: Gpu) -> int:
    """The card's ``/dev/nvidiaN`` number (NVML's minor number; its index where unknown)."""
    try:
        minor = gpu.read("nvmlDeviceGetMinorNumber")
    except GpuLost:
        return gpu.index
    if isinstance(minor, (NA, bool)) or not isinstance(minor, int):
        return gpu.index
    return minor if 0 <= minor < 1 << 20 else gpu.index


def holders(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    gpu = _gpu(helper, req)
    return {"index": gpu.index, "uuid": gpu.uuid, **scan_holders(_minor(gpu))}


def reset(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    gpu = _gpu(helper, req)
    uuid = req.get("uuid")
    if not isinstance(uuid, str) or not UUID_RE.fullmatch(uuid):
        raise RequestError(
            "bad-request", f"uuid must be the GPU's uuid (GPU-...), got {str(uuid)[:60]!r}"
        )
    timeout_s = timeout_from(req)
    if gpu.uuid.lower() != uuid.lower():
        raise RequestError("wrong-gpu", f"GPU {gpu.index} is {gpu.uuid}, not {uuid}: not reset")
    pids = gpu.pids()
    if pids is None:
        raise RequestError("not-readable", f"GPU {gpu.index} is lost or not readable: not reset")
    if pids:
        shown = ", ".join(str(p) for p in sorted(pids)[:_PIDS_SHOWN])
        more = f" and {len(pids) - _PIDS_SHOWN} more" if len(pids) > _PIDS_SHOWN else ""
        raise RequestError(
            "in-use",
            f"GPU {gpu.index} has {len(pids)} processes on it (pids {shown}{more}): not reset",
        )
    done = helper.resetter.reset(gpu, timeout_s, _minor(gpu))
    return {"index": gpu.index, "uuid": gpu.uuid, **done}
