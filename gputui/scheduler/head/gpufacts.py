"""``GpuFacts``: a GPU's row as a plain, frozen value, for whatever is kept between
transactions.

No ORM instance outlives its transaction. The head keeps its GPU inventory between
batches (``HostWatch``); a ``Gpu`` row kept there is expired by a later batch (a
bulk update expires every row of the session) and detached when that session
closes, and reading it then raises ``DetachedInstanceError`` (the writer died of
exactly that once). ``Store`` expires every row at the end of its transaction,
so a row kept past it fails at its first use, in every test, not by chance. What
is kept is a copy: every column of the row, frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TypeAlias

from pydantic_core import PydanticUndefined

from gputui.scheduler.store.tables import Gpu, gpu_state


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """Every column of a ``Gpu`` row, as it was when copied (``of``)."""

    uuid: str
    host: str
    index: int
    model: str
    memory_mib: int
    pool: str
    drained_by: str | None
    drain_reason: str | None
    drained_at: float | None
    fence_code: str | None
    fence_reason: str | None
    fenced_at: float | None
    fence_clears: str | None
    fence_waived: str | None
    fence_waived_at: float | None
    present: bool
    mig_profile: str | None = None
    mig_parent: str | None = None
    mig_enabled: bool = False

    @classmethod
    def of(cls, row: Gpu) -> GpuFacts:
        """A copy of ``row``, read now (inside its transaction)."""
        return cls(**{name: getattr(row, name) for name in COLUMNS})

    @classmethod
    def fresh(cls, columns: Mapping[str, object]) -> GpuFacts:
        """A row about to be inserted with ``columns`` (the others: the table's
        defaults), as it will be stored."""
        return cls(**{**_DEFAULTS, **columns})

    @property
    def drained(self) -> bool:
        return self.drained_at is not None

    @property
    def fenced(self) -> bool:
        return self.fence_code is not None

    @property
    def state(self) -> str:
        return gpu_state(fenced=self.fenced, drained=self.drained)


COLUMNS = tuple(f.name for f in fields(GpuFacts))
_DEFAULTS = {
    name: field.default
    for name, field in Gpu.model_fields.items()
    if name in COLUMNS and field.default is not PydanticUndefined
}

AnyGpu: TypeAlias = Gpu | GpuFacts
"""A GPU as the rules read it: a row in a transaction, or a copy kept outside one."""
