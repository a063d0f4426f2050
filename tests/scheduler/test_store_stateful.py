"""The store, policy and life cycle driven through random histories (no sockets).

A hypothesis state machine plays users, admins and hosts against the real
``actions`` and ``lifecycle`` functions on a real SQLite file, and again on a real
PostgreSQL server (``TestStoreHistoriesOnPostgres``: fewer histories, each step
costs a durable commit there too), each step in one
``SqlStore.transaction()`` the way the daemon runs a batch, with requests in
savepoints. The hosts are a small model (runs they were given, and how each
ended), and the head restarts now and then (engine disposed, the same file
reopened). After every step: no GPU is given twice, claimed GPUs are never a
job's, no run key is launched twice, a preempted job comes back queued or held,
and every change an admin makes to someone else's item has its Audit row.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from gputui.scheduler.head import actions, claims, lifecycle
from gputui.scheduler.head.actions import SELF_AUDITED, Context, Rules
from gputui.scheduler.head.lifecycle import HostJob
from gputui.scheduler.policy import model as policy
from gputui.scheduler.policy import passes
from gputui.scheduler.server.op_args import ClaimArgs, JobArgs, ReleaseArgs, RequeueArgs, SubmitArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.server.wire import LIVE_JOB_STATES, Refusal
from gputui.scheduler.store.engine import open_database
from gputui.scheduler.store.queries import SqlTx
from gputui.scheduler.store.sqlstore import SqlStore

LOCAL_MOUNTS = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
HOSTS = {"h1": 4, "h2": 2, "h3": 1}
SLOTS = tuple(
    policy.GpuSlot(uuid=f"GPU-{host}-{i}", host=host, index=i, pool="a100", model="A100")
    for host, count in HOSTS.items()
    for i in range(count)
)
RULES = Rules(claim_idle_s=6.0, requeue_limit=2, kill_grace_s=5.0)


def _caller(uid: int, name: str, admin: bool = False) -> Caller:
    return Caller(uid=uid, user=name, group="staff", groups=frozenset({"staff"}), admin=admin)


PEOPLE = (_caller(2001, "alice"), _caller(2002, "bob"), _caller(2003, "carol", admin=True))
LIVE_CLAIMS = "SELECT id FROM claim WHERE state IN ('waiting', 'active')"
_LIVE = "'running', 'starting', 'unknown'"
APPLIES = {
    "cancel": f"'queued', 'held', {_LIVE}",
    "kill": _LIVE,
    "preempt": _LIVE,
    "requeue": f"{_LIVE}, 'completed', 'failed', 'killed', 'cancelled'",
    "hold": "'queued'",
    "release_hold": "'held'",
}
ROLES = st.sampled_from(["owner", "owner", "other", "admin", "admin"])
REASONS = st.sampled_from([None, "", "  ", *["maintenance window"] * 3])


def place_now(tx: SqlTx, ctx: Context) -> Callable[[policy.Want], policy.Place | None]:
    """The daemon's immediate placement for a claim (best fit over what is free now)."""

    def place(want: policy.Want) -> policy.Place | None:
        busy = {a.gpu_uuid for a in tx.live_allocations()}
        hosts: dict[str, list[policy.GpuSlot]] = {}
        for slot in ctx.slots:
            hosts.setdefault(slot.host, []).append(replace(slot, busy=slot.uuid in busy))
        return policy.best_fit(want, hosts, set())

    return place


def _sqlite_file(directory: Path) -> Path | str:
    return directory / "state" / "gputui.db"


