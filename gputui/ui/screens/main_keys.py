"""The main screen's keys: what each does and says (footer, ``?``, the palette), which
need a head (``SCHEDULER_BINDINGS``, offered only when hosts.yaml has a head:
section), and their order in the footer.

The screen (``main``) binds these and carries the actions out; the help screen and
the head's console list them from here through ``MainScreen``.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

_OWN: list[BindingType] = [
    Binding(
        "slash",
        "filter",
        "Filter",
        tooltip="Filter by host, pool, model or user; the word free: unclaimed and idle",
    ),
    Binding("escape", "clear_filter", "Clear filter", show=False),
    Binding(
        "s",
        "sort",
        "Sort",
        tooltip="Sort: host, util, mem, temp, power, free (unclaimed and idle) first",
    ),
    Binding(
        "g",
        "group",
        "Group by host",
        show=False,
        tooltip="Group by host, or sort one list across all hosts",
    ),
    Binding(
        "r",
        "retry",
        "Retry",
        show=False,
        tooltip="Reconnect the selected host now, not after the wait",
    ),
    Binding("h", "app.health", "Health", tooltip="Every problem in the cluster, ranked"),
    Binding(
        "p",
        "tree",
        "Tree",
        show=False,
        tooltip="Processes as a tree per GPU: parents, container (again: flat)",
    ),
    Binding("T", "signal('TERM')", "SIGTERM", tooltip="SIGTERM the selected process (asks)"),
    Binding("K", "signal('KILL')", "SIGKILL", tooltip="SIGKILL the selected process (asks)"),
]
"""The screen's own keys, offered with or without a head."""

SCHEDULER_BINDINGS: list[BindingType] = [
    Binding(
        "c",
        "scheduler('claim')",
        "Claim",
        tooltip="Claim the selected GPU (host line: asks how many)",
    ),
    Binding(
        "C",
        "scheduler('claim_n')",
        "Claim N",
        tooltip="Claim N free GPUs (asks how many, pool, model)",
    ),
    Binding(
        "u",
        "scheduler('release')",
        "Release",
        tooltip="Release your claim on it (host line: all there)",
    ),
    Binding(
        "e",
        "scheduler('env')",
        "Env",
        show=False,
        tooltip="Copy the CUDA_VISIBLE_DEVICES line for this host",
    ),
    Binding("Q", "scheduler('queue')", "Queue", tooltip="The job queue, logs and actions"),
    Binding("n", "scheduler('submit')", "Submit", tooltip="Enqueue a job (a form)"),
    Binding(
        "U",
        "scheduler('usage')",
        "Usage",
        tooltip="GPU-hours per user and group, utilisation by hour",
    ),
    Binding(
        "W",
        "scheduler('week')",
        "Week",
        show=False,
        tooltip="The booking board: a week of bookings and jobs per GPU",
    ),
    Binding("A", "scheduler('audit')", "Audit", tooltip="Who did what, when and why"),
    Binding(
        "D",
        "scheduler('drain')",
        "Drain",
        show=False,
        tooltip="Drain the selected GPU or host (admins; asks why), or undrain it",
    ),
    Binding(
        "F",
        "scheduler('force_free')",
        "Force-free",
        show=False,
        tooltip="Take the selected GPU back: drain, kill, check memory (admins; asks why)",
    ),
]
"""Offered when hosts.yaml has a head: section (``check_action``). In the footer they
come before the health and signal keys (which ``?`` always lists), so that an 80-column pane
shows claim, release and the queue."""
BINDINGS: list[BindingType] = [*_OWN[:-3], *SCHEDULER_BINDINGS, *_OWN[-3:]]
"""Every key of the main screen, in the footer's order."""

SCHEDULER_ACTIONS = frozenset(
    {
        "claim",
        "claim_n",
        "release",
        "env",
        "queue",
        "submit",
        "usage",
        "week",
        "audit",
        "drain",
        "force_free",
    }
)
"""The actions of ``SCHEDULER_BINDINGS`` (``scheduler(ACTION)``)."""
