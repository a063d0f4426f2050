"""The health readings of a GPU on the wire: what the health checks need.

The helper reads them less often than the live readings (every ``health_every_s``,
and at once when an Xid arrives): a sample that carries them has ``health_read``
true, and a client keeps the last such reading per GPU. As everywhere on the wire,
a reading the card or driver does not support is ``null`` and named in the GPU's
``errors`` map with the NVML error name (``NotSupported`` on a card without row
remapping, ``FunctionNotFound`` on an old driver): a check on it is *unknown*, not
ok.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StrictBool
from pydantic.dataclasses import dataclass

from gputui.wire.fields import Count, ErrorMap, ShortText

NVLINK_MAX_LINKS = 18
"""``NVML_NVLINK_MAX_LINKS``: links per GPU (H100 has 18)."""

FabricState = Literal["not-supported", "not-started", "in-progress", "completed"]
"""``nvmlGpuFabricInfo_t.state``, by name."""

LinkIndex = Annotated[int, Field(ge=0, le=NVLINK_MAX_LINKS - 1, strict=True)]


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="ignore"))
class NvLinkSample:
    """One NVLink of a GPU: up or down, and its error counters where supported. A
    slotted dataclass, as ``GpuSample`` is (why: there); a health reading holds up to
    18 per GPU."""

    link: LinkIndex
    active: StrictBool | None = None
    replay_errors: Count | None = None
    recovery_errors: Count | None = None
    crc_flit_errors: Count | None = None
    crc_data_errors: Count | None = None
    errors: ErrorMap = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="ignore"))
class HealthReadings:
    """The health fields of ``GpuSample`` (read when ``health_read``)."""

    health_read: StrictBool = False
    remapped_correctable: Count | None = None
    """Rows remapped for correctable errors (``nvmlDeviceGetRemappedRows``)."""
    remapped_uncorrectable: Count | None = None
    remap_pending: StrictBool | None = None
    """A remap waits for a GPU reset."""
    remap_failed: StrictBool | None = None
    """A remap failed: the card should be replaced."""
    retired_sbe: Count | None = None
    """Pages retired for multiple single-bit errors (cards without row remapping)."""
    retired_dbe: Count | None = None
    """Pages retired for a double-bit error."""
    retired_pending: StrictBool | None = None
    """A retirement waits for a reset or reboot."""
    ecc_corrected_total: Count | None = None
    """Aggregate (lifetime) ECC counts; the volatile ones are ``ecc_corrected``..."""
    ecc_uncorrected_total: Count | None = None
    persistence: StrictBool | None = None
    pcie_replays: Count | None = None
    """The PCIe replay counter (link-level retransmissions)."""
    nvlinks: Annotated[tuple[NvLinkSample, ...], Field(max_length=NVLINK_MAX_LINKS)] | None = None
    """None where the card has no NVLink (its ``errors`` say why)."""
    fabric_state: FabricState | None = None
    """NVSwitch fabric registration (``nvmlDeviceGetGpuFabricInfo``)."""
    fabric_status: ShortText | None = None
    """The NVML error name of a completed registration that failed, else None."""