class StoreMachine(RuleBasedStateMachine):
    new_database: Callable[[Path], Path | str] = staticmethod(_sqlite_file)
    """Where each history's database is (a PostgreSQL URL: see the class below)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="gputui-stateful-"))
        self.mountinfo = self.dir / "mountinfo"
        self.mountinfo.write_text(LOCAL_MOUNTS)
        self.path = StoreMachine.new_database(self.dir)
        self.store = SqlStore(open_database(self.path, mountinfo=self.mountinfo))
        self.now = 1000.0
        self.down: set[str] = set()
        self.launched: set[int] = set()
        """Every run key a scheduling pass has launched."""
        self.runs: dict[str, dict[int, HostJob]] = {h: {} for h in HOSTS}
        """What each host knows: its runs and how they stand."""
        self.stops: list[tuple[str, int]] = []
        """Signals decided and not yet delivered (the host may be down)."""

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- plumbing -------------------------------------------------------------------------

    def context(self) -> Context:
        slots = tuple(replace(s, healthy=s.host not in self.down) for s in SLOTS)
        return Context(
            now=self.now,
            slots=slots,
            pools=frozenset({"a100"}),
            hosts=frozenset(HOSTS),
            rules=RULES,
        )

    @contextmanager
    def batch(self) -> Iterator[tuple[SqlTx, Context]]:
        """One committed transaction, as the daemon's writer runs a batch: the step's
        work, then a scheduling pass; once durable, the launches go to the hosts."""
        self.now += 1.0
        ctx = self.context()
        with self.store.transaction() as tx:
            yield tx, ctx
            launches = lifecycle.schedule(tx, ctx, passes.decide, dict.fromkeys(HOSTS))
        self.stops.extend(ctx.stops)
        for spec in launches:
            assert spec.host not in self.down, "launched on a host that is down"
            assert spec.key not in self.launched, f"run key {spec.key} launched twice"
            self.launched.add(spec.key)
            assert spec.key not in self.runs[spec.host]
            self.runs[spec.host][spec.key] = HostJob(spec.key, "running", pid=spec.job_id)
        if launches:  # the launch answers come back: the runs are running
            with self.batch() as (tx, ctx):
                for spec in launches:
                    lifecycle.on_report(tx, ctx, spec.host, [self.runs[spec.host][spec.key]])

    def ids(self, sql: str, *params: Any) -> list[int]:
        with self.store.transaction() as tx:
            query = text(sql.replace("?", ":p")) if params else text(sql)
            bound = {"p": params[0]} if params else {}
            return [int(r[0]) for r in tx.s.connection().execute(query, bound).all()]

    def report(self, tx: SqlTx, ctx: Context, host: str) -> None:
        """The host's whole list of runs, as its next ``jobs`` push would give it."""
        relaunch: list[lifecycle.Launch] = []
        ended = {k for k, r in self.runs[host].items() if r.state != "running"}
        forget = lifecycle.on_report(
            tx, ctx, host, list(self.runs[host].values()), complete=True, relaunch=relaunch
        )
        assert set(forget) <= ended, "the head told a host to forget a run still running"
        for key in forget:
            del self.runs[host][key]
        for spec in relaunch:
            # A relaunch resends the same run key; the host's exclusive state file
            # makes it a no-op when the run exists. It is never a fresh key.
            assert spec.key in self.launched
            self.runs[host].setdefault(spec.key, HostJob(spec.key, "running", pid=spec.job_id))

    def audited(self, tx: SqlTx) -> int:
        return len(tx.audits(None, 1_000_000))

    def actor(self, role: str, kind: str, item_id: int) -> Caller:
        """Who acts on an item: its owner, another (plain) user, or the admin."""
        table = "job" if kind == "job" else "claim"
        (uid,) = self.ids(f"SELECT uid FROM {table} WHERE id = ?", item_id)
        if role == "owner":
            return next(p for p in PEOPLE if p.uid == uid)
        if role == "admin":
            return next(p for p in PEOPLE if p.admin)
        return next(p for p in PEOPLE if p.uid != uid and not p.admin)

    def act(
        self,
        actor: Caller,
        kind: str,
        item_id: int,
        action: str,
        reason: str | None,
        fn: Callable[[SqlTx, Context], Any],
    ) -> None:
        """Run a user's action in a savepoint; check who may and what the audit shows."""
        with self.batch() as (tx, ctx):
            owner = (tx.job(item_id) if kind == "job" else tx.claim(item_id)) or None
            assert owner is not None
            before = self.audited(tx)
            row = f"SELECT * FROM {kind} WHERE id = {int(item_id)}"
            was = tuple(tx.s.connection().exec_driver_sql(row).one())
            refused: Refusal | None = None
            try:
                with tx.savepoint():
                    fn(tx, ctx)
            except Refusal as exc:
                refused = exc
            tx.flush()
            now = tuple(tx.s.connection().exec_driver_sql(row).one())
            if refused is None:
                assert now != was, f"{action} of {kind} {item_id} acknowledged, nothing done"
            else:
                assert now == was and refused.message, f"a refused {action} changed something"
            after = self.audited(tx)
            if actor.owns(owner.uid):
                # An owner's own cancel, kill, preempt and requeue are audited too;
                # hold, release-hold and giving a claim back are not.
                audited = kind == "job" and action in SELF_AUDITED and refused is None
                assert after == before + (1 if audited else 0), f"owner's {action}"
            elif not actor.admin:
                assert refused is not None and refused.code == "denied"
                assert after == before
            elif not (reason or "").strip():
                assert refused is not None and refused.code == "reason-required"
                assert after == before
            elif refused is not None:
                assert after == before, "a refused admin action left an audit row"
            else:
                assert after == before + 1, "an admin change without its audit row"
                event("an admin changed another's item")
                row = tx.audits(None, 1)[-1]
                assert (row.action, row.target, row.user, row.owner) == (
                    action,
                    f"{kind} {item_id}",
                    actor.user,
                    owner.user,
                )
                assert row.reason == (reason or "").strip()

    @initialize()
    def some_work(self) -> None:
        """Every history starts with jobs running and queued, and a claim."""
        alice, bob, carol = PEOPLE
        with self.batch() as (tx, ctx):
            for who, gpus in ((alice, 1), (bob, 2), (carol, 1), (alice, 4), (bob, 4)):
                actions.submit(tx, who, SubmitArgs(argv=["train"], gpus=gpus), ctx)
            args = ClaimArgs(gpus=1)
            claims.claim(tx, bob, args, ctx, session=None, place_now=place_now(tx, ctx))

    # -- users ----------------------------------------------------------------------------

    @rule(
        who=st.sampled_from(PEOPLE),
        gpus=st.integers(1, 5),
        host=st.one_of(st.none(), st.sampled_from(sorted(HOSTS))),
    )
    def submit(self, who: Caller, gpus: int, host: str | None) -> None:
        fits = gpus <= (HOSTS[host] if host else max(HOSTS.values()))
        with self.batch() as (tx, ctx):
            try:
                with tx.savepoint():
                    actions.submit(tx, who, SubmitArgs(argv=["train"], gpus=gpus, host=host), ctx)
            except Refusal as exc:
                assert not fits and exc.code == "impossible", exc.message
            else:
                assert fits

    @rule(who=st.sampled_from(PEOPLE), gpus=st.integers(1, 3), wait=st.booleans())
    def claim(self, who: Caller, gpus: int, wait: bool) -> None:
        with self.batch() as (tx, ctx):
            try:
                with tx.savepoint():
                    args = ClaimArgs(gpus=gpus, wait=wait)
                    claims.claim(tx, who, args, ctx, session=None, place_now=place_now(tx, ctx))
            except Refusal as exc:
                assert exc.code == "busy" and not wait, exc.message

    @precondition(lambda self: bool(self.ids(LIVE_CLAIMS)))
    @rule(role=ROLES, reason=REASONS, data=st.data())
    def release(self, role: str, reason: str | None, data: st.DataObject) -> None:
        claim_id = data.draw(st.sampled_from(self.ids(LIVE_CLAIMS)), label="claim")
        who = self.actor(role, "claim", claim_id)
        args = ReleaseArgs(claim_ids=[claim_id], reason=reason)
        self.act(
            who,
            "claim",
            claim_id,
            "release",
            reason,
            lambda tx, c: claims.release(tx, who, args, c),
        )

    @precondition(lambda self: bool(self.ids("SELECT id FROM job")))
    @rule(
        role=ROLES,
        op=st.sampled_from(["cancel", "kill", "preempt", "requeue", "hold", "release_hold"]),
        reason=REASONS,
        data=st.data(),
    )
    def job_action(self, role: str, op: str, reason: str | None, data: st.DataObject) -> None:
        # Mostly a job in a state the action applies to; now and then any job at all.
        fitting = self.ids(f"SELECT id FROM job WHERE state IN ({APPLIES[op]})")
        every = self.ids("SELECT id FROM job")
        aimed = fitting and data.draw(st.integers(0, 4), label="aimed") > 0
        job_id = data.draw(st.sampled_from(fitting if aimed else every), label="job")
        who = self.actor(role, "job", job_id)
        handler = getattr(actions, op)
        force = op == "requeue" and data.draw(st.booleans(), label="force")
        args = (
            RequeueArgs(job_id=job_id, reason=reason, force=force)
            if force
            else JobArgs(job_id=job_id, reason=reason)
        )
        self.act(
            who,
            "job",
            job_id,
            op.replace("_", "-"),
            reason,
            lambda tx, c: handler(tx, who, args, c),
        )

    # -- the head and its hosts -----------------------------------------------------------

    @precondition(lambda self: any(self._running(h) for h in HOSTS if h not in self.down))
    @rule(data=st.data(), code=st.sampled_from([0, 0, 1, 137]))
    def finish(self, data: st.DataObject, code: int) -> None:
        host = data.draw(
            st.sampled_from([h for h in HOSTS if h not in self.down and self._running(h)])
        )
        key = data.draw(st.sampled_from(self._running(host)))
        self.runs[host][key] = HostJob(key, "exited", exit_code=code, ended_at=self.now)
        with self.batch() as (tx, ctx):
            self._check_preempted_return(tx, ctx, host)

    def _running(self, host: str) -> list[int]:
        return sorted(k for k, r in self.runs[host].items() if r.state == "running")

    def _check_preempted_return(self, tx: SqlTx, ctx: Context, host: str) -> None:
        """Report the host's list; a job being preempted whose run ended is back in
        the queue, or held past the requeue limit."""
        preempting = {
            j.id: actions.run_key(j.id or 0, j.launches)
            for j in tx.jobs_on(host, LIVE_JOB_STATES)
            if j.stop_kind == "preempt"
        }
        self.report(tx, ctx, host)
        for job_id, key in preempting.items():
            run = self.runs[host].get(key)
            if run is None or run.state != "running":
                job = tx.job(job_id or 0)
                assert job is not None and job.state in ("queued", "held"), (job_id, job)
                event(f"a preempted job came back {job.state}")

    @precondition(lambda self: bool(self.stops))
    @rule()
    def deliver_signals(self) -> None:
        """The TERMs decided earlier reach the hosts that are up; their runs end."""
        waiting = []
        touched = set()
        for host, job_id in self.stops:
            if host in self.down:
                waiting.append((host, job_id))
                continue
            for key, run in list(self.runs[host].items()):
                if actions.split_run_key(key)[0] == job_id and run.state == "running":
                    self.runs[host][key] = HostJob(key, "exited", signal="TERM", ended_at=self.now)
                    touched.add(host)
        self.stops = waiting
        for host in sorted(touched):
            with self.batch() as (tx, ctx):
                self._check_preempted_return(tx, ctx, host)

    @precondition(lambda self: len(self.down) < len(HOSTS))
    @rule(data=st.data())
    def host_lost(self, data: st.DataObject) -> None:
        up = [h for h in sorted(HOSTS) if h not in self.down]
        busy = [h for h in up if self._running(h)]
        host = data.draw(st.sampled_from(busy or up), label="host")
        if busy:
            event("a host with running jobs was lost")
        self.down.add(host)
        with self.batch() as (tx, ctx):
            lifecycle.on_host_down(tx, ctx, host, "unreachable")
            for job in tx.jobs_on(host, ("running", "starting")):
                raise AssertionError(f"job {job.id} still {job.state} on a lost host")

    @precondition(lambda self: bool(self.down))
    @rule(data=st.data())
    def host_back(self, data: st.DataObject) -> None:
        host = data.draw(st.sampled_from(sorted(self.down)))
        self.down.discard(host)
        with self.batch() as (tx, ctx):
            if tx.jobs_on(host, ("unknown",)):
                event("a host came back to jobs it had left unknown")
            self._check_preempted_return(tx, ctx, host)
            for job in tx.jobs_on(host, ("unknown",)):
                raise AssertionError(f"job {job.id} still unknown after its host answered")

    @rule()
    def time_passes(self) -> None:
        """The head's tick: claims idle past their limit are released."""
        self.now += 3.0
        with self.batch() as (tx, ctx):
            lifecycle.expire_claims(tx, ctx, {}, set())

    @rule()
    def head_restart(self) -> None:
        self.store.close()
        self.store = SqlStore(open_database(self.path, mountinfo=self.mountinfo))

    @precondition(lambda self: bool(self.ids("SELECT id FROM allocation WHERE end_at IS NULL")))
    @rule(data=st.data())
    def the_database_refuses_a_second_live_allocation(self, data: st.DataObject) -> None:
        with self.batch() as (tx, _ctx):
            live = tx.live_allocations()
            taken = data.draw(st.sampled_from(sorted(live, key=lambda a: a.id or 0)))
            with pytest.raises(IntegrityError), tx.savepoint():
                tx.allocate([taken.gpu_uuid], taken.host, self.now)
            assert len(tx.live_allocations()) == len(live)

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def gpus_are_never_given_twice(self) -> None:
        with self.store.transaction() as tx:  # rows are read inside it
            rows = tx.allocations_of()
            jobs = {j.id: j for j in tx.jobs()}
            claim_rows = {c.id: c for c in tx.claims()}
            spans: dict[str, list[tuple[float, float, str]]] = {}
            for a in rows:
                owner = f"job {a.job_id}" if a.job_id is not None else f"claim {a.claim_id}"
                end = a.end_at if a.end_at is not None else float("inf")
                spans.setdefault(a.gpu_uuid, []).append((a.start_at, end, owner))
            for uuid, periods in spans.items():
                periods.sort()
                for (_, end, first), (start, _, second) in itertools.pairwise(periods):
                    assert end <= start, f"{uuid} given to {first} and {second} at once"
            live: dict[str, set[str]] = {}
            for a in rows:
                if a.end_at is None:
                    owner = f"job {a.job_id}" if a.job_id is not None else f"claim {a.claim_id}"
                    live.setdefault(owner, set()).add(a.gpu_uuid)
            for job_id, job in jobs.items():
                held = live.get(f"job {job_id}", set())
                if job.state in LIVE_JOB_STATES:
                    assert held == set(json.loads(job.gpu_uuids)), (job_id, job.state)
                else:
                    assert held == set(), f"job {job_id} ({job.state}) still holds {held}"
            claimed: set[str] = set()
            for claim_id, item in claim_rows.items():
                held = live.get(f"claim {claim_id}", set())
                if item.state == "active":
                    assert held == set(json.loads(item.gpu_uuids))
                    claimed |= held
                else:
                    assert held == set(), f"claim {claim_id} ({item.state}) still holds {held}"
            for job in jobs.values():
                if job.state in LIVE_JOB_STATES:
                    assert not claimed & set(json.loads(job.gpu_uuids)), "a claimed GPU ran a job"


