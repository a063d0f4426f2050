"""What each request on a job does in each of its states: one table, nothing else.

Every action is defined in every state. It either takes effect (a new state, and
how the job's run ends once its process is gone) or is refused with the reason;
never acknowledged and dropped. ``actions`` applies a ``Step``; ``lifecycle``
ends a stopped run the way its ``stop`` says (``END_OF_STOP``).

A job being stopped is ``killing`` or ``preempting`` in the store; its
``stop_kind`` says how it ends: ``kill`` (killed), ``cancel`` (cancelled),
``preempt`` (back in the queue, or held past the requeue limit). The table tells
a ``killing`` job that is being cancelled apart from one being killed (its
``phase``, ``cancelling``), since the two end differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from gputui.common.i18n import N_
from gputui.scheduler.server.wire import FINAL_JOB_STATES, JobStateName

JOB_ACTIONS = ("cancel", "kill", "preempt", "requeue", "hold", "release_hold")
"""Every request the head takes on one job (wire ops)."""
PHASES: tuple[str, ...] = (*get_args(JobStateName), "cancelling")
"""Every state a job can be in, and ``cancelling`` (``killing`` with a cancel's stop)."""

END_OF_STOP = {"kill": "killed", "cancel": "cancelled", "preempt": "queued"}
"""How a stopped run's job ends once its process is gone (``preempt``: requeued)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One action in one phase: a change (``state``) or a refusal (``refuse``)."""

    state: str | None = None
    """The job's next state (None: refused)."""
    stop: str | None = None
    """How its run ends once its process is gone (``END_OF_STOP``): set on a running
    job (SIGTERM now, SIGKILL after the grace period) or on one already stopping
    (its signals go on as before; only how it ends changes)."""
    force: bool = False
    """Taken only with ``--force`` (requeue of a job that ended: its command runs again)."""
    refuse: str = ""
    """Why not (a template, marked ``N_``: ``{id}``, ``{state}``, ``{user}``)."""
    told: str = ""
    """What the answer says happens next (a template, marked ``N_``: ``{user}``)."""


def _no(why: str) -> Step:
    return Step(refuse=why)


_NOT_RUNNING = _no(N_("job {id} is {state}, not running; use cancel"))
_ONLY_RUNNING_PREEMPTED = _no(N_("job {id} is {state}; only a running job is preempted"))
_ONLY_QUEUED_HELD = _no(N_("job {id} is {state}; only a queued job is held"))
_NOT_HELD = _no(N_("job {id} is {state}, not held"))
_ENDED = _no(N_("job {id} already ended ({state})"))

_REQUEUED = N_("it gets SIGTERM now, SIGKILL after the grace period, and is requeued")
_RUNNING = {
    "cancel": Step(
        "killing",
        "cancel",
        told=N_(
            "it gets SIGTERM now, SIGKILL after the grace period, and ends cancelled;"
            " it is not run again"
        ),
    ),
    "kill": Step(
        "killing",
        "kill",
        told=N_("it gets SIGTERM now, SIGKILL after the grace period, and ends killed"),
    ),
    "preempt": Step("preempting", "preempt", told=_REQUEUED),
    "requeue": Step("preempting", "preempt", told=_REQUEUED),
    "hold": _ONLY_QUEUED_HELD,
    "release_hold": _NOT_HELD,
}
_FINAL = {
    "cancel": _ENDED,
    "kill": _ENDED,
    "preempt": _no(N_("job {id} already ended ({state}); requeue --force runs it again")),
    "requeue": Step(
        "queued",
        force=True,
        refuse=N_(
            "job {id} already ended ({state}): requeue runs {user}'s command again, as {user};"
            " give --force to do that"
        ),
        told=N_("queued again: it runs {user}'s command again, as {user}"),
    ),
    "hold": _no(N_("job {id} already ended ({state}); only a queued job is held")),
    "release_hold": _no(N_("job {id} already ended ({state}); it is not held")),
}

TABLE: dict[str, dict[str, Step]] = {
    "queued": {
        "cancel": Step("cancelled", told=N_("cancelled before it ran")),
        "kill": _NOT_RUNNING,
        "preempt": _ONLY_RUNNING_PREEMPTED,
        "requeue": _no(N_("job {id} is already queued")),
        "hold": Step("held", told=N_("held: it does not start until release-hold")),
        "release_hold": _NOT_HELD,
    },
    "held": {
        "cancel": Step("cancelled", told=N_("cancelled before it ran")),
        "kill": _NOT_RUNNING,
        "preempt": _ONLY_RUNNING_PREEMPTED,
        "requeue": _no(N_("job {id} is held; release-hold puts it back in the queue")),
        "hold": _no(N_("job {id} is already held")),
        "release_hold": Step("queued", told=N_("back in the queue")),
    },
    "starting": _RUNNING,
    "running": _RUNNING,
    "unknown": _RUNNING,
    "preempting": {
        "cancel": Step(
            "killing",
            "cancel",
            told=N_("it is being stopped; it ends cancelled, not requeued, and is not run again"),
        ),
        "kill": Step(
            "killing", "kill", told=N_("it is being stopped; it ends killed, not requeued")
        ),
        "preempt": _no(N_("job {id} is already being preempted")),
        "requeue": _no(N_("job {id} is already being preempted; it is requeued once it stops")),
        "hold": _no(N_("job {id} is being preempted; hold it once it is back in the queue")),
        "release_hold": _NOT_HELD,
    },
    "killing": {
        "cancel": _no(N_("job {id} is already being killed; it ends killed once it stops")),
        "kill": _no(N_("job {id} is already being killed")),
        "preempt": _no(N_("job {id} is being killed; it is not requeued")),
        "requeue": _no(N_("job {id} is being killed; requeue it with --force once it has ended")),
        "hold": _no(N_("job {id} is being killed; only a queued job is held")),
        "release_hold": _NOT_HELD,
    },
    "cancelling": {
        "cancel": _no(N_("job {id} is already being cancelled")),
        "kill": _no(N_("job {id} is already being cancelled; it ends cancelled once it stops")),
        "preempt": _no(N_("job {id} is being cancelled; it is not requeued")),
        "requeue": _no(
            N_("job {id} is being cancelled; requeue it with --force once it has ended")
        ),
        "hold": _no(N_("job {id} is being cancelled; only a queued job is held")),
        "release_hold": _NOT_HELD,
    },
    **dict.fromkeys(sorted(FINAL_JOB_STATES), _FINAL),
}


def phase(state: str, stop_kind: str | None) -> str:
    """The table's row for a job: its state, or ``cancelling`` for a cancel under way."""
    return "cancelling" if state == "killing" and stop_kind == "cancel" else state


def step(action: str, state: str, stop_kind: str | None) -> Step:
    """What ``action`` does to a job in ``state`` (``KeyError``: not a job action)."""
    row = TABLE.get(phase(state, stop_kind))
    if row is None:  # a state this head does not know (a newer one's): touch nothing
        return _no(N_("job {id} is {state}: this head does not know that state"))
    return row[action]
