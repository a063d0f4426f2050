"""A problem as a health check sees it now (``Finding``), and how bad it is."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    key: str = field(init=False, repr=False, compare=False)
    """``host:gpu:code`` (``:subject`` when there is one): what the board tracks it by.
    Made once, with the finding (``finding_key``): the board reads it several times
    for every finding of every sample, and a finding is seldom made (kept while
    what it was made from is unchanged)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", finding_key(self.host, self.gpu, self.code, self.subject))


def finding_key(host: str, gpu: int | None, code: str, subject: str) -> str:
    """A finding's ``key`` from its parts."""
    where = f"{host}:{'' if gpu is None else gpu}:{code}"
    return f"{where}:{subject}" if subject else where


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
