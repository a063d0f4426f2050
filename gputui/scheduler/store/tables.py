"""The head's tables (SQLModel): what is stored, and nothing about how it is queried.

All SQL lives in the store's queries; the wire models the head speaks are in
``gputui.scheduler.server`` (``wire``, ``op_args``, ``read_args``). The one rule the
database enforces by itself: a partial unique index on ``allocation.gpu_uuid WHERE
end_at IS NULL`` makes two live allocations of one GPU impossible, whatever the
scheduler's code does.

Times are epoch seconds (float, UTC). Lists and maps are stored as JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import BigInteger, Boolean, Column, Float, Index, Text, text
from sqlmodel import Field, SQLModel

from gputui.wire.words import Words

# Named constraints, so a later migration can drop or alter one by name: SQLite's
# batch mode ("move and copy") cannot address an unnamed constraint.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _json(default: str) -> Column[str]:
    """A JSON text column (lists and maps), never null."""
    return Column(Text, nullable=False, server_default=default)


class Meta(SQLModel, table=True):
    """Key/value facts about this database (e.g. the namespace its jobs use on hosts)."""

    key: str = Field(primary_key=True, max_length=64)
    value: str = Field(sa_column=Column(Text, nullable=False))


class Host(SQLModel, table=True):
    """A GPU host as the head last saw it, and whether an admin drained all of it."""

    name: str = Field(primary_key=True, max_length=128)
    pool: str = Field(default="default", max_length=64)
    drained_by: str | None = Field(default=None, max_length=64)
    drain_reason: str | None = Field(default=None, max_length=512)
    drained_at: float | None = None
    """Since when an admin's drain holds (null: not drained)."""
    last_seen: float | None = None

    @property
    def drained(self) -> bool:
        return self.drained_at is not None


class Gpu(SQLModel, table=True):
    """One GPU, with an admin's drain and the head's own fence kept apart (as Slurm
    keeps DRAIN apart from DOWN): each with who or what, why and since when, and
    neither clears the other."""

    uuid: str = Field(primary_key=True, max_length=96)
    host: str = Field(index=True, max_length=128)
    index: int
    model: str = Field(default="", max_length=128)
    memory_mib: int = 0
    pool: str = Field(default="default", max_length=64)
    drained_by: str | None = Field(default=None, max_length=64)
    drain_reason: str | None = Field(default=None, max_length=512)
    drained_at: float | None = None
    """Since when an admin's drain holds (null: not drained)."""
    fence_code: str | None = Field(default=None, max_length=32)
    """Why the head fenced it off by itself (``lost``, ``xid-79`` ...; null: not fenced)."""
    fence_reason: str | None = Field(default=None, max_length=512)
    fenced_at: float | None = None
    fence_clears: str | None = Field(default=None, max_length=16)
    """``condition``: lifted once a sample no longer shows it; ``reboot``: once the host
    booted after ``fenced_at`` (or by an admin's unfence, either way)."""
    fence_waived: str | None = Field(default=None, max_length=256)
    """The fence codes an admin cleared while their conditions still showed (comma-
    separated): not fenced again for one until its condition is gone (or, for an Xid,
    happens again); any other condition fences it again."""
    fence_waived_at: float | None = None
    present: bool = True
    mig_profile: str | None = Field(default=None, max_length=32)
    """A MIG slice's profile (``1g.10gb``); null: a whole card. A slice is a row of its
    own, keyed by its ``MIG-`` UUID, with its card's ``index``."""
    mig_parent: str | None = Field(default=None, max_length=96)
    """A MIG slice's card (its UUID); null: a whole card."""
    mig_enabled: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default="0")
    )
    """The card has MIG mode on: only its slices are placed, never the card itself."""

    @property
    def drained(self) -> bool:
        return self.drained_at is not None

    @property
    def fenced(self) -> bool:
        return self.fence_code is not None

    @property
    def state(self) -> str:
        return gpu_state(fenced=self.fenced, drained=self.drained)


