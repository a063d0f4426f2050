"""hosts.yaml's pydantic models: what each setting is, its bounds, its default.

Unknown keys are errors: a typo never silently falls back to a default. Numbers are
strict: ``port: true`` or ``port: "22"`` is an error, not 1 or 22; no inf or nan where
a number is wanted. The scheduler's section is :mod:`gputui.config.scheduler`'s.

Reading the file (with bounds) and turning a validation error into ``FILE:LINE``
lines is :mod:`gputui.config.loader`'s; nothing here reads a file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    InstanceOf,
    PrivateAttr,
    field_validator,
    model_validator,
)

from gputui.common.i18n import LANGUAGES, _, language_of
from gputui.common.jobenv import DEFAULT_RUNTIME, Runtime
from gputui.common.listen import parse_listen
from gputui.common.locations import DEFAULT_SOCKET
from gputui.config.notify import NotifyConfig
from gputui.config.scheduler import SchedulerConfig
from gputui.config.slurm import SlurmConfig
from gputui.config.sshjump import parse_chain
from gputui.config.where import HOST_NAME
from gputui.wire.fields import MAX_GPUS

__all__ = [
    "Config",
    "HeadConfig",
    "HealthThresholds",
    "HostConfig",
    "JobsConfig",
    "Port",
    "ResolvedHost",
    "SchedulerConfig",
    "SshDefaults",
]


class _Model(BaseModel):
    # strict: YAML's ``true`` is not the port 1, nor "22" the port 22; an int is
    # still accepted where a float is expected. No inf/nan where a number is wanted.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


Port = Annotated[int, Field(ge=1, le=65535)]


def _listen(value: str) -> str:
    parse_listen(value)  # its ValueError is the field's one line
    return value


def _proxy_jump(value: str) -> str:
    try:
        parse_chain(value)
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix(f"proxy_jump {value!r}: ")) from None
    return value


def _interpreter(value: str) -> str:
    if not value.strip():
        raise ValueError(_("must name the interpreter (python3, or a path to one)"))
    if value != value.strip() or not value.isprintable():
        raise ValueError(_("must be one name or path: no spaces around it, no control characters"))
    return value


ProxyJump = Annotated[str, AfterValidator(_proxy_jump)]
"""``[user@]host[:port][,...]`` or ``none``, checked as the fleet will read it."""
Interpreter = Annotated[str, AfterValidator(_interpreter)]
"""The program that runs the helper on a host: a name on its PATH or a path."""


class SshDefaults(_Model):
    """SSH settings every host inherits unless it sets its own."""

    user: str | None = None
    """Login user; unset means ~/.ssh/config's User, then the local user name."""
    port: Port | None = None
    """SSH port; unset means ~/.ssh/config's Port, then 22."""
    identity_file: str | None = None
    """Private key file; unset means ~/.ssh/config's IdentityFile and the usual defaults."""
    proxy_jump: ProxyJump | None = None
    """Bastion to go through, ``[user@]host[:port]``, like OpenSSH's ProxyJump."""
    known_hosts: str | None = None
    """known_hosts file to verify host keys against; unset means ~/.ssh/known_hosts."""
    ssh_config: str | None = "~/.ssh/config"
    """OpenSSH client config to honour (User, Port, IdentityFile, ProxyJump); null for none."""
    python: Interpreter = "python3"
    """The Python interpreter on the host that runs the helper."""
    connect_timeout: Annotated[float, Field(gt=0, le=300)] = 10.0
    """Seconds to wait for one SSH connection to come up."""
    keepalive_interval: Annotated[float, Field(ge=0, le=3600)] = 15.0
    """Seconds between SSH keepalives; 0 turns them off."""


