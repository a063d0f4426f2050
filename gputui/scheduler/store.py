"""``JobStore``: every query the head makes, and nothing else of the head's logic.

One store object per database; all its work happens on the head's one database
thread. A ``transaction()`` is ``BEGIN IMMEDIATE`` … ``COMMIT`` (see ``engine``),
so a batch of requests that arrived together shares one durable commit; each
request inside runs in its own savepoint, so one refusal never undoes the others.
Keeping the SQL here (and SQLite pragmas in ``engine``) leaves the door open to
another SQLAlchemy database later without touching the scheduler.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, Table, func, insert, update
from sqlmodel import Session, col, select

from .tables import Allocation, Audit, Claim, Gpu, Host, Job, Meta, Notice, RequestLog

# The tables themselves, for the bulk statements of the submission path (Core
# executemany: no ORM unit of work for rows nobody reads back as objects).
_JOB: Table = Job.__table__  # type: ignore[attr-defined]
_REQUEST_LOG: Table = RequestLog.__table__  # type: ignore[attr-defined]


class Tx:
    """One open transaction: the queries, bound to its session."""

    def __init__(self, session: Session) -> None:
        self.s = session

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Run a block so that an exception undoes only that block."""
        with self.s.begin_nested():
            yield

    def flush(self) -> None:
        self.s.flush()

    # -- meta and request log -------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.s.get(Meta, key)
        return None if row is None else row.value

    def set_meta(self, key: str, value: str) -> None:
        self.s.merge(Meta(key=key, value=value))

    def replay(self, uid: int, request_id: str) -> dict[str, Any] | None:
        """The answer a request with this id got the first time, if it came before."""
        row = self.s.get(RequestLog, (uid, request_id))
        return None if row is None else dict(json.loads(row.result))

    def remember(self, uid: int, request_id: str, body: dict[str, Any], now: float) -> None:
        self.s.add(RequestLog(uid=uid, request_id=request_id, time=now, result=json.dumps(body)))

    def replay_many(self, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], dict[str, Any]]:
        """``replay`` for a whole batch in one query."""
        if not keys:
            return {}
        by_uid: dict[int, set[str]] = {}
        for uid, rid in keys:
            by_uid.setdefault(uid, set()).add(rid)
        found: dict[tuple[int, str], dict[str, Any]] = {}
        for uid, rids in by_uid.items():
            # uid = ? AND request_id IN (...): index probes on the primary key, however
            # long the log is (a row-value IN makes SQLite scan it).
            rows = self.s.execute(
                select(RequestLog.request_id, RequestLog.result).where(
                    RequestLog.uid == uid, col(RequestLog.request_id).in_(sorted(rids))
                )
            ).all()
            for rid, body in rows:
                found[uid, rid] = dict(json.loads(body))
        return found

    def remember_many(self, rows: Sequence[tuple[int, str, dict[str, Any]]], now: float) -> None:
        """``remember`` for a whole batch in one statement."""
        if rows:
            self.s.connection().execute(
                insert(_REQUEST_LOG),
                [
                    {"uid": u, "request_id": r, "time": now, "result": json.dumps(body)}
                    for u, r, body in rows
                ],
            )

    def insert_jobs(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert many jobs at once (the submission fast path); their ids, in order."""
        if not rows:
            return []
        table = _JOB
        result = self.s.connection().execute(
            insert(table).returning(table.c.id, sort_by_parameter_order=True), list(rows)
        )
        return [int(r[0]) for r in result.all()]

    def forget_requests_before(self, cutoff: float) -> int:
        rows = self.s.exec(select(RequestLog).where(col(RequestLog.time) < cutoff)).all()
        for row in rows:
            self.s.delete(row)
        return len(rows)

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

    # -- jobs -----------------------------------------------------------------------

    def add_job(self, job: Job) -> Job:
        self.s.add(job)
        self.s.flush()
        return job

    def job(self, job_id: int) -> Job | None:
        return self.s.get(Job, job_id)

    def jobs(
        self,
        states: Iterable[str] | None = None,
        user: str | None = None,
        limit: int = 10_000,
    ) -> list[Job]:
        query = select(Job)
        if states is not None:
            query = query.where(col(Job.state).in_(list(states)))
        if user is not None:
            query = query.where(Job.user == user)
        query = query.order_by(col(Job.id).desc()).limit(limit)
        return list(reversed(self.s.exec(query).all()))

    def jobs_on(self, host: str, states: Iterable[str]) -> list[Job]:
        query = select(Job).where(Job.host == host, col(Job.state).in_(list(states)))
        return list(self.s.exec(query.order_by(col(Job.id))).all())

    def count_jobs(self, states: Iterable[str]) -> int:
        query = select(func.count()).select_from(Job).where(col(Job.state).in_(list(states)))
        return int(self.s.exec(query).one())

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
    ) -> list[Claim]:
        query = select(Claim)
        if states is not None:
            query = query.where(col(Claim.state).in_(list(states)))
        if user is not None:
            query = query.where(Claim.user == user)
        query = query.order_by(col(Claim.id).desc()).limit(limit)
        return list(reversed(self.s.exec(query).all()))

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
        result = self.s.execute(query.values(end_at=now))
        self.s.expire_all()
        return int(getattr(result, "rowcount", 0) or 0)

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
        self.s.add(row)

    def audits(self, since: float | None, limit: int) -> list[Audit]:
        query = select(Audit)
        if since is not None:
            query = query.where(col(Audit.time) >= since)
        query = query.order_by(col(Audit.id).desc()).limit(limit)
        return list(reversed(self.s.exec(query).all()))

    def notice(self, row: Notice) -> Notice:
        self.s.add(row)
        self.s.flush()
        return row

    def notices_after(self, notice_id: int, uid: int | None = None) -> list[Notice]:
        query = select(Notice).where(col(Notice.id) > notice_id)
        if uid is not None:
            query = query.where(Notice.uid == uid)
        return list(self.s.exec(query.order_by(col(Notice.id)).limit(1000)).all())

    def last_notice_id(self) -> int:
        value = self.s.exec(select(func.max(Notice.id))).one()
        return int(value or 0)


class JobStore:
    """The head's database: ``transaction()`` for every read and write."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back when the block raises."""
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield Tx(session)

    def close(self) -> None:
        self.engine.dispose()
