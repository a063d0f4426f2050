"""How a job's state and the reason it waits read in the chosen language.

Only what is shown goes through here: the state (``queued``) and the reason code
(``Resources``, Slurm's names where they exist) stay as they are in ``--json``, in the
store and on the wire. A state or reason not listed (a Slurm state, one from a newer
head) is shown as it came, already cleaned by the caller.
"""

from __future__ import annotations

from gputui.common.i18n import N_, _, per_language, pgettext

STATES = frozenset(
    {
        N_("queued"),
        N_("held"),
        N_("starting"),
        N_("running"),
        N_("preempting"),
        N_("killing"),
        N_("unknown"),
        N_("completed"),
        N_("failed"),
        N_("timeout"),
        N_("killed"),
        N_("cancelled"),
    }
)
"""The head's job states (``gputui.scheduler.policy.rows``: a test holds them equal)."""

GPU_STATES = frozenset(
    {
        N_("free"),
        N_("claimed"),
        N_("job"),
        N_("rogue"),
        N_("stray"),
        N_("drained"),
        N_("fenced"),
        N_("unhealthy"),
        N_("mig"),
    }
)
"""A card's states in ``gputui gpus`` (``gputui.scheduler.head.gpu_table.STATES``)."""

REASONS = frozenset(
    {
        N_("Resources"),
        N_("Priority"),
        N_("Reservation"),
        N_("QuotaExceeded"),
        N_("OffHours"),
        N_("Dependency"),
        N_("ClassNotAllowed"),
        N_("Preempting"),
        N_("Drained"),
        N_("Fenced"),
        N_("HostDown"),
        N_("Held"),
        N_("LoginUser"),
        N_("JobArrayTaskLimit"),
    }
)
"""The policy's reason codes (``gputui.scheduler.policy.model``: a test holds them)."""


def state_text(state: str) -> str:
    """``state`` as a person reads it in the chosen language."""
    return _(state) if state in STATES else state


def gpu_state_text(state: str) -> str:
    """A card's state (``free``, ``claimed`` ...) in the chosen language."""
    return _(state) if state in GPU_STATES else state


def reason_text(reason: str) -> str:
    """A reason as a person reads it in the chosen language: its code (the code
    itself in English, as Slurm shows it) and what follows a ``:`` as it is
    (``Resources: 8 GPUs on one host …``); a reason with no known code as it is."""
    code, colon, rest = reason.partition(":")
    return _(code) + colon + rest if code in REASONS else reason


def idle_text(age: str) -> str:
    """``Idle 2h05m``: a running job idle past the head's limit (``age`` is its age)."""
    return _("Idle {age}").format(age=age)


def _notice_words() -> dict[str, str]:
    # Each one spelt out, so the catalogue's extraction finds it with its context.
    return {
        "started": pgettext("notice", "started"),
        "ended": pgettext("notice", "ended"),
        "preempted": pgettext("notice", "preempted"),
        "ownership": pgettext("notice", "ownership"),
        "idle": pgettext("notice", "idle"),
        "claim": pgettext("notice", "claim"),
        "booking": pgettext("notice", "booking"),
        "admin": pgettext("notice", "admin"),
        "fence": pgettext("notice", "fence"),
    }


_notice_kind_words = per_language(_notice_words)
"""The kinds' words, looked up once per language (a list of notices shows many)."""


def notice_kind_text(kind: str) -> str:
    """A notice's kind (``started``, ``ownership``...) as a word in the chosen language;
    one this client does not know, as it came (the caller has cleaned it)."""
    return _notice_kind_words().get(kind, kind)
