"""The store's interface: what the head asks of its database, and nothing of how.

``Store`` is the database as a whole (a write transaction, a read snapshot, the jobs
namespace, close); ``Tx`` is one open transaction's operations. ``SqlStore``
(``store.sqlstore``) implements them on SQLite and on PostgreSQL alike (what differs
is the engine's: ``engine``, ``pgengine``); the head, its watchers and its readers
see only these types.

The contract every implementation keeps:

- ``transaction()`` is one durable, serializable write: committed when its block
  ends, rolled back when the block raises. ``savepoint()`` inside it undoes only its
  own block when that block raises (one refused request never undoes the others).
- ``snapshot()`` is a consistent read that never blocks the writer, nor waits for
  it, usable from another thread; nothing read there is ever committed.
- Rows come back as the ``tables`` models. A row read in a transaction is live in it:
  what the caller sets on it is written at ``flush()`` or at commit. No row outlives
  its transaction (each is expired as it ends): copy values out, never keep the row.
- A failure of the database (a full disk, a lock held too long, a broken constraint)
  raises ``StoreFailure``; a database that cannot be used at all (opening it,
  checking it, upgrading its schema) raises ``StoreError``, one line for the user.
- The parts (``usage``, ``health``, ``readings``) run in the same transaction.
- ``changes()`` tells of the rows a console is shown that another process committed
  (the head tells its own commits to its subscribers itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypedDict

from sqlalchemy.exc import SQLAlchemyError

from gputui.scheduler.policy.accounting import (
    ClusterRow,
    IdleRow,
    OpenAllocation,
    OpenHolder,
    UsageKey,
    UsageRow,
)
from gputui.scheduler.policy.slurm_meter import SlurmRow
from gputui.scheduler.store.changes import ChangeFeed
from gputui.scheduler.store.tables import (
    Allocation,
    Audit,
    Booking,
    Claim,
    Gpu,
    HealthAck,
    HealthTrack,
    Host,
    Job,
    Notice,
    NotifyChannel,
    NotifySent,
)


class StoreError(Exception):
    """The database cannot be used at all (opened, checked, upgraded, backed up);
    ``str()`` is one line naming the database and what to do."""


StoreFailure = SQLAlchemyError
"""What a store's operation raises when the database fails. Every store is built on
SQLAlchemy, whose errors are the same whatever the database behind it."""

SNAPSHOT = "gputui_snapshot"
"""Execution option of a store's read-only engine view: its transactions are a
snapshot that never waits for the writer (SQLite: a deferred ``BEGIN`` in WAL mode
instead of ``BEGIN IMMEDIATE``; PostgreSQL: ``REPEATABLE READ, READ ONLY`` without
the writer's lock)."""

ReadingRow = tuple[
    int, str, int, str, float, str, int | None, int | None, int | None, int | None, str, int | None
]
"""A stored reading: (seq, host, gpu index, uuid, time, state, util, mem MiB, temp C,
power mW, throttle, ECC uncorrected)."""


class TrackRow(TypedDict):
    """A health track to store (``HealthRows.put``): ``HealthTrack``'s columns as plain
    values. The head writes hundreds a tick at a thousand hosts, and a table model
    costs tens of microseconds to make, a dict well under one."""

    key: str
    host: str
    gpu: int | None
    code: str
    first_seen: float
    last_seen: float
    count: int
    active: bool
    outside: bool


AllocSpan = tuple[str, str, str, float, float | None]
"""(group, user, pool, start, end or None while open) of an allocation."""


class Usage(Protocol):
    """Accounting's rows: what is charged, by UTC hour (the arithmetic is in
    ``policy.accounting``)."""

    def open_allocations(self) -> list[OpenAllocation]:
        """Every live allocation with whom it is charged to (pending changes first
        flushed): (GPU uuid, start, user, group, project or "", pool of the GPU, else
        of its host, else "default")."""
        ...

    def open_holders(self) -> list[OpenHolder]:
        """``open_allocations``, each with the job it is allocated to (None: a claim)."""
        ...

    def add_metered(
        self,
        usage: Sequence[tuple[UsageKey, float, float]],
        cluster: Sequence[tuple[int, float, float, float]],
        jobs: Sequence[tuple[int, float, float]] = (),
        idle: Sequence[tuple[UsageKey, float, float]] = (),
    ) -> None:
        """Add the meter's busy seconds and joules (by usage key, and by hour: present
        seconds, busy seconds, joules; by job id: busy seconds, joules; held but idle
        by usage key: seconds, joules) to what is stored."""
        ...

    def idle_hours(self, since: float, until: float) -> list[IdleRow]:
        """The stored held-but-idle rows of the hours starting in ``[since, until)``."""
        ...

    def add_slurm_energy(self, rows: Sequence[SlurmRow]) -> None:
        """Add the Slurm meter's rows (hour, job, user, partition, held, busy, joules,
        per-node) to what is stored."""
        ...

    def slurm_energy(self, since: float, until: float) -> list[SlurmRow]:
        """The stored Slurm rows of the hours starting in ``[since, until)``."""
        ...

    def finished(
        self,
        states: Sequence[str],
        since: float,
        until: float,
        limit: int,
        *,
        user: str | None = None,
        uid: int | None = None,
    ) -> list[dict[str, Any]]:
        """The newest ``limit`` jobs in ``states`` that ended in ``[since, until)``
        (of ``user``, of ``uid``, when given), newest first: their columns by name, with
        ``alloc_gpu_s``, ``busy_gpu_s`` and ``energy_j``."""
        ...

    def hours(self, since: float, until: float) -> list[UsageRow]:
        """The stored usage of the hours starting in ``[since, until)``."""
        ...

    def cluster_hours(self, since: float, until: float) -> list[ClusterRow]:
        """The cluster's stored hours starting in ``[since, until)``, oldest first."""
        ...

    def spans(self, since: float) -> list[AllocSpan]:
        """Every allocation still open or ended after ``since``: what fair share and
        quotas count."""
        ...


class HealthRows(Protocol):
    """The head's health board as stored: its tracks and acknowledgements."""

    def rows(self) -> tuple[list[HealthTrack], list[HealthAck]]: ...

    def put(
        self, tracks: Iterable[TrackRow], acks: Iterable[HealthAck], gone: Sequence[str] = ()
    ) -> None:
        """Write these tracks and acks (new or changed); ``gone``: acks to drop."""
        ...

    def drop(self, tracks: Sequence[str], acks: Sequence[str]) -> None:
        """Delete the tracks and the acks of these keys."""
        ...


class Readings(Protocol):
    """The GPU readings kept for ``gputui incident``; every prune is bounded."""

    def seq(self) -> int:
        """The number of the newest reading stored (0: none yet)."""
        ...

    def add(self, rows: Sequence[ReadingRow], seq: int) -> None:
        """Store readings, and ``seq`` as the number of the newest."""
        ...

    def of_gpu(self, host: str, gpu: int, limit: int) -> list[ReadingRow]:
        """The newest ``limit`` readings of one GPU, oldest first."""
        ...

    def gpus(self) -> list[tuple[str, int, float, float]]:
        """(host, GPU index, oldest reading's time, newest's) of every GPU with readings."""
        ...

    def prune_host(self, host: str, keep: int, limit: int) -> int:
        """Delete up to ``limit`` of a host's readings beyond each GPU's newest ``keep``;
        how many went."""
        ...

    def prune_before(self, cutoff: float, limit: int) -> int:
        """Delete up to ``limit`` readings older than ``cutoff``, oldest first; how many."""
        ...


class NotifyRows(Protocol):
    """The chat channels and the settled deliveries of notices to them."""

    def channels(self, uid: int | None = None) -> list[NotifyChannel]:
        """A user's channels (``TEAM_UID``: the team's), or every one, oldest first."""
        ...

    def put_channel(self, row: NotifyChannel) -> NotifyChannel:
        """Add the channel, or replace the one of its uid and name (keeping when it
        was first set)."""
        ...

    def drop_channels(self, uid: int, names: Sequence[str] | None = None) -> list[str]:
        """Remove the user's channels named (None: all) and their deliveries; the
        names removed."""
        ...

    def notices_since(self, since: float, after_id: int, limit: int) -> list[Notice]:
        """Every user's notices after ``after_id`` made at ``since`` or later, oldest
        first, at most ``limit``."""
        ...

    def settled(self, notice_ids: Sequence[int]) -> set[tuple[int, int]]:
        """(notice id, channel id) of each settled delivery of those notices."""
        ...

    def settle(self, rows: Sequence[NotifySent]) -> None:
        """Record deliveries as settled (sent, failed, dropped)."""
        ...

    def forget_settled(self, before: float) -> int:
        """Drop the records of deliveries settled before ``before``; how many."""
        ...


class Tx(Protocol):
    """One open transaction: every operation the head makes on its database."""

    moved: bool
    """An allocation was made or ended in this transaction."""
    ended: list[tuple[str, float]]
    """(GPU uuid, end) of each allocation this transaction ended (the meter charges no
    sample past it)."""

    @property
    def usage(self) -> Usage: ...
    @property
    def health(self) -> HealthRows: ...
    @property
    def readings(self) -> Readings: ...
    @property
    def notify(self) -> NotifyRows: ...

    def savepoint(self) -> AbstractContextManager[None]:
        """Run a block so that an exception undoes only that block."""
        ...

    def flush(self) -> None:
        """Write what was changed so far (still inside the transaction)."""
        ...

    # -- the request log and the submission path ------------------------------------

    def replay_many(self, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], dict[str, Any]]:
        """The answers these (uid, request id)s got the first time, for those that came
        before."""
        ...

    def remember_many(self, rows: Sequence[tuple[int, str, dict[str, Any]]], now: float) -> None:
        """Keep each request's answer under (uid, request id), for a retry to get it."""
        ...

    def forget_requests_before(self, cutoff: float) -> int: ...

    def insert_jobs(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert many jobs at once (the submission fast path: ``jobrow``'s columns,
        a missing one takes its default, an unknown one is a ``ValueError``); their ids,
        in order, each above every id before."""
        ...

    # -- hosts and GPUs ---------------------------------------------------------------

    def hosts(self) -> list[Host]: ...
    def host(self, name: str) -> Host | None: ...
    def put_host(self, host: Host) -> Host: ...
    def gpus(self) -> list[Gpu]: ...
    def gpu(self, uuid: str) -> Gpu | None: ...
    def put_gpu(self, gpu: Gpu) -> Gpu: ...
    def gpus_by_uuid(self, uuids: Sequence[str]) -> dict[str, Gpu]:
        """The stored rows of ``uuids`` (one query per 500; those not stored are left
        out), by uuid."""
        ...

    def add_gpus(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """GPUs not stored yet, inserted now in one statement: each a mapping of
        ``Gpu``'s columns (those left out take the table's defaults)."""
        ...

    # -- jobs and claims ---------------------------------------------------------------

    def job(self, job_id: int) -> Job | None: ...

    def jobs(
        self,
        states: Iterable[str] | None = None,
        user: str | None = None,
        limit: int = 10_000,
        after: int | None = None,
        arrays: bool = True,
    ) -> list[Job]:
        """The newest ``limit``, oldest first; with ``after``, a page: the first
        ``limit`` whose id is above it. ``arrays=False``: none in an array."""
        ...

    def jobs_by_id(self, ids: Sequence[int], states: Iterable[str]) -> list[Job]:
        """These jobs, those in ``states``, oldest first."""
        ...

    def job_counts(self, states: Iterable[str]) -> dict[tuple[str, str, str], int]:
        """(state, priority, reason) -> how many jobs, of every job in ``states``
        (counted by the database, however many there are)."""
        ...

    def set_job_reasons(self, reasons: Mapping[int, str]) -> None:
        """Set these jobs' reasons (rows not loaded in this transaction)."""
        ...

    def job_states(self, ids: Iterable[int]) -> dict[int, str]:
        """The state of each of these jobs that exists (an array's id: the whole
        array's, ended only once every task has, completed only if each did)."""
        ...

    def queued_line(self, free: int, hosts: int = 0) -> list[Job]:
        """The queued jobs not in an array, and the first queued tasks of each array:
        as many as ``free`` GPUs could take, one for each of ``hosts`` and one more;
        oldest first (``line.build``)."""
        ...

    def array_tasks(self, array_id: int, states: Iterable[str] | None = None) -> list[Job]:
        """An array's tasks (those in ``states``), by id."""
        ...

    def array_task(self, array_id: int, task: int) -> Job | None:
        """Task ``task`` of array ``array_id``."""
        ...

    def set_array_reason(self, array_id: int, reason: str) -> None:
        """Every waiting task of the array gets this reason (rows not read)."""
        ...

    def link_array(self, ids: Sequence[int]) -> None:
        """Make these just-inserted jobs one array, named by the first one's id."""
        ...

    def add_script(self, text: str, now: float) -> int:
        """Keep a submit script; its id."""
        ...

    def script_text(self, script_id: int) -> str | None: ...

    def jobs_on(self, host: str, states: Iterable[str]) -> list[Job]: ...
    def add_claim(self, claim: Claim) -> Claim: ...
    def claim(self, claim_id: int) -> Claim | None: ...

    def claims(
        self,
        states: Iterable[str] | None = None,
        user: str | None = None,
        limit: int = 10_000,
        after: int | None = None,
    ) -> list[Claim]:
        """As ``jobs``."""
        ...

    # -- bookings -----------------------------------------------------------------------

    def add_booking(self, booking: Booking) -> Booking: ...
    def booking(self, booking_id: int) -> Booking | None: ...

    def bookings(
        self, states: Iterable[str] | None = None, ending_after: float | None = None
    ) -> list[Booking]:
        """Bookings in ``states`` that end after ``ending_after``, by start then id."""
        ...

    # -- allocations ------------------------------------------------------------------

    def allocate(
        self,
        gpu_uuids: Sequence[str],
        host: str,
        now: float,
        *,
        job_id: int | None = None,
        claim_id: int | None = None,
    ) -> None:
        """Give the GPUs to one job or claim; a GPU already given is refused
        (``StoreFailure``), whatever the caller believed."""
        ...

    def free(self, now: float, *, job_id: int | None = None, claim_id: int | None = None) -> int:
        """End the live allocations of a job or claim, charging them; how many there were."""
        ...

    def live_allocations(self) -> list[Allocation]: ...

    def allocations_of(
        self, *, job_id: int | None = None, claim_id: int | None = None
    ) -> list[Allocation]: ...

    # -- audit and notices ------------------------------------------------------------

    def audit(self, row: Audit) -> None:
        """Keep an audit row, each text cut to its column (``caps``)."""
        ...

    def audit_row(self, audit_id: int) -> Audit | None: ...
    def audits(self, since: float | None, limit: int) -> list[Audit]: ...

    def notice(self, row: Notice) -> Notice:
        """Keep a notice for its user, each text cut to its column; numbered."""
        ...

    def notices_after(self, notice_id: int, uid: int | None = None) -> list[Notice]: ...

    def unread_notices(self, uid: int, limit: int) -> list[Notice]:
        """The user's notices not shown yet, oldest first."""
        ...

    def recent_notices(self, uid: int, limit: int) -> list[Notice]:
        """The user's newest ``limit`` notices, read or not, oldest first."""
        ...

    def mark_read(self, uid: int, ids: Sequence[int], now: float) -> None:
        """Mark the user's notices ``ids`` read (another user's are left alone)."""
        ...

    def last_notice_id(self) -> int: ...


class Store(Protocol):
    """The head's database: ``transaction()`` for every write, ``snapshot()`` to read."""

    def transaction(self) -> AbstractContextManager[Tx]:
        """One durable write transaction; rolled back when the block raises."""
        ...

    def batch(self) -> AbstractContextManager[Tx]:
        """``transaction()`` for the head's one writer, which may keep its connection
        from one batch to the next; never used from two threads or twice at once."""
        ...

    def snapshot(self) -> AbstractContextManager[Tx]:
        """A read-only, consistent view from any thread; nothing in it is committed."""
        ...

    def jobs_namespace(self) -> str:
        """The token this database's jobs use on hosts (keeps two heads' jobs apart)."""
        ...

    def changes(self) -> ChangeFeed:
        """What other processes commit to this database, as they commit (``changes``)."""
        ...

    def close(self) -> None: ...
