"""MIG slices on the wire: each slice of a MIG-enabled GPU, as its helper read it.

A slice (a MIG device: a GPU instance with its compute instance) is what CUDA sees
when ``CUDA_VISIBLE_DEVICES`` names its ``MIG-`` UUID. An admin makes slices
(``nvidia-smi mig``); the helper only reads them. Static facts come once in
``hello`` (``GpuInfo.mig``), readings in every ``sample`` (``GpuSample.mig``).
NVML gives no utilisation for a MIG device (``NotSupported``): ``util_gpu`` is then
null with its reason in ``errors``, as for any other field.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from gputui.common.mig_profile import PROFILE, profile_of
from gputui.wire.fields import Count, ErrorMap, MiB, Percent, Pid, ShortText, Wire

__all__ = ["MAX_SLICES", "MAX_SLICE_PIDS", "PROFILE", "MigInfo", "MigSample", "profile_of"]

MAX_SLICES = 64
"""Slices one GPU lists at most (an A100 or H100 makes at most 7 GPU instances;
compute instances inside them can make more)."""
MAX_SLICE_PIDS = 512


def _profile(value: str | None) -> str | None:
    if value is None:
        return None
    found = PROFILE.fullmatch(value)
    if found is None:
        raise ValueError("not a MIG profile name")
    return value


class MigInfo(Wire):
    """One slice's static facts, sent once in ``hello`` under its GPU."""

    index: Annotated[int, Field(ge=0, le=MAX_SLICES - 1, strict=True)]
    """Its MIG device index on its GPU (``nvmlDeviceGetMigDeviceHandleByIndex``)."""
    uuid: ShortText
    profile: ShortText | None = None
    """Its profile (``1g.10gb``): what a job asks for with ``--mig``."""
    parent_uuid: ShortText | None = None
    """Its GPU's UUID, as NVML says (``nvmlDeviceGetDeviceHandleFromMigDeviceHandle``)."""
    gpu_instance: Count | None = None
    compute_instance: Count | None = None
    memory_total_mib: MiB | None = None
    errors: ErrorMap = Field(default_factory=dict)

    _profile_checked = field_validator("profile")(_profile)

    @field_validator("uuid")
    @classmethod
    def _mig_uuid(cls, value: str) -> str:
        if not value.startswith("MIG-"):
            raise ValueError("a MIG device's UUID starts with MIG-")
        return value


class MigSample(Wire):
    """One slice's readings at one instant (``util_gpu``: null where NVML cannot say)."""

    index: Annotated[int, Field(ge=0, le=MAX_SLICES - 1, strict=True)]
    uuid: ShortText
    mem_used_mib: MiB | None = None
    mem_total_mib: MiB | None = None
    util_gpu: Percent | None = None
    pids: Annotated[tuple[Pid, ...], Field(max_length=MAX_SLICE_PIDS)] = ()
    """The processes NVML lists on this slice (they are on its GPU's list too)."""
    errors: ErrorMap = Field(default_factory=dict)
