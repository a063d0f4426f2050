"""``HeadSettings``: how a head runs (its socket, admins, rules, thresholds, budgets),
from hosts.yaml's ``head:`` section and the command line (``gputui head``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gputui.config.models import HealthThresholds
from gputui.config.notify import NotifyConfig
from gputui.config.slurm import SlurmConfig
from gputui.scheduler.head.actions import Rules
from gputui.scheduler.head.watch import history
from gputui.scheduler.head.watch.meter import FLUSH_S
from gputui.scheduler.head.watch.readings import KEEP_S
from gputui.scheduler.server.connection import Limits

TICK_S = 1.0
SESSION_GRACE_S = 30.0
STATE_PUSH_MIN_S = 0.1
METRICS_REFRESH_S = 5.0


@dataclass(frozen=True, slots=True)
class HeadSettings:
    socket: Path
    admin_group: str | None = "gputui-admin"
    rules: Rules = field(default_factory=Rules)
    run_as_login_user: bool = False
    """Run every job as the user the head logs in as, when that is not root."""
    group_commit: bool = True
    """False: one commit per request (the benchmark's baseline)."""
    meter_flush_s: float = FLUSH_S
    """How often the busy time and energy counted from samples are stored."""
    health: HealthThresholds = field(default_factory=HealthThresholds)
    """hosts.yaml's ``health:`` thresholds (uncorrected ECC fences a GPU above its own)."""
    allow_gpu_reset: bool = False
    """A force-free may reset a GPU whose memory stays held with no process."""
    expected_gpus: Mapping[str, int | None] = field(default_factory=dict)
    """hosts.yaml's ``gpus:`` per host (fewer seen is a health problem)."""
    readings_flush_s: float = history.FLUSH_S
    """How often the GPU readings kept for ``gputui incident`` are stored."""
    readings_keep_s: float = KEEP_S
    """How long a stored GPU reading is kept (at most; the budget may keep less)."""
    limits: Limits = field(default_factory=Limits)
    """What one client may cost: connections (per user too), unfinished requests,
    unread answers and state."""
    host_places: Mapping[str, tuple[str, bool]] = field(default_factory=dict)
    """hosts.yaml's address and ``local:`` per host (``gputui env`` finds its own)."""
    tick_s: float = TICK_S
    """How often the head's timer runs: idle claims, ownership flags, health, time
    limits and the scheduling pass they may call for."""
    session_grace_s: float = SESSION_GRACE_S
    """After a restart, how long a ``gputui run`` has to reconnect and take its claim
    back before the claim is released (hosts.yaml's ``head: session_grace_s``)."""
    state_push_min_s: float = STATE_PUSH_MIN_S
    """The least time between two state pushes to subscribed consoles."""
    slurm: SlurmConfig | None = None
    """With a ``slurm:`` section: the head relays Slurm's state to consoles
    (``slurm_relay``); Slurm stays the scheduler."""
    metrics: tuple[str, int] | None = None
    """Where ``/metrics`` is served (address, port; port 0: any free one); None: off."""
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    """hosts.yaml's ``notify:``: team chat channels, and how notices are sent."""
    metrics_refresh_s: float = METRICS_REFRESH_S
    """How often the queue's and the accounting's figures of ``/metrics`` are read
    again (they are also read after every commit that changed the state), and how
    often its text is made anew while anyone scrapes."""