def gpu_state(*, fenced: bool, drained: bool) -> str:
    """A GPU's state: ``unhealthy`` (fenced, whether drained or not), ``drained`` or ``ok``."""
    return "unhealthy" if fenced else "drained" if drained else "ok"


class Job(SQLModel, table=True):
    """A queued, running or finished job and everything needed to launch it again."""

    # AUTOINCREMENT: a job id names the job's directory on its host (``<ns>/<id>``), so
    # an id must never be handed out twice, even after the newest job row is deleted.
    __table_args__ = (
        Index("ix_job_state", "state"),
        Index(
            "ix_job_array",
            "array_id",
            "state",
            sqlite_where=text("array_id IS NOT NULL"),
            postgresql_where=text("array_id IS NOT NULL"),
        ),
        Index(
            "ix_job_ended",
            "ended_at",
            sqlite_where=text("ended_at IS NOT NULL"),
            postgresql_where=text("ended_at IS NOT NULL"),
        ),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    uid: int
    user: str = Field(max_length=64)
    group: str = Field(default="", max_length=64)
    name: str = Field(default="", max_length=128)
    argv: str = Field(sa_column=Column(Text, nullable=False))
    """JSON list of strings."""
    cwd: str | None = Field(default=None, max_length=4096)
    env: str = Field(default="{}", sa_column=_json("{}"))
    """JSON object of extra environment variables."""
    gpus: int
    pool: str | None = Field(default=None, max_length=64)
    host_constraint: str | None = Field(default=None, max_length=128)
    priority: str = Field(default="normal", max_length=32)
    preemptible: bool = False
    time_limit_s: float | None = None
    booking_id: int | None = None
    """``--booking ID``: it runs only on that booking's cards, while it is on."""
    submitted_at: float
    started_at: float | None = None
    ended_at: float | None = None
    state: str = Field(default="queued", max_length=16)
    reason: str = Field(default="", max_length=512)
    exit_code: int | None = None
    exit_signal: str | None = Field(default=None, max_length=16)
    requeues: int = 0
    host: str | None = Field(default=None, max_length=128)
    """The host it runs (or last ran) on."""
    gpu_uuids: str = Field(default="[]", sa_column=_json("[]"))
    """JSON list: the GPUs of its current (or last) run."""
    log_path: str | None = Field(default=None, max_length=4096)
    run_as: str | None = Field(default=None, max_length=64)
    """The Unix user its processes run as on the host."""
    launches: int = 0
    """How many times a launch was sent for it (a run is keyed by job id and launch)."""
    stop_deadline: float | None = None
    """When a job being killed or preempted gets SIGKILL if it is still there."""
    stop_kind: str | None = Field(default=None, max_length=16)
    pid: int | None = None
    project: str | None = Field(default=None, max_length=64)
    after: str = Field(default="[]", sa_column=_json("[]"))
    """JSON list of job ids this job starts after (``--after`` / ``--after-ok``)."""
    after_ok: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default="0")
    )
    """Start only once every job in ``after`` completed successfully; cancelled if one did not."""
    over_quota: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default="0")
    )
    """Its current run started over its group's quota: any within-quota work preempts it."""
    idle_since: float | None = None
    """Since when all its GPUs show 0% use (null: busy, or not running)."""
    idle_told: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default="0")
    )
    """Its owner was told it is idle (once a run)."""
    preempted_by: str | None = Field(default=None, max_length=512)
    """Why its last run was preempted ("preempted for job N (class, user)")."""
    preempted_at: float | None = None
    """When its last run was preempted."""
    alloc_gpu_s: float = Field(
        default=0.0, sa_column=Column(Float, nullable=False, server_default="0")
    )
    """GPU-seconds allocated over all its runs (added as each run's allocations end)."""
    busy_gpu_s: float | None = Field(
        default=0.0, sa_column=Column(Float, nullable=True, server_default="0")
    )
    """GPU-seconds its GPUs were busy while allocated to it, from the meter's samples
    (null: it ran before the head kept this, so it is not known)."""
    energy_j: float | None = Field(
        default=0.0, sa_column=Column(Float, nullable=True, server_default="0")
    )
    """Joules its GPUs drew while allocated to it, from the meter's samples (null as
    ``busy_gpu_s``)."""
    conda: str | None = Field(default=None, max_length=4096)
    """The conda environment (name or prefix) activated for its command."""
    venv: str | None = Field(default=None, max_length=4096)
    """The virtual environment (path) activated for its command."""
    image: str | None = Field(default=None, max_length=512)
    """The container image its command runs in."""
    runtime: str | None = Field(default=None, max_length=16)
    """The container runtime (docker, podman, apptainer) when ``image`` is set."""
    container_id: str | None = Field(default=None, max_length=64)
    """Its (latest) run's container, as its host read it (12 hex): the processes on
    its GPUs in that container are its own, whatever uid they show."""
    array_id: int | None = None
    """The array it is a task of: the id of the array's first task (Slurm's
    ``ARRAY_JOB_ID``; null: not in an array)."""
    array_task: int | None = None
    """Its task id in the array (``--array``'s numbers)."""
    array_throttle: int | None = None
    """At most this many tasks of its array hold GPUs at once (``%N``; null: no limit)."""
    script_id: int | None = None
    """The script copied at submit (``job_script``); argv[0] names it, argv[1:] are its
    arguments (null: argv is the command)."""
    output: str | None = Field(default=None, max_length=4096)
    """``--output``'s pattern (``%j``, ``%A``, ``%a``): where its output goes on the host."""

    mig: str | None = Field(default=None, max_length=32)
    """The MIG slice profile it asked for (``--mig 1g.10gb``): its GPUs are slices of
    that profile; null: whole cards."""

    interactive: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default="0")
    )
    """Runs on a terminal its supervisor keeps (``run --pty``), to ``gputui attach`` to."""


