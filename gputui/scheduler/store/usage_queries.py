"""``SqlUsage``: accounting's rows in SQLite, the ``usage`` part of ``SqlTx``.

Upserts that add to a row, straight on the transaction's cursor like the submission
path (``usage.x + excluded.x`` is the same in SQLite and PostgreSQL); the arithmetic
is ``policy.accounting``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputui.scheduler.policy.accounting import (
    ClusterRow,
    IdleRow,
    OpenAllocation,
    OpenHolder,
    UsageKey,
    UsageRow,
    charged_seconds,
    charges,
)
from gputui.scheduler.policy.slurm_meter import SlurmRow
from gputui.scheduler.store.api import AllocSpan
from gputui.scheduler.store.txconn import TxConn

_WHO = """a.gpu_uuid, a.start_at, COALESCE(j."user", c."user", ''),
    COALESCE(j."group", c."group", ''), COALESCE(j.project, c.project, ''),
    COALESCE(g.pool, h.pool, 'default')"""
_LIVE = """ FROM allocation a LEFT JOIN job j ON j.id = a.job_id
    LEFT JOIN claim c ON c.id = a.claim_id LEFT JOIN gpu g ON g.uuid = a.gpu_uuid
    LEFT JOIN host h ON h.name = a.host WHERE a.end_at IS NULL"""
HOLDER = f"SELECT {_WHO}{_LIVE}"
HOLDER_JOB = f"SELECT {_WHO}, a.job_id{_LIVE}"
ADD_JOB_ALLOC = "UPDATE job SET alloc_gpu_s = alloc_gpu_s + ? WHERE id = ?"
ADD_JOB_METERED = "UPDATE job SET busy_gpu_s = busy_gpu_s + ?, energy_j = energy_j + ? WHERE id = ?"
"""(A job metered before it kept these holds NULL there, and keeps it: unknown.)"""
FINISHED_COLUMNS = (
    "id", "uid", '"user"', '"group"', "name", "state", "reason", "exit_code",
    "exit_signal", "gpus", "pool", "host", "project", "submitted_at", "started_at",
    "ended_at", "requeues", "preempted_at", "alloc_gpu_s", "busy_gpu_s", "energy_j",
)  # fmt: skip
"""What ``finished`` reads of a job (``gputui history``'s row)."""
ADD_USAGE = """INSERT INTO usage (hour, "user", "group", project, pool,
    alloc_gpu_s, busy_gpu_s, energy_j) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (hour, "user", "group", project, pool) DO UPDATE SET
    alloc_gpu_s = usage.alloc_gpu_s + excluded.alloc_gpu_s,
    busy_gpu_s = usage.busy_gpu_s + excluded.busy_gpu_s,
    energy_j = usage.energy_j + excluded.energy_j"""
ADD_CLUSTER = """INSERT INTO clusterhour (hour, gpu_s, alloc_gpu_s, busy_gpu_s, energy_j)
    VALUES (?, ?, ?, ?, ?) ON CONFLICT (hour) DO UPDATE SET
    gpu_s = clusterhour.gpu_s + excluded.gpu_s,
    alloc_gpu_s = clusterhour.alloc_gpu_s + excluded.alloc_gpu_s,
    busy_gpu_s = clusterhour.busy_gpu_s + excluded.busy_gpu_s,
    energy_j = clusterhour.energy_j + excluded.energy_j"""

ADD_IDLE = """INSERT INTO idleheld (hour, "user", "group", project, pool, idle_gpu_s, energy_j)
    VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hour, "user", "group", project, pool) DO UPDATE SET
    idle_gpu_s = idleheld.idle_gpu_s + excluded.idle_gpu_s,
    energy_j = idleheld.energy_j + excluded.energy_j"""

ADD_SLURM = """INSERT INTO slurm_energy (hour, job, "user", partition, held_gpu_s, busy_gpu_s,
    energy_j, per_node) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (hour, job) DO UPDATE SET
    held_gpu_s = slurm_energy.held_gpu_s + excluded.held_gpu_s,
    busy_gpu_s = slurm_energy.busy_gpu_s + excluded.busy_gpu_s,
    energy_j = slurm_energy.energy_j + excluded.energy_j,
    per_node = (slurm_energy.per_node OR excluded.per_node)"""


class SqlUsage:
    """The ``Usage`` part of a SQLite transaction."""

    __slots__ = ("_conn",)

    def __init__(self, conn: TxConn) -> None:
        self._conn = conn

    def open_allocations(self) -> list[OpenAllocation]:
        self._conn.s.flush()
        cursor = self._conn.cursor()
        cursor.execute(HOLDER)
        return [(str(u), float(t), str(a), str(b), str(c), str(d)) for u, t, a, b, c, d in cursor]

    def open_holders(self) -> list[OpenHolder]:
        self._conn.s.flush()
        cursor = self._conn.cursor()
        cursor.execute(HOLDER_JOB)
        return [
            (str(u), float(t), str(a), str(b), str(c), str(d), None if j is None else int(j))
            for u, t, a, b, c, d, j in cursor
        ]

    def charge(self, now: float, *, job_id: int | None, claim_id: int | None) -> list[str]:
        """Charge the allocated GPU-seconds of a job's or a claim's live allocations,
        about to end at ``now``, split by hour (and a job's, the same seconds, to the
        job's own ``alloc_gpu_s``); their GPUs' uuids."""
        self._conn.s.flush()
        cursor = self._conn.cursor()
        which = "a.job_id" if job_id is not None else "a.claim_id"
        cursor.execute(f"{HOLDER} AND {which} = ?", (job_id if job_id is not None else claim_id,))
        rows = cursor.fetchall()
        usage, cluster = charges(rows, now)
        if usage:
            cursor.executemany(ADD_USAGE, [(*k, s, 0.0, 0.0) for k, s in usage.items()])
            cursor.executemany(ADD_CLUSTER, [(h, 0.0, s, 0.0, 0.0) for h, s in cluster])
            if job_id is not None:
                cursor.execute(ADD_JOB_ALLOC, (charged_seconds(usage), job_id))
        return [str(row[0]) for row in rows]

    def add_metered(
        self,
        usage: Sequence[tuple[UsageKey, float, float]],
        cluster: Sequence[tuple[int, float, float, float]],
        jobs: Sequence[tuple[int, float, float]] = (),
        idle: Sequence[tuple[UsageKey, float, float]] = (),
    ) -> None:
        cursor = self._conn.cursor()
        if idle:
            cursor.executemany(ADD_IDLE, [(*k, s, e) for k, s, e in idle])
        if usage:
            cursor.executemany(ADD_USAGE, [(*k, 0.0, b, e) for k, b, e in usage])
        if cluster:
            cursor.executemany(ADD_CLUSTER, [(h, p, 0.0, b, e) for h, p, b, e in cluster])
        if jobs:
            cursor.executemany(ADD_JOB_METERED, [(b, e, j) for j, b, e in jobs])

    def add_slurm_energy(self, rows: Sequence[SlurmRow]) -> None:
        if rows:
            self._conn.cursor().executemany(ADD_SLURM, [tuple(r) for r in rows])

    def slurm_energy(self, since: float, until: float) -> list[SlurmRow]:
        """Slurm's jobs' rows of the hours starting in ``[since, until)``."""
        cursor = self._conn.cursor()
        cursor.execute(
            'SELECT hour, job, "user", partition, held_gpu_s, busy_gpu_s, energy_j, per_node'
            " FROM slurm_energy WHERE hour >= ? AND hour < ?",
            (since, until),
        )
        return [
            (int(h), int(j), str(u), str(p), float(a), float(b), float(e), bool(n))
            for h, j, u, p, a, b, e, n in cursor
        ]

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
        """The newest ``limit`` jobs in ``states`` that ended in ``[since, until)``,
        newest first: a range scan of ``ix_job_ended``."""
        where = ["ended_at IS NOT NULL", "ended_at >= ?", "ended_at < ?"]
        params: list[Any] = [since, until]
        where.append(f"state IN ({', '.join('?' * len(states))})")
        params += list(states)
        if user is not None:
            where.append('"user" = ?')
            params.append(user)
        if uid is not None:
            where.append("uid = ?")
            params.append(uid)
        cursor = self._conn.cursor()
        cursor.execute(
            f"SELECT {', '.join(FINISHED_COLUMNS)} FROM job WHERE {' AND '.join(where)}"  # noqa: S608 (only ? marks)
            " ORDER BY ended_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        names = [c.strip('"') for c in FINISHED_COLUMNS]
        return [dict(zip(names, row, strict=True)) for row in cursor]

    def hours(self, since: float, until: float) -> list[UsageRow]:
        """The primary key starts with the hour: a range scan of its index."""
        cursor = self._conn.cursor()
        cursor.execute(
            'SELECT hour, "user", "group", project, pool, alloc_gpu_s, busy_gpu_s, energy_j'
            " FROM usage WHERE hour >= ? AND hour < ?",
            (since, until),
        )
        return [
            (int(h), str(u), str(g), str(p), str(o), float(a), float(b), float(e))
            for h, u, g, p, o, a, b, e in cursor
        ]

    def idle_hours(self, since: float, until: float) -> list[IdleRow]:
        cursor = self._conn.cursor()
        cursor.execute(
            'SELECT hour, "user", "group", project, pool, idle_gpu_s, energy_j'
            " FROM idleheld WHERE hour >= ? AND hour < ?",
            (since, until),
        )
        return [
            (int(h), str(u), str(g), str(p), str(o), float(s), float(e))
            for h, u, g, p, o, s, e in cursor
        ]

    def cluster_hours(self, since: float, until: float) -> list[ClusterRow]:
        cursor = self._conn.cursor()
        cursor.execute(
            "SELECT hour, gpu_s, alloc_gpu_s, busy_gpu_s, energy_j FROM clusterhour"
            " WHERE hour >= ? AND hour < ? ORDER BY hour",
            (since, until),
        )
        return [(int(h), float(p), float(a), float(b), float(e)) for h, p, a, b, e in cursor]

    def spans(self, since: float) -> list[AllocSpan]:
        """One indexed range scan."""
        cursor = self._conn.cursor()
        cursor.execute(
            "SELECT COALESCE(j.\"group\", c.\"group\", ''), COALESCE(j.user, c.user, ''),"
            " COALESCE(g.pool, h.pool, 'default'), a.start_at, a.end_at"
            " FROM allocation a"
            " LEFT JOIN job j ON j.id = a.job_id"
            " LEFT JOIN claim c ON c.id = a.claim_id"
            " LEFT JOIN gpu g ON g.uuid = a.gpu_uuid"
            " LEFT JOIN host h ON h.name = a.host"
            " WHERE a.end_at IS NULL OR a.end_at > ?",
            (since,),
        )
        return [(str(r[0]), str(r[1]), str(r[2]), float(r[3]), r[4]) for r in cursor.fetchall()]
