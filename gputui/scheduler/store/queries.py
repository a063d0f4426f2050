"""``SqlTx``: one transaction's operations, the ``Tx`` of ``store.api``, on SQLite
and on PostgreSQL (the fast paths' qmark SQL runs on both: ``TxConn``).

Every query the head makes, and nothing else of the head's logic. Its writes happen in
the head's one writer (on the event loop's thread); a snapshot's reads on any thread
(``SqlStore``). Each request inside a batch runs in its own savepoint, so one
refusal never undoes the others. Accounting's rows, the health board's and the
readings are its parts (``usage_queries``, ``health_queries``), on the same session
and cursor.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import func, insert, update
from sqlmodel import Session, col, select

from gputui.scheduler.policy.rows import FINAL_JOB_STATES
from gputui.scheduler.store.caps import capped
from gputui.scheduler.store.health_queries import SqlHealthRows, SqlReadings
from gputui.scheduler.store.jobrow import JOB_COLUMNS, JOB_DEFAULTS, JOB_NULLABLE, unknown_columns
from gputui.scheduler.store.notify_queries import SqlNotify
from gputui.scheduler.store.requestlog import RequestIndex
from gputui.scheduler.store.tables import (
    Allocation,
    Audit,
    Booking,
    Claim,
    Gpu,
    Host,
    Job,
    JobScript,
    Notice,
)
from gputui.scheduler.store.txconn import TxConn
from gputui.scheduler.store.usage_queries import SqlUsage

_JOB_KEYS = frozenset(JOB_COLUMNS) | {"id"}
"""The keys a fast-path row may have (``unknown_columns`` names any other)."""
_JOB_PER = max(1, 8192 // len(JOB_COLUMNS))
"""Rows per ``INSERT`` of the fast path: parameters well under SQLite's limit."""


@functools.lru_cache(maxsize=256)
def _job_insert(count: int, columns: tuple[str, ...]) -> str:
    """The fast path's ``INSERT`` of ``count`` rows into ``columns``, numbering them."""
    names = ", ".join(f'"{c}"' for c in columns)
    one = "(" + ", ".join("?" * len(columns)) + ")"
    return f"INSERT INTO job ({names}) VALUES {', '.join([one] * count)} RETURNING id"  # noqa: S608