class HostConfig(_Model):
    """One GPU host."""

    name: str
    """Short unique name shown in the console."""
    address: str | None = None
    """Hostname or IP to connect to; defaults to ``name``."""
    port: Port | None = None
    """SSH port; overrides ``defaults.port``."""
    user: str | None = None
    """Login user; overrides ``defaults.user``."""
    identity_file: str | None = None
    """Private key file; overrides ``defaults.identity_file``."""
    proxy_jump: ProxyJump | None = None
    """Bastion, ``[user@]host[:port]``; overrides ``defaults.proxy_jump``."""
    known_hosts: str | None = None
    """known_hosts file for this host; overrides ``defaults.known_hosts``."""
    python: Interpreter | None = None
    """Interpreter that runs the helper on this host; overrides ``defaults.python``."""
    pool: str = "default"
    """Pool the host's GPUs belong to (used to group and, later, to schedule)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Free-form labels, e.g. ``{rack: r3, owner: vision}``."""
    gpus: Annotated[int, Field(ge=1, le=MAX_GPUS)] | None = None
    """How many GPUs the host has: fewer seen is a problem (a GPU fallen off the bus)."""
    sim: str | None = None
    """Simulated GPUs instead of NVML, e.g. ``4xrtx3090`` or ``8xa100-80gb,fault=xid:79@3``."""
    local: bool = False
    """This machine itself: the helper runs as a child process, no SSH. ``address`` and
    the SSH fields are then ignored; ``python`` defaults to this program's own
    interpreter (which has nvidia-ml-py)."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not HOST_NAME.fullmatch(value):
            raise ValueError(_("must be 1-63 letters, digits, '.', '_' or '-'"))
        return value

    @field_validator("sim")
    @classmethod
    def _check_sim(cls, value: str | None) -> str | None:
        if value is not None:
            from gputui.remote.sim.spec import SpecError, parse_spec

            try:
                parse_spec(value)
            except SpecError as exc:  # the helper's English, said in the reader's language
                raise ValueError(_(exc.message).format(**exc.fields)) from None
            except Exception as exc:  # any other failure is still this field's error
                raise ValueError(
                    _("bad sim spec: {error}").format(error=f"{exc.__class__.__name__}: {exc}")
                ) from None
        return value


class HealthThresholds(_Model):
    """When a reading becomes a problem worth showing."""

    temp_warn_c: Annotated[int, Field(ge=0, le=150)] = 83
    """GPU temperature (°C) shown as a warning."""
    temp_crit_c: Annotated[int, Field(ge=0, le=150)] = 90
    """GPU temperature (°C) shown as critical."""
    mem_warn_pct: Annotated[float, Field(ge=0, le=100)] = 95.0
    """Memory use, in % of the card's total, shown as a warning."""
    power_warn_pct: Annotated[float, Field(ge=0, le=200)] = 98.0
    """Power draw, in % of the enforced limit, shown as a warning."""
    stale_after_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    """Seconds without a sample before a host shows as stale (raised to 2.5 sampling
    intervals at a slow refresh: ``gputui.health.stale_limit``)."""
    ecc_uncorrected_max: Annotated[int, Field(ge=0)] = 0
    """Uncorrected ECC errors tolerated before a GPU is flagged (and fenced)."""
    slowdown_margin_c: Annotated[int, Field(ge=0, le=50)] = 5
    """A GPU this close to its own slowdown temperature is a warning."""
    hw_slowdown_minutes: Annotated[int, Field(ge=1, le=60)] = 6
    """HW slowdown active in this many of the last ``hw_slowdown_window_minutes`` is critical."""
    hw_slowdown_window_minutes: Annotated[int, Field(ge=1, le=60)] = 10
    xid_window_h: Annotated[float, Field(gt=0, le=24 * 30)] = 24.0
    """Repeats of an Xid on one GPU within this many hours escalate its action."""
    xid_escalate_after: Annotated[int, Field(ge=1, le=100)] = 3
    """Each this many repeats move the action one step up (restart, reset, reboot, inspect)."""
    retired_pages_max: Annotated[int, Field(ge=0, le=10_000)] = 0
    """Pages retired for double-bit errors tolerated before a warning."""
    pcie_load_pct: Annotated[int, Field(ge=0, le=100)] = 50
    """A PCIe link below its maximum generation counts only while the GPU is busier than
    this (a link narrower than its maximum width counts at any load)."""
    pcie_replays_max: Annotated[int, Field(ge=0)] = 10_000
    """PCIe replays (link retransmissions) tolerated before a warning."""
    expect_persistence: bool = False
    """true: persistence mode off is a warning (set it where the driver should stay loaded)."""
    fence_fabric: bool = True
    """true: a head fences a GPU whose NVSwitch fabric registration is not ready or failed."""
    fence_nvlink_down: bool = True
    """true: a head fences a GPU on an NVSwitch fabric with an NVLink down."""
    claim_idle_minutes: Annotated[float, Field(gt=0, le=10080)] = 10.0
    """An active claim with no process of its owner on its GPUs this long is a health
    finding (the head releases it later, at ``head.claim_idle_minutes``)."""

    @model_validator(mode="after")
    def _ordered(self) -> HealthThresholds:
        if self.temp_warn_c > self.temp_crit_c:
            raise ValueError(_("temp_warn_c must not be above temp_crit_c"))
        if self.hw_slowdown_minutes > self.hw_slowdown_window_minutes:
            raise ValueError(_("hw_slowdown_minutes must not be above hw_slowdown_window_minutes"))
        return self


