"""The ``holders``, ``reset`` and ``clocks`` requests: what a force-free asks of a GPU's host.

``holders`` lists what holds the card's device files open (``holders``).
``reset`` is refused with the reason while any process is on the card or when the
card is not the one the caller named (its uuid), so a renumbered host never resets
the wrong one; past those checks the helper's resetter does it (``gpureset``:
``nvidia-smi --gpu-reset`` on a real host, ``nvmlDeviceResetGpu`` on the
simulator). A card or host that cannot reset (NotSupported on GeForce, no
nvidia-smi, not root, a timeout) is an answer, ``reset: false`` with why, never a
crash. ``clocks`` locks a card's clocks low or resets them (``clocklock``), for the
same card only (its uuid). All run on the helper's worker threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .gpureset import timeout_from
from .gpus import Gpu, GpuLost
from .holders import scan_holders
from .nvml import NA
from .signals import UUID_RE, RequestError, bad_request

if TYPE_CHECKING:
    from .helper import Helper

MAX_INDEX = 63
_PIDS_SHOWN = 8


def _gpu(helper: Helper, req: dict[str, Any]) -> Gpu:
    index = req.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_INDEX:
        raise bad_request(f"index must be a GPU index 0-{MAX_INDEX}, got {str(index)[:20]!r}")
    for gpu in helper.gpus:
        if gpu.index == index:
            return gpu
    raise RequestError("unknown-gpu", f"no GPU {index} on this host ({len(helper.gpus)} GPUs)")


def _named(gpu: Gpu, req: dict[str, Any], refused: str) -> None:
    """The request names this very card by its uuid, or it is refused (``refused``:
    what is not done), so a renumbered host never acts on the wrong card."""
    uuid = req.get("uuid")
    if not isinstance(uuid, str) or not UUID_RE.fullmatch(uuid):
        raise bad_request(f"uuid must be the GPU's uuid (GPU-...), got {str(uuid)[:60]!r}")
    if gpu.uuid.lower() != uuid.lower():
        raise RequestError("wrong-gpu", f"GPU {gpu.index} is {gpu.uuid}, not {uuid}: {refused}")


def _minor(gpu: Gpu) -> int:
    """The card's ``/dev/nvidiaN`` number (NVML's minor number; its index where unknown)."""
    try:
        minor = gpu.read("nvmlDeviceGetMinorNumber")
    except GpuLost:
        return gpu.index
    if isinstance(minor, (NA, bool)) or not isinstance(minor, int):
        return gpu.index
    return minor if 0 <= minor < 1 << 20 else gpu.index


def _nvidia_only(gpu: Gpu, what: str) -> None:
    """Holders (``/dev/nvidiaN``) and resets are NVIDIA's: an AMD card is refused."""
    if gpu.vendor != "nvidia":
        raise RequestError(
            "unsupported", f"GPU {gpu.index} is an {gpu.vendor.upper()} card: {what} is NVIDIA's"
        )


def holders(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    gpu = _gpu(helper, req)
    _nvidia_only(gpu, "a scan for holders of /dev/nvidiaN")
    return {"index": gpu.index, "uuid": gpu.uuid, **scan_holders(_minor(gpu))}


def reset(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    gpu = _gpu(helper, req)
    _nvidia_only(gpu, "a GPU reset")
    timeout_s = timeout_from(req)
    _named(gpu, req, "not reset")
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


CLOCK_ACTIONS = ("lock", "reset")


def clocks(helper: Helper, req: dict[str, Any]) -> dict[str, Any]:
    gpu = _gpu(helper, req)
    action = req.get("action")
    if action not in CLOCK_ACTIONS:
        raise bad_request(f"action must be lock or reset, got {str(action)[:20]!r}")
    _named(gpu, req, "not changed")
    try:
        return helper.clocks.lock(gpu) if action == "lock" else helper.clocks.reset(gpu)
    except GpuLost:
        raise RequestError("not-readable", f"GPU {gpu.index} is lost: not changed") from None
