"""The problems the hosts' readings cannot show, as findings: what the head knows.

Cards the head fenced (critical) or an admin drained (a note); processes on a GPU
where their owner holds no job or claim (``ROGUE``), or holds one on another GPU of
that host (``STRAY``); jobs whose GPUs sat at 0% past the head's idle limit; claims
with no process of their owner on their GPUs for longer than
``health.claim_idle_minutes``. Pure functions over plain arguments: the head builds
them from its own tables, the console from the state the head pushes, and each
text is written here once.

A finding's ``detail`` (what unacknowledges it when it changes) names only what
identifies the problem (the reason, the pid, the job), never a time that grows.
"""

from __future__ import annotations

from gputui.common.durations import coarse_text
from gputui.common.i18n import N_
from gputui.common.text import clean
from gputui.health import words as w
from gputui.health.finding import Finding

LABELS = {"no-allocation": N_("ROGUE"), "outside-allocation": N_("STRAY")}
"""A flagged process's kind -> the grid's marker."""
CODES = frozenset({"fenced", "drained", "rogue-process", "stray-process", "idle-job", "idle-claim"})
"""The codes of the findings made here (none of a host's own checks uses them)."""


def fenced(host: str, index: int, uuid: str | None, why: str) -> Finding:
    why = why or N_("no reason given")
    return Finding(
        "fenced",
        "crit",
        host,
        index,
        w.FENCED.format(why=why),
        N_("no new claim or job lands on it until the condition clears"),
        w.UNFENCE.format(host=host, index=index),
        why,
        uuid,
        "FENCE",
    )


def drained(host: str, index: int, uuid: str | None, why: str) -> Finding:
    why = why or N_("no reason given")
    return Finding(
        "drained",
        "info",
        host,
        index,
        w.DRAINED.format(why=why),
        N_("an admin keeps new work off it; what runs there finishes"),
        w.UNDRAIN.format(host=host, index=index),
        why,
        uuid,
        "DRAIN",
    )


def process_flag(  # noqa: PLR0917 - a flagged process's fields, in their order
    host: str, index: int, uuid: str | None, pid: int, user: str, name: str, kind: str
) -> Finding:
    """``kind``: ``no-allocation`` (ROGUE) or ``outside-allocation`` (STRAY)."""
    rogue = kind == "no-allocation"
    return Finding(
        "rogue-process" if rogue else "stray-process",
        "warn",
        host,
        index,
        w.FLAGGED.format(
            label=LABELS.get(kind, N_("FLAG")), pid=pid, user=clean(user, 32), name=clean(name, 48)
        ),
        N_("a process whose owner holds no job or claim on this host")
        if rogue
        else N_("a process on a GPU other than the ones its owner holds here"),
        N_("ask the owner to claim the GPU or stop it; an admin may signal it (T, K)"),
        w.PID.format(pid=pid),
        uuid,
        subject=str(pid),
    )


def idle_job(host: str, job_id: int, user: str, idle_s: float) -> Finding:
    return Finding(
        "idle-job",
        "info",
        host,
        None,
        w.JOB_IDLE.format(job=job_id, user=clean(user, 32), hours=f"{idle_s / 3600:.1f}"),
        N_("its GPUs have shown 0% utilisation past the head's idle limit"),
        N_("ask the owner; cancel it if it is stuck"),
        w.JOB.format(job=job_id),
        subject=str(job_id),
    )


def idle_claim(
    host: str, claim_id: int, user: str, idle_s: float, *, release_in_s: float | None
) -> Finding:
    """A claim whose GPUs have shown no process of its owner for ``idle_s``.
    ``release_in_s``: when the head releases it by itself (None: it does not, a
    ``gputui run`` session's claim lasts as long as the session)."""
    user = clean(user, 32)
    if release_in_s is None:
        return Finding(
            "idle-claim",
            "warn",
            host,
            None,
            w.CLAIM_IDLE.format(claim=claim_id, user=user, idle=coarse_text(idle_s)),
            N_(
                "its GPUs show no process of its owner; a gputui run session holds it, so the"
                " head does not release it"
            ),
            w.RELEASE_OR.format(claim=claim_id),
            w.CLAIM.format(claim=claim_id),
            subject=str(claim_id),
        )
    return Finding(
        "idle-claim",
        "info",
        host,
        None,
        w.CLAIM_IDLE_RELEASE.format(
            claim=claim_id, user=user, idle=coarse_text(idle_s), left=coarse_text(release_in_s)
        ),
        N_(
            "its GPUs show no process of its owner; the head releases it when its idle limit"
            " is reached"
        ),
        w.RELEASE_NOW.format(claim=claim_id),
        w.CLAIM.format(claim=claim_id),
        subject=str(claim_id),
    )


def claim_idle(
    host: str | None,
    claim_id: int,
    user: str,
    *,
    idle_since: float | None,
    now: float,
    after_s: float | None,
    session: bool,
    idle_release_s: float | None,
) -> Finding | None:
    """The idle-claim finding of an active claim idle since ``idle_since`` (None: a
    process of its owner is on its GPUs), once that is longer than ``after_s``."""
    if host is None or idle_since is None or after_s is None:
        return None
    idle = now - idle_since
    if idle < after_s:
        return None
    release_in = None if session else max(0.0, (idle_release_s or 0.0) - idle)
    return idle_claim(host, claim_id, user, idle, release_in_s=release_in)