StoreMachine.TestCase.settings = settings(
    max_examples=25,
    # No "explain" phase: it traces every line of a failing history, minutes on 2 cores.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreHistories = StoreMachine.TestCase


class TestStoreHistoriesOnPostgres(StoreMachine.TestCase):  # type: ignore[name-defined,misc]
    """The same histories on PostgreSQL: each history on an emptied database."""

    settings = settings(StoreMachine.TestCase.settings, max_examples=8)

    @pytest.fixture(autouse=True)
    def _on_postgres(self, pg_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(
            StoreMachine, "new_database", staticmethod(lambda _dir: pg_server.database())
        )


def test_the_partial_unique_index_refuses_a_busy_gpu(database: Path | str, mountinfo: Path) -> None:
    """Whatever the scheduler's code believed: the database itself says no, and says
    yes again once the first allocation has ended."""
    store = SqlStore(open_database(database, mountinfo=mountinfo))
    try:
        with store.transaction() as tx:
            tx.allocate(["GPU-h1-0"], "h1", 1.0)
        with pytest.raises(IntegrityError), store.transaction() as tx:
            tx.allocate(["GPU-h1-1", "GPU-h1-0"], "h1", 2.0)
        with store.transaction() as tx:
            assert [(a.gpu_uuid, a.start_at) for a in tx.live_allocations()] == [("GPU-h1-0", 1.0)]
            tx.s.connection().exec_driver_sql("UPDATE allocation SET end_at = 3.0")
            tx.allocate(["GPU-h1-0"], "h1", 3.0)
        with store.transaction() as tx:
            assert [(a.gpu_uuid, a.start_at) for a in tx.live_allocations()] == [("GPU-h1-0", 3.0)]
    finally:
        store.close()
