"""MIG devices on the fake NVML (``nvmlkit``): the real pynvml MIG functions stubbed
with an admin's slices, in pynvml's own shapes, raising real ``NVMLError``s.

As on a real A100 or H100 with MIG mode on: the parent answers
``nvmlDeviceGetMaxMigDeviceCount`` 7 and ``NotFound`` for an empty slot; a MIG
device's name carries its profile, its utilisation is ``NotSupported``, and its
processes show no memory (pynvml turns NVML's "not available" into None).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest
from nvmlkit import ERRORS, MIB, FakeNvml

ERRORS_MIG = {
    **ERRORS,
    "NotFound": pynvml.NVML_ERROR_NOT_FOUND,
    "InvalidArgument": pynvml.NVML_ERROR_INVALID_ARGUMENT,
}
PROFILE_MIB = {"1g.10gb": 9728, "2g.20gb": 19968, "3g.40gb": 40192, "7g.80gb": 81152}
SLICES_OF = {"1g.10gb": 1, "2g.20gb": 2, "3g.40gb": 3, "7g.80gb": 7}


@dataclass
class FakeSlice:
    """One MIG device an admin made: its slot (MIG device index) and readings."""

    slot: int
    uuid: str
    profile: str = "1g.10gb"
    used_mib: int = 13
    pids: list[int] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)  # function name -> NVML error name
    name_has_profile: bool = True

    @property
    def total_mib(self) -> int:
        return PROFILE_MIB[self.profile]


def mig_uuid(gpu: int, slot: int) -> str:
    return f"MIG-{gpu:08x}-{slot:04x}-4000-8000-{gpu * 16 + slot:012x}"


def install_mig(fake: FakeNvml, mp: pytest.MonkeyPatch, slices: dict[int, list[FakeSlice]]) -> None:
    """Turn MIG mode on for the GPUs in ``slices`` (index -> its MIG devices)."""

    def on_parent(fn: str, mig_fn: Callable[..., Any] | None) -> None:
        plain = getattr(pynvml, fn)

        def call(handle: Any, *args: Any) -> Any:
            if hasattr(handle, "slot"):
                piece = _slice(fn, handle)
                if mig_fn is None:
                    raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
                return mig_fn(piece, *args)
            return plain(handle, *args)

        mp.setattr(pynvml, fn, call)

    def _slice(fn: str, handle: Any) -> FakeSlice:
        fake.calls[(fn, handle.index)] += 1
        piece = next(s for s in slices[handle.index] if s.slot == handle.slot)
        if fn in piece.fail:
            raise pynvml.NVMLError(ERRORS_MIG[piece.fail[fn]])
        return piece

    def mig_mode(handle: Any) -> list[int]:
        fake._gpu("nvmlDeviceGetMigMode", handle)
        return [1, 1] if handle.index in slices else [0, 0]

    def max_count(handle: Any) -> int:
        fake._gpu("nvmlDeviceGetMaxMigDeviceCount", handle)
        return 7

    def by_index(handle: Any, index: int) -> Any:
        gpu = fake._gpu("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        if handle.index not in slices:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for piece in slices[handle.index]:
            if piece.slot == index:
                key = f"nvmlDeviceGetMigDeviceHandleByIndex@{index}"
                if key in gpu.fail:
                    raise pynvml.NVMLError(ERRORS_MIG[gpu.fail[key]])
                return SimpleNamespace(index=handle.index, slot=index)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def parent_of(handle: Any) -> Any:
        _slice("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", handle)
        return SimpleNamespace(index=handle.index)

    def name(piece: FakeSlice) -> str:
        base = "NVIDIA A100-SXM4-80GB"
        return f"{base} MIG {piece.profile}" if piece.name_has_profile else base

    def memory(piece: FakeSlice, version: Any = None) -> Any:
        free = (piece.total_mib - piece.used_mib) * MIB
        return SimpleNamespace(total=piece.total_mib * MIB, used=piece.used_mib * MIB, free=free)

    def not_supported(piece: FakeSlice) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def attributes(piece: FakeSlice) -> Any:
        n = SLICES_OF[piece.profile]
        return SimpleNamespace(
            gpuInstanceSliceCount=n, computeInstanceSliceCount=n, memorySizeMB=piece.total_mib
        )

    def procs(piece: FakeSlice) -> list[Any]:
        return [
            SimpleNamespace(pid=p, usedGpuMemory=None, gpuInstanceId=piece.slot + 1)
            for p in piece.pids
        ]

    mp.setattr(pynvml, "nvmlDeviceGetMigMode", mig_mode)
    mp.setattr(pynvml, "nvmlDeviceGetMaxMigDeviceCount", max_count)
    mp.setattr(pynvml, "nvmlDeviceGetMigDeviceHandleByIndex", by_index)
    mp.setattr(pynvml, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", parent_of)
    on_parent("nvmlDeviceGetUUID", lambda s: s.uuid)
    on_parent("nvmlDeviceGetName", name)
    on_parent("nvmlDeviceGetMemoryInfo", memory)
    on_parent("nvmlDeviceGetUtilizationRates", not_supported)
    on_parent("nvmlDeviceGetComputeRunningProcesses", procs)
    mp.setattr(pynvml, "nvmlDeviceGetAttributes", lambda h: attributes(_slice("attrs", h)))
    mp.setattr(pynvml, "nvmlDeviceGetGpuInstanceId", lambda h: _slice("gi", h).slot + 1)
    mp.setattr(pynvml, "nvmlDeviceGetComputeInstanceId", lambda h: 0 * _slice("ci", h).slot)
