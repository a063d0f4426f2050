"""One GPU as the console sees it: its row key, merged facts and readings, and history.

``GpuView`` joins a GPU's static facts (from ``hello``) with its latest readings;
``GpuHistory`` keeps the last few minutes of readings for the sparklines. Plain
data, no Textual.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gputui.common.gpu_label import model_label
from gputui.common.i18n import _
from gputui.ui.format import short_model
from gputui.wire.messages import GpuInfo, GpuSample, MigInfo, MigSample, Parent, ProcessSample

HISTORY_POINTS = 300


@dataclass(frozen=True, slots=True)
class HostRow:
    """A host's group header in the grid."""

    host: str


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One GPU in the grid, by host and NVML index."""

    host: str
    index: int


@dataclass(frozen=True, slots=True)
class SliceRow(GpuRow):
    """A MIG slice of a GPU, on the line under its GPU: by its MIG device index
    (``slot``). It is a ``GpuRow``: selecting it selects its GPU."""

    slot: int


Row = HostRow | GpuRow


@dataclass(frozen=True, slots=True)
class GpuView:
    """One GPU's static facts and latest readings, merged; any part may be missing."""

    host: str
    index: int
    info: GpuInfo | None
    sample: GpuSample | None
    owners: tuple[str, ...]
    haystack: str
    """Lower-case host, pool, model and owners: what the filter searches."""
    parents: tuple[Parent, ...] = ()
    """The sample's parent table (``Sample.parents``, the host's, shared by its GPUs):
    where the process tree finds the chains above the processes' ``ppid``."""

    @property
    def row(self) -> GpuRow:
        return GpuRow(self.host, self.index)

    @property
    def uuid(self) -> str:
        if self.sample is not None:
            return self.sample.uuid
        return self.info.uuid if self.info is not None else ""

    @property
    def model(self) -> str:
        return short_model(self.info.name if self.info is not None else None)

    @property
    def label(self) -> str:
        """The model's short label (``A100-80G``), for a narrow column."""
        info = self.info
        return model_label(info.name, info.memory_total_mib) if info is not None else _("unknown")

    @property
    def slices(self) -> tuple[MigInfo, ...]:
        """Its MIG slices as ``hello`` listed them (none: MIG off)."""
        return self.info.mig if self.info is not None else ()

    def slice_rows(self) -> list[SliceRow]:
        """The rows of its MIG slices, in MIG device order."""
        return [SliceRow(self.host, self.index, s.index) for s in self.slices]

    def slice_sample(self, slot: int) -> MigSample | None:
        """Slice ``slot``'s latest readings (None: not in the latest sample)."""
        if self.sample is not None:
            for s in self.sample.mig:
                if s.index == slot:
                    return s
        return None

    @property
    def processes(self) -> tuple[ProcessSample, ...]:
        return self.sample.processes if self.sample is not None else ()

    @property
    def util(self) -> int | None:
        return self.sample.util_gpu if self.sample is not None else None

    @property
    def mem_used(self) -> int | None:
        return self.sample.mem_used_mib if self.sample is not None else None

    @property
    def mem_total(self) -> int | None:
        if self.sample is not None and self.sample.mem_total_mib is not None:
            return self.sample.mem_total_mib
        return self.info.memory_total_mib if self.info is not None else None

    @property
    def mem_free(self) -> int | None:
        used, total = self.mem_used, self.mem_total
        return None if used is None or total is None else max(0, total - used)

    @property
    def mem_pct(self) -> float | None:
        used, total = self.mem_used, self.mem_total
        return None if used is None or not total else 100.0 * used / total

    @property
    def temp(self) -> int | None:
        return self.sample.temp_c if self.sample is not None else None

    @property
    def power(self) -> float | None:
        return self.sample.power_w if self.sample is not None else None

    @property
    def power_limit(self) -> float | None:
        if self.sample is not None and self.sample.power_limit_w is not None:
            return self.sample.power_limit_w
        return self.info.power_limit_w if self.info is not None else None

    @property
    def fan(self) -> int | None:
        return self.sample.fan_pct if self.sample is not None else None


Reading = tuple[int | None, int | None, int | None, int | None, float | None]
"""(util %, memory used MiB, memory total MiB, temperature °C, power W) at one sample."""


@dataclass(slots=True)
class GpuHistory:
    """The last few minutes of one GPU, newest last, for the detail sparklines.

    Recording runs for every GPU on every sample, so the model appends the raw
    readings (one ``Reading`` tuple per sample) and the series are worked out only
    when the detail pane asks.
    """

    readings: deque[Reading] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))

    @property
    def util(self) -> list[float]:
        return [float(r[0] or 0) for r in self.readings]

    @property
    def mem(self) -> list[float]:
        return [100.0 * r[1] / r[2] if r[1] is not None and r[2] else 0.0 for r in self.readings]

    @property
    def temp(self) -> list[float]:
        return [float(r[3] or 0) for r in self.readings]

    @property
    def power(self) -> list[float]:
        return [r[4] or 0.0 for r in self.readings]