MAX_HEADS = 8
"""Head hosts ``head.host`` may list (a leader and its standbys)."""


class HeadConfig(_Model):
    """Where the scheduler's head daemon runs, and the rules it keeps."""

    host: str | list[str] = "localhost"
    """Host name (from ``hosts`` or any SSH destination) that runs ``gputui head``;
    consoles elsewhere reach its socket through SSH to it. With a standby head (a
    PostgreSQL ``database``), a list of both: clients try them in order and use the
    one that answers, the leader (a standby does not serve its socket)."""
    socket: str = DEFAULT_SOCKET
    """The head daemon's Unix socket on that host, reached through SSH."""
    database: str = "/var/lib/gputui/gputui.db"
    """The head's SQLite file (on local disk), or a PostgreSQL server's database:
    ``postgresql+psycopg://USER@HOST/DB`` (needs ``gputui[postgres]``)."""
    admin_group: str = "gputui-admin"
    """Unix group whose members may act on anyone's jobs, claims and processes."""
    claim_idle_minutes: Annotated[float, Field(gt=0, le=10080)] = 30.0
    """A claim with no process of its owner on its GPUs this long is released."""
    kill_grace_s: Annotated[float, Field(ge=0, le=3600)] = 10.0
    """Seconds between SIGTERM and SIGKILL when a job is killed, preempted or timed out."""
    requeue_limit: Annotated[int, Field(ge=0, le=100)] = 3
    """A job preempted more often than this is held instead of requeued."""
    run_as_login_user: bool = False
    """On hosts the head logs in to as a user other than root, run every job as that
    user (the console then says so). Off: only that user's own jobs run there."""
    allow_gpu_reset: bool = False
    """``gputui force-free --reset`` may reset a GPU whose memory stays held with no
    process (``nvmlDeviceResetGpu``; the card must be idle). Off: it is only offered."""
    readings_keep_days: Annotated[float, Field(gt=0, le=366)] = 14.0
    """The GPU readings the head stores for ``gputui incident`` go after this many days
    (sooner on a large cluster: at most 500,000 in all, 1,440 per GPU)."""
    max_connections_per_user: Annotated[int, Field(ge=1, le=4096)] = 64
    """Connections to the head one user (Unix uid) may hold at once; more are told
    so and closed. The head serves 4,096 in all."""
    request_timeout_s: Annotated[float, Field(ge=1, le=3600)] = 30.0
    """A connection must finish each request it begins, and its first, within this
    many seconds, or it is closed."""
    client_stall_s: Annotated[float, Field(ge=1, le=3600)] = 60.0
    """A client that leaves what the head sent it unread this long is dropped (a
    console it pushes state to gets only the latest, never a backlog)."""
    session_grace_s: Annotated[float, Field(ge=1, le=3600)] = 30.0
    """After the head starts again, a ``gputui run`` has this long to reconnect and
    take its claim back; then the claim is released."""
    lease_s: Annotated[float, Field(ge=1, le=300)] = 10.0
    """With a PostgreSQL ``database`` two heads may share: the leader's lease. A
    standby takes over within this plus a third of it after the leader dies."""
    metrics: Annotated[str, AfterValidator(_listen)] | None = None
    """``ADDR:PORT`` to serve Prometheus metrics on (``/metrics``); off when left out.
    ``gputui head --metrics`` overrides it."""

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str | list[str]) -> str | list[str]:
        names = [value] if isinstance(value, str) else value
        if not 1 <= len(names) <= MAX_HEADS:
            raise ValueError(_("give 1 to {most} head hosts").format(most=MAX_HEADS))
        for name in names:
            if not name.strip() or len(name) > 255 or not name.isprintable():
                raise ValueError(_("{name} is not a host name").format(name=repr(name[:40])))
        if len(set(names)) != len(names):
            raise ValueError(_("a head host is listed twice"))
        return value

    @property
    def hosts(self) -> tuple[str, ...]:
        """The heads' hosts, in the order clients try them."""
        return (self.host,) if isinstance(self.host, str) else tuple(self.host)


