"""MIG slices of one GPU, read through the guarded accessor.

An admin makes the slices; the helper reads them once for ``hello`` (profile, UUID,
parent, memory) and keeps their handles for each ``sample`` (memory used,
utilisation where NVML gives it, pids). An index NVML has no slice at answers
``NotFound`` or ``InvalidArgument`` (the slots of a partly sliced card are empty):
those are skipped, never reported. Any other error is named in the GPU's errors.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .nvml import MIB, NA, query, text

MAX_SLICES = 64
"""Also the client wire's limit (``gputui.wire.mig`` keeps its own copy)."""
MAX_SLICE_PIDS = 512
_EMPTY = ("NotFound", "InvalidArgument")
_PROFILE = re.compile(r"(?:[1-8]c\.)?[1-8]g\.[1-9][0-9]{0,3}gb(?:\+[a-z]{1,8}){0,2}")


class Slice:
    """One MIG device: its handle and what ``hello`` said of it."""

    __slots__ = ("handle", "index", "uuid")

    def __init__(self, index: int, handle: Any, uuid: str) -> None:
        self.index = index
        self.handle = handle
        self.uuid = uuid


def _profile(lib: Any, handle: Any) -> tuple[str | None, str | None]:
    """The slice's profile (``1g.10gb``) from its NVML name (``NVIDIA A100-SXM4-80GB
    MIG 1g.10gb``), else from its attributes (slices and memory); and the error."""
    name = query(lib, "nvmlDeviceGetName", handle)
    if not isinstance(name, NA):
        found = _PROFILE.search(text(name).lower())
        if found is not None:
            return found.group(0), None
    attrs = query(lib, "nvmlDeviceGetAttributes", handle)
    if isinstance(attrs, NA):
        return None, attrs.error
    g = int(attrs.gpuInstanceSliceCount)
    c = int(attrs.computeInstanceSliceCount)
    gb = math.ceil(int(attrs.memorySizeMB) / 1024)
    if not (1 <= g <= 8 and 1 <= c <= 8 and 1 <= gb <= 9999):
        return None, "Unknown"
    return (f"{c}c." if c < g else "") + f"{g}g.{gb}gb", None


def read_slices(
    lib: Any, parent: Any, parent_uuid: str
) -> tuple[list[Slice], list[dict[str, Any]], dict[str, str]]:
    """The slices of a MIG-enabled GPU (``parent``: its handle): handles kept for the
    samples, their ``MigInfo`` dicts, and errors (``mig``: the count could not be read;
    ``mig.N``: slot N answered an error other than "no slice here")."""
    errors: dict[str, str] = {}
    count = query(lib, "nvmlDeviceGetMaxMigDeviceCount", parent)
    if isinstance(count, NA):
        errors["mig"] = count.error
        return [], [], errors
    kept: list[Slice] = []
    infos: list[dict[str, Any]] = []
    for index in range(min(int(count), MAX_SLICES)):
        handle = query(lib, "nvmlDeviceGetMigDeviceHandleByIndex", parent, index)
        if isinstance(handle, NA):
            if handle.error not in _EMPTY:
                errors[f"mig.{index}"] = handle.error
            continue
        uuid = query(lib, "nvmlDeviceGetUUID", handle)
        if isinstance(uuid, NA):
            errors[f"mig.{index}"] = uuid.error
            continue
        info: dict[str, Any] = {"index": index, "uuid": text(uuid, 128)}
        slice_errors: dict[str, str] = {}
        profile, why = _profile(lib, handle)
        info["profile"] = profile
        if why is not None:
            slice_errors["profile"] = why
        up = query(lib, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", handle)
        owner = query(lib, "nvmlDeviceGetUUID", up) if not isinstance(up, NA) else up
        if isinstance(owner, NA):
            info["parent_uuid"] = parent_uuid
            slice_errors["parent_uuid"] = owner.error
        else:
            info["parent_uuid"] = text(owner, 128)
        for key, fn in (
            ("gpu_instance", "nvmlDeviceGetGpuInstanceId"),
            ("compute_instance", "nvmlDeviceGetComputeInstanceId"),
        ):
            value = query(lib, fn, handle)
            info[key] = None if isinstance(value, NA) else int(value)
            if isinstance(value, NA):
                slice_errors[key] = value.error
        mem = query(lib, "nvmlDeviceGetMemoryInfo", handle)
        info["memory_total_mib"] = None if isinstance(mem, NA) else int(mem.total // MIB)
        if isinstance(mem, NA):
            slice_errors["memory_total_mib"] = mem.error
        info["errors"] = slice_errors
        kept.append(Slice(index, handle, info["uuid"]))
        infos.append(info)
    return kept, infos, errors


def sample_slice(lib: Any, piece: Slice) -> dict[str, Any]:
    """One slice's ``MigSample`` dict now; never raises for an NVML error."""
    out: dict[str, Any] = {"index": piece.index, "uuid": piece.uuid}
    errors: dict[str, str] = {}
    mem = query(lib, "nvmlDeviceGetMemoryInfo", piece.handle)
    if isinstance(mem, NA):
        out["mem_used_mib"] = out["mem_total_mib"] = None
        errors["mem_used_mib"] = errors["mem_total_mib"] = mem.error
    else:
        out["mem_used_mib"] = int(mem.used // MIB)
        out["mem_total_mib"] = int(mem.total // MIB)
    util = query(lib, "nvmlDeviceGetUtilizationRates", piece.handle)
    if isinstance(util, NA):
        out["util_gpu"] = None
        errors["util_gpu"] = util.error
    else:
        out["util_gpu"] = int(util.gpu)
    pids: list[int] = []
    procs = query(lib, "nvmlDeviceGetComputeRunningProcesses", piece.handle)
    if isinstance(procs, NA):
        errors["pids"] = procs.error
    else:
        pids = sorted({int(p.pid) for p in procs})[:MAX_SLICE_PIDS]
    out["pids"] = pids
    out["errors"] = errors
    return out