class SqlTx:
    """One open SQLite transaction: the queries, bound to its session."""

    def __init__(self, session: Session, requests: RequestIndex) -> None:
        self.s = session
        self.requests = requests
        self.remembered: list[tuple[int, int]] = []
        """(``seq``, key) of each request answer this transaction logged: indexed
        once it has committed (``RequestIndex.publish``)."""
        self.at = 0.0
        """The time those answers were logged at."""
        conn = TxConn(session)
        self._cursor = conn.cursor
        self.usage = SqlUsage(conn)
        self.health = SqlHealthRows(session)
        self.readings = SqlReadings(conn)
        self.notify = SqlNotify(session)
        self.moved = False
        """An allocation was made or ended in this transaction."""
        self.ended: list[tuple[str, float]] = []
        """(GPU uuid, end) of each allocation this transaction ended (the meter
        charges no sample past it)."""

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Run a block so that an exception undoes only that block."""
        with self.s.begin_nested():
            yield

    def flush(self) -> None:
        self.s.flush()

    # -- the request log and the submission path ---------------------------------------
    # A batch at a time, straight on the DB-API cursor of this transaction's
    # connection (``TxConn``): plain SQL with qmark parameters.

    def replay_many(self, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], dict[str, Any]]:
        """The answers these (uid, request id)s got the first time, for those that came
        before: a probe each of the log's index in memory, one read for the hits."""
        return self.requests.replay_many(self._cursor(), keys)

    def remember_many(self, rows: Sequence[tuple[int, str, dict[str, Any]]], now: float) -> None:
        """Keep each request's answer under (uid, request id), for a retry to get it."""
        if rows:
            self.remembered += self.requests.append(self._cursor(), rows, now)
            self.at = now

    def insert_jobs(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert many jobs at once (the submission fast path); their ids, in order."""
        if not rows:
            return []
        for row in rows:
            if not row.keys() <= _JOB_KEYS:
                unknown = unknown_columns(row)
                if unknown:  # a key the fast path would drop without a word
                    raise ValueError(f"job row: no column {unknown[0]!r}")
        cursor = self._cursor()
        ids: list[int] = []
        for start in range(0, len(rows), _JOB_PER):
            # Each row's value, else its column's default; a row's "id" is not
            # written (the database numbers the row), nor a column NULL in every row.
            part = rows[start : start + _JOB_PER]
            chunk = [{**JOB_DEFAULTS, **row} for row in part]
            needed = {c for row in part for c, v in row.items() if v is not None}
            columns = tuple(c for c in JOB_COLUMNS if c not in JOB_NULLABLE or c in needed)
            take = operator.itemgetter(*columns)  # more than one: uid, user, argv, ...
            values = [value for row in chunk for value in take(row)]
            cursor.execute(_job_insert(len(chunk), columns), values)
            # One statement numbers its rows in order (ids above every existing one);
            # RETURNING's own order is not promised, so sort.
            ids.extend(sorted(int(r[0]) for r in cursor.fetchall()))
        return ids

    def forget_requests_before(self, cutoff: float) -> int:
        return self.requests.forget_before(self._cursor(), cutoff)

    # -- hosts and GPUs -------------------------------------------------------------

    def hosts(self) -> list[Host]:
        return list(self.s.exec(select(Host).order_by(col(Host.name))).all())

    def host(self, name: str) -> Host | None:
        return self.s.get(Host, name)

    def put_host(self, host: Host) -> Host:
        return self.s.merge(host)

    def gpus(self) -> list[Gpu]:
        return list(self.s.exec(select(Gpu).order_by(col(Gpu.host), col(Gpu.index))).all())

    def gpu(self, uuid: str) -> Gpu | None:
        return self.s.get(Gpu, uuid)

    def put_gpu(self, gpu: Gpu) -> Gpu:
        return self.s.merge(gpu)

    def gpus_by_uuid(self, uuids: Sequence[str]) -> dict[str, Gpu]:
        out: dict[str, Gpu] = {}
        for start in range(0, len(uuids), 500):
            chunk = uuids[start : start + 500]
            found = self.s.exec(select(Gpu).where(col(Gpu.uuid).in_(chunk)))
            out.update((g.uuid, g) for g in found)
        return out

    def add_gpus(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:  # the ORM's bulk insert: one executemany, no instances made
            self.s.execute(insert(Gpu), [dict(r) for r in rows])

    # -- jobs -----------------------------------------------------------------------

    def job(self, job_id: int) -> Job | None:
        return self.s.get(Job, job_id)

    def jobs(
        self,
        states: Iterable[str] | None = None,
        user: str | None = None,
        limit: int = 10_000,
        after: int | None = None,
        arrays: bool = True,
    ) -> list[Job]:
        """The newest ``limit``, oldest first; with ``after``, a page: the first
        ``limit`` whose id is above it. ``arrays=False``: none that is in an array."""
        query = select(Job)
        if not arrays:
            query = query.where(col(Job.array_id).is_(None))
        if states is not None:
            query = query.where(col(Job.state).in_(list(states)))
        if user is not None:
            query = query.where(Job.user == user)
        if after is not None:
            query = query.where(col(Job.id) > after).order_by(col(Job.id)).limit(limit)
            return list(self.s.exec(query).all())
        query = query.order_by(col(Job.id).desc()).limit(limit)
        return list(reversed(self.s.exec(query).all()))

    def job_counts(self, states: Iterable[str]) -> dict[tuple[str, str, str], int]:
        query = (
            select(Job.state, Job.priority, Job.reason, func.count())
            .where(col(Job.state).in_(list(states)))
            .group_by(col(Job.state), col(Job.priority), col(Job.reason))
        )
        return {(st, pr, rs or ""): int(n) for st, pr, rs, n in self.s.exec(query).all()}

    def jobs_by_id(self, ids: Sequence[int], states: Iterable[str]) -> list[Job]:
        """These jobs, those in ``states``, oldest first."""
        found: list[Job] = []
        wanted = list(states)
        for start in range(0, len(ids), 500):
            query = select(Job).where(
                col(Job.id).in_(ids[start : start + 500]), col(Job.state).in_(wanted)
            )
            found += self.s.exec(query).all()
        return sorted(found, key=lambda j: j.id or 0)

    def set_job_reasons(self, reasons: Mapping[int, str]) -> None:
        """Set these jobs' reasons (rows not loaded in this session)."""
        self._cursor().executemany(
            "UPDATE job SET reason = ? WHERE id = ?", [(r, i) for i, r in reasons.items()]
        )

    def job_states(self, ids: Iterable[int]) -> dict[int, str]:
        """The state of each of these jobs that exists; an array's id (its first
        task's) stands for the whole array, as a dependency on it does in Slurm: not
        ended while a task has not, then ``completed`` only if every task completed
        (else the state of one that did not)."""
        query = select(Job.id, Job.state, Job.array_id).where(col(Job.id).in_(list(ids)))
        found: dict[int, str] = {}
        for job_id, state, array_id in self.s.exec(query).all():
            if job_id is None:
                continue
            found[int(job_id)] = str(state)
            if array_id == job_id:
                found[int(job_id)] = self._array_state(int(job_id))
        return found

    def _array_state(self, array_id: int) -> str:
        query = (
            select(Job.state, func.count()).where(Job.array_id == array_id).group_by(col(Job.state))
        )
        states = {str(state) for state, _ in self.s.exec(query).all()}
        for state in sorted(states):
            if state not in FINAL_JOB_STATES:
                return state
        failed = sorted(states - {"completed"})
        return failed[0] if failed else "completed"

    def queued_line(self, free: int, hosts: int = 0) -> list[Job]:
        """The queued jobs not in an array (the newest 10,000, as ``jobs``), and the
        first queued tasks of each array (``ix_job_array``): as many as ``free`` GPUs
        could take, then one for each of ``hosts`` (each task that cannot start now
        may reserve a host of its own) and one more: oldest first."""
        found = self.jobs(("queued",), limit=10_000, arrays=False)
        query = (
            select(Job.array_id)
            .where(col(Job.array_id).is_not(None), Job.state == "queued")
            .distinct()
        )
        for array_id in self.s.exec(query).all():
            waiting = (
                select(Job)
                .where(Job.array_id == array_id, Job.state == "queued")
                .order_by(col(Job.id))
            )
            first = self.s.exec(waiting.limit(1)).first()
            if first is None or first.id is None:
                continue
            found.append(first)
            more = free // max(1, first.gpus) + hosts
            if more > 0:
                found += self.s.exec(waiting.where(col(Job.id) > first.id).limit(more)).all()
        return sorted(found, key=lambda j: j.id or 0)

    def array_tasks(self, array_id: int, states: Iterable[str] | None = None) -> list[Job]:
        """An array's tasks (those in ``states``), by id."""
        query = select(Job).where(Job.array_id == array_id)
        if states is not None:
            query = query.where(col(Job.state).in_(list(states)))
        return list(self.s.exec(query.order_by(col(Job.id))).all())

    def array_task(self, array_id: int, task: int) -> Job | None:
        query = select(Job).where(Job.array_id == array_id, Job.array_task == task)
        return self.s.exec(query).first()

    def set_array_reason(self, array_id: int, reason: str) -> None:
        """Every waiting task of an array gets this reason (one statement, no rows read
        into the session)."""
        self._cursor().execute(
            "UPDATE job SET reason = ? WHERE array_id = ? AND state = 'queued' AND reason <> ?",
            (reason, array_id, reason),
        )

    def link_array(self, ids: Sequence[int]) -> None:
        """Make these jobs (just inserted, the first one first) one array: each one's
        ``array_id`` is the first one's id."""
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ", ".join("?" * len(part))
            self._cursor().execute(
                f"UPDATE job SET array_id = ? WHERE id IN ({marks})",  # noqa: S608
                (ids[0], *part),
            )

    def add_script(self, text: str, now: float) -> int:
        row = JobScript(text=text, created_at=now)
        self.s.add(row)
        self.s.flush()
        assert row.id is not None
        return row.id

    def script_text(self, script_id: int) -> str | None:
        row = self.s.get(JobScript, script_id)
        return None if row is None else row.text

    def jobs_on(self, host: str, states: Iterable[str]) -> list[Job]:
        query = select(Job).where(Job.host == host, col(Job.state).in_(list(states)))
        return list(self.s.exec(query.order_by(col(Job.id))).all())

    # -- claims ---------------------------------------------------------------------

    def add_claim(self, claim: Claim) -> Claim:
        self.s.add(claim)
        self.s.flush()
        return claim

    def claim(self, claim_id: int) -> Claim | None:
        return self.s.get(Claim, claim_id)

    def claims(
        self,
        states: Iterable[str] | None = None,
        user: str | None = None,
        limit: int = 10_000,
        after: int | None = None,
    ) -> list[Claim]:
        """As ``jobs``."""
        query = select(Claim)
        if states is not None:
            query = query.where(col(Claim.state).in_(list(states)))
        if user is not None:
            query = query.where(Claim.user == user)
        if after is not None:
            query = query.where(col(Claim.id) > after).order_by(col(Claim.id)).limit(limit)
            return list(self.s.exec(query).all())
        query = query.order_by(col(Claim.id).desc()).limit(limit)
        return list(reversed(self.s.exec(query).all()))

    # -- bookings -------------------------------------------------------------------

    def add_booking(self, booking: Booking) -> Booking:
        self.s.add(booking)
        self.s.flush()
        return booking

    def booking(self, booking_id: int) -> Booking | None:
        return self.s.get(Booking, booking_id)

    def bookings(
        self, states: Iterable[str] | None = None, ending_after: float | None = None
    ) -> list[Booking]:
        query = select(Booking)
        if states is not None:
            query = query.where(col(Booking.state).in_(list(states)))
        if ending_after is not None:
            query = query.where(col(Booking.end_at) > ending_after)
        query = query.order_by(col(Booking.start_at), col(Booking.id)).limit(10_000)
        return list(self.s.exec(query).all())

    # -- allocations ----------------------------------------------------------------

    def allocate(
        self,
        gpu_uuids: Sequence[str],
        host: str,
        now: float,
        *,
        job_id: int | None = None,
        claim_id: int | None = None,
    ) -> None:
        """Give the GPUs to one job or claim; the partial unique index refuses a GPU
        that is already given (``IntegrityError``), whatever the caller believed."""
        self.moved = True
        for uuid in gpu_uuids:
            self.s.add(
                Allocation(gpu_uuid=uuid, host=host, job_id=job_id, claim_id=claim_id, start_at=now)
            )
        self.s.flush()

    def free(self, now: float, *, job_id: int | None = None, claim_id: int | None = None) -> int:
        """End the live allocations of a job or claim; how many there were."""
        query = update(Allocation).where(col(Allocation.end_at).is_(None))
        if job_id is not None:
            query = query.where(col(Allocation.job_id) == job_id)
        elif claim_id is not None:
            query = query.where(col(Allocation.claim_id) == claim_id)
        else:
            raise ValueError("free() needs a job_id or a claim_id")
        self.ended.extend(
            (uuid, now) for uuid in self.usage.charge(now, job_id=job_id, claim_id=claim_id)
        )
        result = self.s.execute(query.values(end_at=now))
        self.s.expire_all()
        count = int(getattr(result, "rowcount", 0) or 0)
        self.moved = self.moved or count > 0
        return count

    def live_allocations(self) -> list[Allocation]:
        query = select(Allocation).where(col(Allocation.end_at).is_(None))
        return list(self.s.exec(query).all())

    def allocations_of(
        self, *, job_id: int | None = None, claim_id: int | None = None
    ) -> list[Allocation]:
        query = select(Allocation)
        if job_id is not None:
            query = query.where(col(Allocation.job_id) == job_id)
        if claim_id is not None:
            query = query.where(col(Allocation.claim_id) == claim_id)
        return list(self.s.exec(query.order_by(col(Allocation.id))).all())

    # -- audit and notices ----------------------------------------------------------

    def audit(self, row: Audit) -> None:
        """Keep an audit row, each text cut to its column (``caps``), whoever built it."""
        self.s.add(capped(row))

    def audit_row(self, audit_id: int) -> Audit | None:
        return self.s.get(Audit, audit_id)

    def audits(self, since: float | None, limit: int) -> list[Audit]:
        query = select(Audit)
        if since is not None:
            query = query.where(col(Audit.time) >= since)
        query = query.order_by(col(Audit.id).desc()).limit(limit)
        return list(reversed(self.s.exec(query).all()))

    def notice(self, row: Notice) -> Notice:
        """Keep a notice for its user, each text cut to its column, as audit rows are."""
        self.s.add(capped(row))
        self.s.flush()
        return row

    def notices_after(self, notice_id: int, uid: int | None = None) -> list[Notice]:
        query = select(Notice).where(col(Notice.id) > notice_id)
        if uid is not None:
            query = query.where(Notice.uid == uid)
        return list(self.s.exec(query.order_by(col(Notice.id)).limit(1000)).all())

    def unread_notices(self, uid: int, limit: int) -> list[Notice]:
        """The user's notices not shown yet, oldest first."""
        query = select(Notice).where(Notice.uid == uid, col(Notice.read_at).is_(None))
        return list(self.s.exec(query.order_by(col(Notice.id)).limit(limit)).all())

    def recent_notices(self, uid: int, limit: int) -> list[Notice]:
        """The user's newest ``limit`` notices, read or not, oldest first."""
        query = select(Notice).where(Notice.uid == uid).order_by(col(Notice.id).desc())
        return list(reversed(self.s.exec(query.limit(limit)).all()))

    def mark_read(self, uid: int, ids: Sequence[int], now: float) -> None:
        """Mark the user's notices ``ids`` read (another user's are left alone)."""
        if ids:
            self.s.execute(
                update(Notice)
                .where(col(Notice.id).in_(list(ids)), col(Notice.uid) == uid)
                .where(col(Notice.read_at).is_(None))
                .values(read_at=now)
            )

    def last_notice_id(self) -> int:
        value = self.s.exec(select(func.max(Notice.id))).one()
        return int(value or 0)