def _seconds(value: object) -> object:
    """A duration as people write one (``8h``, ``30m``, ``1-12:00``) or a number of seconds."""
    if isinstance(value, str):
        from argparse import ArgumentTypeError

        from gputui.common.durations import parse_duration

        try:
            return parse_duration(value)
        except (ArgumentTypeError, ValueError) as exc:  # the CLI's error, said as a setting's
            raise ValueError(str(exc)) from None
    return value


Duration = Annotated[float, BeforeValidator(_seconds)]


class JobsConfig(_Model):
    """How the head runs jobs on the GPU hosts (hosts.yaml ``jobs:``): the default
    container runtime, and the limits of interactive ones (``gputui run --pty``)."""

    runtime: Runtime = DEFAULT_RUNTIME
    """The container runtime of a job submitted with ``--image`` and no ``--runtime``:
    docker, podman or apptainer (installed on the GPU hosts)."""

    interactive_time: Annotated[Duration, Field(ge=1, le=30 * 86400, allow_inf_nan=False)] = (
        8 * 3600.0
    )
    """An interactive job's time limit when it asks none (``8h``, ``90m``, or seconds);
    one that asks more is held to this too."""
    interactive_idle: Annotated[Duration, Field(ge=1, le=7 * 86400, allow_inf_nan=False)] = 3600.0
    """An interactive job with no input and no output this long is ended (a session
    forgotten in a terminal does not hold its GPUs overnight)."""


class UiConfig(_Model):
    """The console's and the CLI's look for people (hosts.yaml ``ui:``)."""

    lang: str | None = None
    """The language shown: ``en`` or ``zh_CN`` (``zh`` will do); unset: ``LC_ALL``,
    ``LC_MESSAGES``, ``LANG``. ``--lang`` comes first."""

    @field_validator("lang")
    @classmethod
    def _known_language(cls, value: str | None) -> str | None:
        if value is None:
            return None
        lang = language_of(value)
        if lang is None:
            raise ValueError(
                _("unknown language; known: {known}").format(known=", ".join(LANGUAGES))
            )
        return lang


