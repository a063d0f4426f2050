"""The head's ownership flags as the console shows them: parsed, cleaned, put in words.

A flag is a process on a GPU whose owner holds neither a job nor a claim there
(``ROGUE``), or one outside the GPUs its owner's jobs and claims hold on that host
(``STRAY``: a job process that got past ``CUDA_VISIBLE_DEVICES``). The head pushes
them with its state; like the rest of it, everything is untrusted: strings are
cleaned, numbers range-checked, and a malformed flag is dropped. No Textual here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputui.common.durations import coarse_text
from gputui.common.i18n import N_, _
from gputui.common.job_words import idle_text as job_idle_text
from gputui.common.printable import owner_name
from gputui.common.text import clean_str as _text
from gputui.common.untrusted import epoch as _time
from gputui.health.outside import LABELS

_SIGNALS = ("TERM", "KILL")
MAX_FLAGS = 10_000


def _count(value: Any, high: int = 2**31) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        return None
    return value


def _signal(value: Any) -> str | None:
    return value if value in _SIGNALS else None


@dataclass(frozen=True, slots=True)
class OwnerFlag:
    """One flagged process on one GPU."""

    host: str
    gpu_uuid: str
    gpu_index: int
    pid: int
    user: str
    name: str
    kind: str
    """``no-allocation`` or ``outside-allocation``."""
    since: float | None
    signal_at: float | None
    """When the head sends ``next_signal`` (``enforce``); None: it sends nothing."""
    next_signal: str | None
    signalled: str | None

    @property
    def label(self) -> str:
        """``ROGUE`` / ``STRAY``: the grid's marker."""
        return LABELS.get(self.kind, N_("FLAG"))

    @property
    def enforced(self) -> bool:
        return self.signal_at is not None or self.signalled is not None

    def why(self) -> str:
        if self.kind == "outside-allocation":
            return _("outside the GPUs of {user}'s jobs and claims on {host}").format(
                user=self.user, host=self.host
            )
        return _("no job or claim of {user} on this GPU").format(user=self.user)

    def action(self, now: float) -> str:
        """What the head does about it: ``SIGTERM in 4m``, ``SIGKILL sent``, ``warn only``."""
        parts = []
        if self.signalled is not None:
            parts.append(_("{signal} sent").format(signal=f"SIG{self.signalled}"))
        if self.signal_at is not None and self.next_signal is not None:
            due = self.signal_at - now
            signal = f"SIG{self.next_signal}"
            if due >= 1:
                parts.append(_("{signal} in {time}").format(signal=signal, time=coarse_text(due)))
            else:
                parts.append(_("{signal} now").format(signal=signal))
        return _(", ").join(parts) or _("warn only")

    def line(self, now: float) -> str:
        """The detail pane's line: ``ROGUE pid 4242 bob python: why, 3m; SIGTERM in 2m``."""
        age = "-" if self.since is None else coarse_text(now - self.since)
        name = f" {self.name}" if self.name else ""
        return _("{label} pid {pid} {user}{name}: {why}, {age}; {action}").format(
            label=_(self.label),
            pid=self.pid,
            user=self.user,
            name=name,
            why=self.why(),
            age=age,
            action=self.action(now),
        )

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> OwnerFlag | None:
        pid = _count(raw.get("pid"), 1 << 22)
        index = _count(raw.get("gpu_index"), 1024)
        kind = raw.get("kind")
        uuid = _text(raw.get("gpu_uuid"), 96)
        if pid is None or index is None or kind not in LABELS or not uuid:
            return None
        uid = _count(raw.get("uid"))
        user = owner_name(_text(raw.get("user"), 32), uid)
        return cls(
            host=_text(raw.get("host"), 64),
            gpu_uuid=uuid,
            gpu_index=index,
            pid=pid,
            user=user,
            name=_text(raw.get("name"), 128),
            kind=str(kind),
            since=_time(raw.get("since")),
            signal_at=_time(raw.get("signal_at")),
            next_signal=_signal(raw.get("next_signal")),
            signalled=_signal(raw.get("signalled")),
        )


def parse_flags(value: Any) -> tuple[OwnerFlag, ...]:
    """The state's ``flags`` list; anything malformed is left out."""
    if not isinstance(value, list):
        return ()
    out = []
    for raw in value[:MAX_FLAGS]:
        if isinstance(raw, Mapping):
            flag = OwnerFlag.parse(raw)
            if flag is not None:
                out.append(flag)
    return tuple(out)


def by_gpu(flags: Iterable[OwnerFlag]) -> dict[str, tuple[OwnerFlag, ...]]:
    """GPU uuid -> its flags, in the order the head gave them."""
    out: dict[str, list[OwnerFlag]] = {}
    for flag in flags:
        out.setdefault(flag.gpu_uuid, []).append(flag)
    return {uuid: tuple(found) for uuid, found in out.items()}


def idle_for(
    state: str, idle_since: float | None, idle_after_s: float | None, now: float
) -> float | None:
    """How long a running job has been idle, once that is past the head's limit."""
    if state != "running" or idle_since is None or idle_after_s is None:
        return None
    idle = now - idle_since
    return idle if idle >= idle_after_s else None


def idle_text(seconds: float) -> str:
    """``Idle 2h05m``: the REASON of a job flagged idle."""
    return job_idle_text(coarse_text(seconds))
