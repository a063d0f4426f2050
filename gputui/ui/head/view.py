"""The scheduler as the console sees it: the head's pushed state, parsed once, as plain data.

The head pushes its whole state (queue, claims, who holds each GPU) whenever it
changes. ``HeadView.parse`` turns that JSON into small frozen records, every string
cleaned the way host strings are (a job name is typed by any user), every number
range-checked, anything malformed dropped rather than trusted. No Textual and no
I/O: widgets read these, and tests build them from dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gputui.common.gpu_env import GPU_UUID_PATTERN, export_line, gpu_uuids
from gputui.common.i18n import _
from gputui.common.text import clean
from gputui.common.text import clean_str as _text
from gputui.common.untrusted import epoch as _time
from gputui.common.untrusted import integer
from gputui.ui import format as fmt
from gputui.ui.head.flags import OwnerFlag, idle_for, parse_flags

MAX_BOARD_PROBLEMS = 10_000_000
_GPU_UUID = re.compile(GPU_UUID_PATTERN)
"""More problems than any board holds: a count past it is not believed."""

LIVE_STATES = frozenset(
    {"starting", "running", "killing", "preempting", "unknown",
     # Slurm's own words (the Slurm backend shows its jobs in them)
     "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "SIGNALING", "STAGE_OUT",
     "RESIZING", "STOPPED"}
)  # fmt: skip
PENDING_STATES = frozenset({"queued", "held", "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})
FINAL_STATES = frozenset(
    {"completed", "failed", "timeout", "killed", "cancelled",
     "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
     "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"}
)  # fmt: skip


def _opt_text(value: Any, limit: int = 128) -> str | None:
    return _text(value, limit) or None


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53:
        return default
    return value


def _opt_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value <= 2**53:
        return None
    return value


def _strings(value: Any, limit: int = 64, count: int = 256) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(clean(v, limit) for v in value[:count] if isinstance(v, str))


def age_text(seconds: float | None) -> str:
    """A holder's age to the minute (``<1m``, ``12m``, ``3h05m``, ``2d04h``): it changes
    once a minute, so a held GPU's grid line is redrawn once a minute, not every second."""
    if seconds is None or seconds < 0:
        return "-"
    minutes = int(seconds // 60)
    return "<1m" if minutes < 1 else fmt.minutes_text(minutes)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds one GPU: a job or a claim, its owner, since when."""

    kind: str
    """``job`` or ``claim``."""
    id: int
    user: str
    since: float | None
    name: str

    @property
    def ref(self) -> str:
        """``job 12`` / ``claim 4``."""
        return f"{self.kind} {self.id}"

    @property
    def short(self) -> str:
        """``j12`` / ``c4``: the grid's narrow spelling."""
        return f"{self.kind[:1]}{self.id}"


def holder_ref(holder: Holder) -> str:
    """``job 12`` / ``claim 4`` in the reader's language."""
    if holder.kind == "job":
        return _("job {id}").format(id=holder.id)
    if holder.kind == "claim":
        return _("claim {id}").format(id=holder.id)
    return holder.ref


@dataclass(frozen=True, slots=True)
class HeadJob:
    """One job of the queue (a row of ``gputui queue``)."""

    id: int
    user: str
    name: str
    state: str
    reason: str
    gpus: int
    pool: str | None
    host: str | None
    gpu_uuids: tuple[str, ...]
    preemptible: bool
    time_limit_s: float | None
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    exit_signal: str | None
    requeues: int
    run_as: str | None
    idle_since: float | None = None
    """Since when all its GPUs read 0% (the head's word; flagged once past its limit)."""
    array_id: int | None = None
    """The array it is a task of (its first task's id); None when not in one."""
    array_task: int | None = None
    """Its task id in the array."""
    interactive: bool = False
    """It runs on a terminal to attach to (``gputui run --pty``)."""

    def elapsed(self, now: float) -> float:
        """Seconds it has run (to its end, if it ended); 0 before it started."""
        if self.started_at is None:
            return 0.0
        return max(0.0, (self.ended_at or now) - self.started_at)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> HeadJob | None:
        job_id = _int(raw.get("id"))
        if not job_id:
            return None
        limit = _time(raw.get("time_limit_s"))
        return cls(
            id=job_id,
            user=_text(raw.get("user"), 32),
            name=_text(raw.get("name"), 128),
            state=_text(raw.get("state"), 16) or "?",
            reason=_text(raw.get("reason"), 200),
            gpus=_int(raw.get("gpus")),
            pool=_opt_text(raw.get("pool")),
            host=_opt_text(raw.get("host")),
            gpu_uuids=_strings(raw.get("gpu_uuids")),
            preemptible=raw.get("preemptible") is True,
            time_limit_s=limit,
            submitted_at=_time(raw.get("submitted_at")),
            started_at=_time(raw.get("started_at")),
            ended_at=_time(raw.get("ended_at")),
            exit_code=_opt_int(raw.get("exit_code")),
            exit_signal=_opt_text(raw.get("exit_signal"), 16),
            requeues=_int(raw.get("requeues")),
            run_as=_opt_text(raw.get("run_as"), 32),
            idle_since=_time(raw.get("idle_since")),
            array_id=_opt_int(raw.get("array_id")),
            array_task=_opt_int(raw.get("array_task")),
            interactive=raw.get("interactive") is True,
        )


@dataclass(frozen=True, slots=True)
class HeadClaim:
    """One claim: GPUs held (``active``) or asked for (``waiting``) by a person."""

    id: int
    user: str
    state: str
    reason: str
    gpus: int
    host: str | None
    gpu_uuids: tuple[str, ...]
    note: str
    granted_at: float | None
    expires_at: float | None
    idle_release_s: float | None = None
    """The head releases it after this long with no process of its owner (0: once
    its run's last process ends)."""
    session: bool = False
    """A ``gputui run`` session holds it (not released while idle)."""
    idle_since: float | None = None
    """Since when its GPUs show no process of its owner (the head's ``idle_claims``;
    None: busy, or the head did not say)."""

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> HeadClaim | None:
        claim_id = _int(raw.get("id"))
        if not claim_id:
            return None
        return cls(
            id=claim_id,
            user=_text(raw.get("user"), 32),
            state=_text(raw.get("state"), 16) or "?",
            reason=_text(raw.get("reason"), 200),
            gpus=_int(raw.get("gpus")),
            host=_opt_text(raw.get("host")),
            gpu_uuids=_strings(raw.get("gpu_uuids")),
            note=_text(raw.get("note"), 200),
            granted_at=_time(raw.get("granted_at")),
            expires_at=_time(raw.get("expires_at")),
            idle_release_s=_time(raw.get("idle_release_s")),
            session=raw.get("session") is True,
        )


@dataclass(frozen=True, slots=True)
class HeadGpu:
    """A GPU as the head knows it: where it is and who holds it."""

    uuid: str
    host: str
    index: int
    pool: str
    state: str
    holder: Holder | None
    reason: str = ""
    """Why it is ``drained`` (an admin) or ``unhealthy`` (fenced by the head)."""


@dataclass(frozen=True, slots=True)
class Me:
    """Who the head says this console's user is."""

    uid: int
    user: str
    admin: bool

    def refused(self, doing: str) -> str | None:
        """Why this user may not do an admin's ``doing`` ("force-free a GPU"); None for
        an admin. The console's one wording of it."""
        if self.admin:
            return None
        return _("only admins {doing} ({user} is not one)").format(doing=_(doing), user=self.user)


@dataclass(frozen=True, slots=True)
class HeadView:
    """One pushed state of the head, parsed."""

    me: Me
    jobs: tuple[HeadJob, ...] = ()
    claims: tuple[HeadClaim, ...] = ()
    gpus: tuple[HeadGpu, ...] = ()
    hosts_live: Mapping[str, bool] = field(default_factory=dict)
    seq: int = 0
    flags: tuple[OwnerFlag, ...] = ()
    """Processes on GPUs their owners hold nothing on (``gputui.ui.head.flags``)."""
    idle_after_s: float | None = None
    """A running job idle this long is flagged (None: the head did not say)."""
    claim_idle_after_s: float | None = None
    """An active claim idle this long is a health finding (None: the head did not say)."""
    board_problems: int | None = None
    """How many problems the head's health board lists (None: the head did not say)."""
    clock_locks: frozenset[str] = frozenset()
    """GPUs held but idle whose clocks the head locked low (``power.mode: lock``)."""

    @classmethod
    def parse(cls, state: Mapping[str, Any], seq: int = 0) -> HeadView:
        """The head's ``state`` object -> ``HeadView``; malformed parts are left out."""
        me_raw = state.get("me")
        me_raw = me_raw if isinstance(me_raw, Mapping) else {}
        me = Me(
            uid=_int(me_raw.get("uid"), -1),
            user=_text(me_raw.get("user"), 32) or "?",
            admin=me_raw.get("admin") is True,
        )
        jobs = tuple(j for j in map(_parsed(HeadJob.parse), _items(state.get("jobs"))) if j)
        claims = tuple(c for c in map(_parsed(HeadClaim.parse), _items(state.get("claims"))) if c)
        idle_claims = _idle_claims(state.get("idle_claims"))
        claims = tuple(
            replace(c, idle_since=idle_claims[c.id]) if c.id in idle_claims else c for c in claims
        )
        gpus = tuple(g for g in map(_gpu, _items(state.get("gpus"))) if g)
        hosts_raw = state.get("hosts")
        hosts: dict[str, bool] = {}
        if isinstance(hosts_raw, Mapping):
            for name, info in list(hosts_raw.items())[:10_000]:
                if isinstance(name, str) and isinstance(info, Mapping):
                    hosts[clean(name, 64)] = info.get("live") is True
        idle_after = _time(state.get("idle_after_s"))
        claim_idle_after = _time(state.get("claim_idle_after_s"))
        return cls(
            me=me,
            jobs=jobs,
            claims=claims,
            gpus=gpus,
            hosts_live=hosts,
            seq=seq,
            flags=parse_flags(state.get("flags")),
            idle_after_s=idle_after if idle_after else None,
            claim_idle_after_s=claim_idle_after if claim_idle_after else None,
            board_problems=integer(state.get("board_problems"), 0, MAX_BOARD_PROBLEMS),
            clock_locks=_clock_locks(state.get("clock_locks")),
        )

    def holders(self) -> dict[str, Holder]:
        """GPU uuid -> its holder, for the GPUs someone holds."""
        return {g.uuid: g.holder for g in self.gpus if g.holder is not None}

    def idle_for(self, job: HeadJob, now: float) -> float | None:
        """How long ``job`` has been idle, once it is flagged idle; else None."""
        return idle_for(job.state, job.idle_since, self.idle_after_s, now)

    def job(self, job_id: int) -> HeadJob | None:
        return next((j for j in self.jobs if j.id == job_id), None)

    def claim(self, claim_id: int) -> HeadClaim | None:
        return next((c for c in self.claims if c.id == claim_id), None)

    def counts(self) -> tuple[int, int]:
        """(running, pending) jobs."""
        running = sum(1 for j in self.jobs if j.live)
        return running, sum(1 for j in self.jobs if j.pending)


def _clock_locks(value: Any) -> frozenset[str]:
    """The state's ``clock_locks`` (``[{"uuid": ...}, ...]``) -> their GPU uuids."""
    return frozenset(
        u
        for u in (raw.get("uuid") for raw in _items(value))
        if isinstance(u, str) and _GPU_UUID.fullmatch(u)
    )


def _items(value: Any, cap: int = 100_000) -> Iterable[Mapping[str, Any]]:
    if not isinstance(value, list):
        return ()
    return [v for v in value[:cap] if isinstance(v, Mapping)]


def _parsed(parse: Any) -> Any:
    def safe(raw: Mapping[str, Any]) -> Any:
        try:
            return parse(raw)
        except (TypeError, ValueError):
            return None

    return safe


def _idle_claims(value: Any) -> dict[int, float]:
    """The state's ``idle_claims`` (``[{"id": N, "idle_since": T}]``) -> id -> since."""
    out: dict[int, float] = {}
    for raw in _items(value, 100_000):
        claim_id, since = _int(raw.get("id")), _time(raw.get("idle_since"))
        if claim_id and since is not None:
            out[claim_id] = since
    return out


def _gpu(raw: Mapping[str, Any]) -> HeadGpu | None:
    uuid = _text(raw.get("uuid"), 96)
    if not uuid:
        return None
    holder_raw = raw.get("holder")
    holder = None
    if isinstance(holder_raw, Mapping):
        kind = holder_raw.get("kind")
        holder_id = _int(holder_raw.get("id"))
        if kind in ("job", "claim") and holder_id:
            holder = Holder(
                kind=str(kind),
                id=holder_id,
                user=_text(holder_raw.get("user"), 32),
                since=_time(holder_raw.get("since")),
                name=_text(holder_raw.get("name"), 128),
            )
    return HeadGpu(
        uuid=uuid,
        host=_text(raw.get("host"), 64),
        index=_int(raw.get("index"), -1),
        pool=_text(raw.get("pool"), 64),
        state=_text(raw.get("state"), 16),
        holder=holder,
        reason=_text(raw.get("state_reason"), 256),
    )


def env_line(uuids: object) -> str:
    """What ``gputui env`` prints for these GPUs, built from validated UUIDs only
    (:func:`gputui.common.gpu_env.export_line`); "" when there are none or any is not one."""
    try:
        checked = gpu_uuids(uuids)
    except ValueError:
        return ""
    return export_line(checked) if checked else ""