class Config(_Model):
    """The whole of hosts.yaml."""

    hosts: list[HostConfig] = Field(default_factory=list)
    """The GPU hosts, in the order the console shows them."""
    defaults: SshDefaults = Field(default_factory=SshDefaults)
    """SSH settings every host inherits."""
    refresh_interval: Annotated[float, Field(ge=0.1, le=60)] = 1.0
    """Seconds between samples from every helper."""
    health_every_s: Annotated[float, Field(ge=1, le=3600)] = 10.0
    """Seconds between the health readings (remapped rows, NVLinks, fabric ...) of
    every helper; an Xid makes the next sample read them at once."""
    ui: UiConfig = Field(default_factory=UiConfig)
    """The language shown (``ui.lang``)."""
    theme: str = "gputui-dark"
    """Colour theme: a file in gputui/themes/ or ~/.config/gputui/themes/, or a Textual theme."""
    health: HealthThresholds = Field(default_factory=HealthThresholds)
    """When readings count as problems."""
    head: HeadConfig | None = None
    """The scheduler's head node; leave out for monitoring only."""
    slurm: Annotated[InstanceOf[SlurmConfig], BeforeValidator(SlurmConfig.parse)] | None = None
    """Slurm as the scheduler: ``gputui queue`` and the verbs run Slurm's commands as
    the calling user. With ``head:`` too, the head relays Slurm's state to consoles
    (one poll of slurmctld for all of them) and schedules nothing itself."""
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    """The head's policy: priority classes, fair share, quotas, preemption, accounting."""
    jobs: JobsConfig = Field(default_factory=JobsConfig)
    """How jobs run on the GPU hosts: the default container runtime, interactive
    sessions' time and idle limits."""
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    """Notices in the team's chat: team channels, and how the head sends them."""
    connect_concurrency: Annotated[int, Field(ge=1, le=1024)] = 32
    """SSH handshakes in flight at once (keep under sshd's MaxStartups across hosts)."""

    _source: str = PrivateAttr("<config>")
    _lines: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def source(self) -> str:
        """The file this config was read from, as errors name it."""
        return self._source

    def line_of(self, field: str) -> int:
        """The line ``field`` (e.g. ``hosts[2].identity_file``) was given on, else its
        nearest enclosing field's, else 1: so later checks can name the line too."""
        while field:
            if field in self._lines:
                return self._lines[field]
            cut = max(field.rfind("."), field.rfind("["))
            field = field[:cut] if cut > 0 else ""
        return 1

    def remember_origin(self, source: str, lines: dict[str, int]) -> None:
        """Say which file this config came from and the line of each key in it (the
        loader calls this once, right after validating), so ``source`` and ``line_of``
        can name them."""
        self._source = source
        self._lines = lines

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: set[str] = set()
        for host in self.hosts:
            if host.name in seen:
                raise ValueError(_("duplicate host name {name}").format(name=repr(host.name)))
            seen.add(host.name)
        return self

    def resolved(self) -> list[ResolvedHost]:
        return [ResolvedHost.merge(self.defaults, host) for host in self.hosts]


@dataclass(frozen=True, slots=True)
class ResolvedHost:
    """A host with the defaults applied: what the fleet connects to."""

    name: str
    address: str
    port: int | None
    user: str | None
    identity_file: str | None
    proxy_jump: str | None
    known_hosts: str | None
    ssh_config: str | None
    python: str
    connect_timeout: float
    keepalive_interval: float
    pool: str
    labels: dict[str, str]
    sim: str | None
    local: bool = False
    """Run the helper as a child process of this one (no SSH; see ``HostConfig.local``)."""

    @classmethod
    def merge(cls, defaults: SshDefaults, host: HostConfig) -> ResolvedHost:
        if host.local:
            return cls.local_host(host)
        return cls(
            name=host.name,
            address=host.address or host.name,
            port=host.port if host.port is not None else defaults.port,
            user=host.user or defaults.user,
            identity_file=host.identity_file or defaults.identity_file,
            proxy_jump=host.proxy_jump or defaults.proxy_jump,
            known_hosts=host.known_hosts or defaults.known_hosts,
            ssh_config=defaults.ssh_config,
            python=host.python or defaults.python,
            connect_timeout=defaults.connect_timeout,
            keepalive_interval=defaults.keepalive_interval,
            pool=host.pool,
            labels=dict(host.labels),
            sim=host.sim,
        )

    @classmethod
    def local_host(cls, host: HostConfig) -> ResolvedHost:
        """This machine: no address, no SSH settings; this interpreter unless one is named."""
        return cls(
            name=host.name,
            address="local",
            port=None,
            user=None,
            identity_file=None,
            proxy_jump=None,
            known_hosts=None,
            ssh_config=None,
            python=host.python or sys.executable or "python3",
            connect_timeout=SshDefaults().connect_timeout,
            keepalive_interval=0.0,
            pool=host.pool,
            labels=dict(host.labels),
            sim=host.sim,
            local=True,
        )
