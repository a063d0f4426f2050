"""A problem as a health check sees it now (``Finding``), and how bad it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gputui.wire.messages import GpuSample

Level = Literal["crit", "warn", "info"]
RANK: dict[str, int] = {"crit": 0, "warn": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem as a check sees it now."""

    code: str
    """Short and stable: ``xid-79``, ``ecc-uncorrected``, ``remap-pending`` ..."""
    severity: Level
    host: str
    gpu: int | None
    """The GPU's index on its host; None for the host itself."""
    title: str
    meaning: str
    action: str
    detail: str = ""
    """The figures behind it (a change unacknowledges it)."""
    uuid: str | None = None
    badge: str = ""
    """A short marker for the grid (``RESET``, ``RMA``), or empty."""
    subject: str = ""
    """What tells two problems of one code on one GPU or host apart (a pid, a job)."""

    @property
    def key(self) -> str:
        where = f"{self.host}:{'' if self.gpu is None else self.gpu}:{self.code}"
        return f"{where}:{self.subject}" if self.subject else where


def finding(  # noqa: PLR0917 - the fields of a finding, in their order
    code: str,
    severity: Level,
    host: str,
    gpu: GpuSample | None,
    title: str,
    meaning: str,
    action: str,
    detail: str = "",
    badge: str = "",
) -> Finding:
    return Finding(
        code,
        severity,
        host,
        None if gpu is None else gpu.index,
        title,
        meaning,
        action,
        detail,
        None if gpu is None else gpu.uuid,
        badge,
    )