class JobScript(SQLModel, table=True):
    """A submit script as it was at submit (one row for all the tasks of an array)."""

    __tablename__ = "job_script"

    id: int | None = Field(default=None, primary_key=True)
    text: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float


class Claim(SQLModel, table=True):
    """GPUs held by a person (or a ``gputui run`` session) rather than by a job."""

    __table_args__ = (Index("ix_claim_state", "state"),)

    id: int | None = Field(default=None, primary_key=True)
    uid: int
    user: str = Field(max_length=64)
    group: str = Field(default="", max_length=64)
    gpus: int
    """How many GPUs were asked for."""
    wanted: str = Field(default="[]", sa_column=_json("[]"))
    """JSON list of GPU uuids asked for by name (empty: any ``gpus`` free ones)."""
    pool: str | None = Field(default=None, max_length=64)
    model: str | None = Field(default=None, max_length=128)
    host_constraint: str | None = Field(default=None, max_length=128)
    note: str = Field(default="", max_length=512)
    state: str = Field(default="waiting", max_length=16)
    """waiting, active, released, expired."""
    reason: str = Field(default="", max_length=512)
    created_at: float
    granted_at: float | None = None
    expires_at: float | None = None
    """Released at this time whatever happens (``--for``); null: no maximum."""
    max_duration_s: float | None = None
    idle_release_s: float = 1800.0
    last_active_at: float | None = None
    released_at: float | None = None
    release_reason: str | None = Field(default=None, max_length=512)
    session: str | None = Field(default=None, max_length=64)
    """For ``gputui run``: released when that connection to the head goes away."""
    warned_at: float | None = None
    """When its holder was told it is about to be released (null: not yet; cleared
    when it is in use again)."""
    host: str | None = Field(default=None, max_length=128)
    gpu_uuids: str = Field(default="[]", sa_column=_json("[]"))
    project: str | None = Field(default=None, max_length=64)
    mig: str | None = Field(default=None, max_length=32)
    """The MIG slice profile it asked for; null: whole cards."""
    booking_id: int | None = None
    """The booking this claim was made for, at its start."""


class Booking(SQLModel, table=True):
    """Named cards held ahead for a window (``gputui book``): a reservation the pass
    honours, a claim of the booker's from its start, or (``maint``) a drain."""

    __table_args__ = (Index("ix_booking_end", "end_at"),)

    id: int | None = Field(default=None, primary_key=True)
    uid: int
    user: str = Field(max_length=64)
    group: str = Field(default="", max_length=64)
    host: str = Field(max_length=128)
    gpu_uuids: str = Field(default="[]", sa_column=_json("[]"))
    """JSON list of the booked cards' uuids (all on ``host``)."""
    pool: str | None = Field(default=None, max_length=64)
    start_at: float
    end_at: float
    note: str = Field(default="", max_length=512)
    maint: bool = False
    state: str = Field(default="booked", max_length=16)
    """booked, active, done, cancelled, released."""
    created_at: float
    claim_id: int | None = None
    """The claim made for it at its start."""
    ended_at: float | None = None
    end_reason: str | None = Field(default=None, max_length=512)


class Allocation(SQLModel, table=True):
    """One GPU given to one job or claim from ``start_at`` until ``end_at``."""

    __table_args__ = (
        Index(
            "ux_allocation_live_gpu",
            "gpu_uuid",
            unique=True,
            sqlite_where=text("end_at IS NULL"),
            postgresql_where=text("end_at IS NULL"),
        ),
        Index("ix_allocation_job", "job_id"),
        Index("ix_allocation_claim", "claim_id"),
        Index("ix_allocation_end", "end_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    gpu_uuid: str = Field(max_length=96)
    host: str = Field(max_length=128)
    job_id: int | None = Field(default=None, foreign_key="job.id")
    claim_id: int | None = Field(default=None, foreign_key="claim.id")
    start_at: float
    end_at: float | None = None


class Usage(SQLModel, table=True):
    """GPU use by hour (epoch seconds of the hour's start, UTC), user, group, project
    and pool: GPU-seconds allocated (written when an allocation ends, split by hour),
    GPU-seconds busy and energy (from the samples, while allocated)."""

    hour: int = Field(primary_key=True)
    user: str = Field(primary_key=True, max_length=64)
    group: str = Field(primary_key=True, max_length=64)
    project: str = Field(primary_key=True, max_length=64)
    """Empty when the work named none."""
    pool: str = Field(primary_key=True, max_length=64)
    alloc_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0
    energy_j: float = 0.0


class IdleHeld(SQLModel, table=True):
    """Held but idle (``power.mode``): GPU-seconds and energy of cards held by a job or
    a claim whose utilisation read 0 past ``power.idle_minutes``, by the ``Usage`` key
    (a part of that row's time and energy)."""

    hour: int = Field(primary_key=True)
    user: str = Field(primary_key=True, max_length=64)
    group: str = Field(primary_key=True, max_length=64)
    project: str = Field(primary_key=True, max_length=64)
    pool: str = Field(primary_key=True, max_length=64)
    idle_gpu_s: float = 0.0
    energy_j: float = 0.0


class ClusterHour(SQLModel, table=True):
    """The whole cluster by hour: GPU-seconds present, allocated and busy (allocated or
    not), energy: what the utilisation-by-hour chart shows."""

    hour: int = Field(primary_key=True)
    gpu_s: float = 0.0
    alloc_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0
    energy_j: float = 0.0


class SlurmEnergy(SQLModel, table=True):
    """In front of Slurm (a relaying head): each Slurm job's GPU use by hour, from the
    samples of the hosts the head watches: GPU-seconds held (a per-node share counted
    by its share), busy, and energy. ``per_node``: some of it was a share of a node's
    GPUs (Slurm gave the job no GPU indexes there). Slurm's own accounting (``sacct``)
    has the allocations; this is what they drew."""

    __tablename__ = "slurm_energy"

    hour: int = Field(primary_key=True)
    job: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    """Slurm's job id (an array element's own, as ``sacct``'s JobIDRaw)."""
    user: str = Field(max_length=64)
    partition: str = Field(max_length=64)
    held_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0
    energy_j: float = 0.0
    per_node: bool = False


class Audit(SQLModel, table=True):
    """An admin action (or a refused one), written in the same transaction as the change."""

    id: int | None = Field(default=None, primary_key=True)
    time: float = Field(index=True)
    uid: int
    user: str = Field(max_length=64)
    action: str = Field(max_length=32)
    target: str = Field(max_length=128)
    owner: str = Field(default="", max_length=64)
    """Whose job, claim or process it acted on (a force-free's: each of them, comma-
    separated, ``owners_text``): they see the row too (``owned_by``)."""
    reason: str = Field(default="", max_length=512)
    outcome: str = Field(default="ok", max_length=256)


def owners_text(users: Iterable[str]) -> str:
    """``Audit.owner`` for an act on several users' work: each once, as many as fit."""
    kept: list[str] = []
    for user in dict.fromkeys(u for u in users if u and "," not in u):
        if len(",".join([*kept, user])) > 64:
            break
        kept.append(user)
    return ",".join(kept)


def owned_by(owner: str, user: str) -> bool:
    """Whether an audit row's ``owner`` names ``user``."""
    return bool(user) and user in owner.split(",")


class RequestLog(SQLModel, table=True):
    """A mutating request's first answer, so a retry by request id is applied once.

    Append-only, keyed by ``seq`` alone: the ids are indexed in memory
    (``requestlog.RequestIndex``), not on disk, where random ids would put each new row
    on an index leaf of its own."""

    seq: int | None = Field(default=None, primary_key=True)
    uid: int
    request_id: str = Field(max_length=64)
    time: float
    result: str = Field(sa_column=Column(Text, nullable=False))
    """The JSON response body that was sent the first time."""


MAX_NOTICE_WORDS = 4096
"""A notice's template and args, as JSON, at most this long (else not kept)."""


class Notice(SQLModel, table=True):
    """Something a user should be told (job started/ended/preempted, claim expired,
    an admin's drain or fence of what they hold): kept until read, delivered on
    the user's next connection (``gputui notices``, the console)."""

    __table_args__ = (Index("ix_notice_unread", "uid", "read_at"),)

    id: int | None = Field(default=None, primary_key=True)
    uid: int = Field(index=True)
    time: float
    kind: str = Field(max_length=32)
    text: str = Field(max_length=512)
    job_id: int | None = None
    claim_id: int | None = None
    read_at: float | None = None
    """When its user was shown it (null: unread)."""
    words: str | None = Field(default=None, max_length=MAX_NOTICE_WORDS)
    """The English template and args ``text`` was made from, as JSON (``gputui.wire.
    words``): a client shows them in its user's language. Null: a plain line."""

    @classmethod
    def of(
        cls,
        *,
        uid: int,
        time: float,
        kind: str,
        text: str | Words,
        job_id: int | None = None,
        claim_id: int | None = None,
    ) -> Notice:
        """A notice of ``text``: a line, or the ``Words`` it is made from (kept too,
        unless they would not fit)."""
        words = None
        if isinstance(text, Words):
            words = json.dumps(text.wire(), ensure_ascii=False, separators=(",", ":"))
            if len(words) > MAX_NOTICE_WORDS:
                words = None
            text = text.english()
        return cls(
            uid=uid, time=time, kind=kind, text=text[:512], job_id=job_id, claim_id=claim_id,
            words=words,
        )  # fmt: skip


class HealthTrack(SQLModel, table=True):
    """A health problem's track (the head's board): first and last seen, how many
    times it came, whether it shows now; kept so a restart keeps them."""

    key: str = Field(primary_key=True, max_length=256)
    host: str = Field(max_length=64)
    gpu: int | None = None
    code: str = Field(max_length=64)
    first_seen: float
    last_seen: float = Field(index=True)
    count: int
    active: bool
    outside: bool = False
    """The head's own finding (a fence, a flagged process, an idle job or claim)."""


class HealthAck(SQLModel, table=True):
    """An admin's acknowledgement of a health problem, held while it is unchanged
    (``fingerprint``: its severity, figures and count then, as JSON)."""

    key: str = Field(primary_key=True, max_length=256)
    by_uid: int
    by_user: str = Field(max_length=64)
    note: str = Field(max_length=512)
    at: float
    fingerprint: str = Field(sa_column=Column(Text, nullable=False))


class GpuReading(SQLModel, table=True):
    """One GPU's reading, about a minute apart (``gputui incident``); ``id`` is the
    head's own sequence number, in the order it took them. Integers where it can:
    power in milliwatts, the throttle reasons joined by ``+`` (empty: none)."""

    __tablename__ = "reading"
    __table_args__ = (
        Index("ix_reading_host", "host", "time", "gpu"),
        Index("ix_reading_time", "time"),
    )

    id: int = Field(primary_key=True)
    host: str = Field(max_length=128)
    gpu: int
    uuid: str = Field(max_length=96)
    time: float
    state: str = Field(max_length=16)
    util: int | None = None
    mem_mib: int | None = None
    temp_c: int | None = None
    power_mw: int | None = None
    throttle: str = Field(default="", max_length=256)
    ecc_uncorrected: int | None = None


class HeadLease(SQLModel, table=True):
    """Which head leads, on a database two heads share (PostgreSQL; ``store.lease``):
    one row. ``epoch`` only grows, one step each time a head takes the lease: it is
    the fencing token every write of the leader checks. ``expires`` is judged by
    the database server's clock (epoch seconds), so no machine's clock matters."""

    __tablename__ = "head_lease"

    id: int = Field(primary_key=True)
    epoch: int = Field(sa_column=Column(BigInteger, nullable=False, server_default="0"))
    holder: str = Field(sa_column=Column(Text, nullable=False))
    """The head that took it last (``host:pid:pidns:token``: ``leader.holder_name``)."""
    expires: float = Field(sa_column=Column(Float, nullable=False, server_default="0"))


ALL_TABLES = (
    Meta,
    Host,
    Gpu,
    Job,
    Claim,
    Allocation,
    Usage,
    ClusterHour,
    SlurmEnergy,
    Audit,
    RequestLog,
    Notice,
    HealthTrack,
    HealthAck,
    GpuReading,
    HeadLease,
)


class NotifyChannel(SQLModel, table=True):
    """Where a user's notices are also sent (``gputui notify set``), or a team's
    (hosts.yaml ``notify: channels``, ``uid`` = ``TEAM_UID``). The URL and secret
    are the channel's credentials: kept here, in the head's own database, and never
    sent back (``shown`` is the URL with its tokens masked)."""

    __tablename__ = "notify_channel"
    __table_args__ = (Index("ix_notify_channel_owner", "uid", "name", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    uid: int
    name: str = Field(max_length=32)
    kind: str = Field(max_length=16)
    """``apprise``, ``feishu`` or ``dingtalk`` (ours: signed)."""
    url: str = Field(max_length=2048)
    secret: str | None = Field(default=None, max_length=256)
    shown: str = Field(max_length=2048)
    events: str = Field(max_length=256)
    """Comma-separated event names (``config.notify.EVENTS``)."""
    grp: str | None = Field(default=None, max_length=64)
    """A team channel's Unix group (None: everyone)."""
    created_at: float
    """Notices from then on are sent to it."""


TEAM_UID = -1
"""``NotifyChannel.uid`` of a team channel (from hosts.yaml)."""


class NotifySent(SQLModel, table=True):
    """One notice's delivery to one channel, once settled: ``sent``, ``failed`` (given
    up after its tries; audited) or ``dropped`` (the queue was full; audited). A
    notice with no row for a channel is still to be sent (after a restart too)."""

    __tablename__ = "notify_sent"

    notice_id: int = Field(primary_key=True)
    channel_id: int = Field(primary_key=True)
    state: str = Field(max_length=16)
    tries: int = 0
    at: float
    error: str = Field(default="", max_length=256)
