"""``Head``: the daemon's event loop: requests in, one commit per batch, launches out.

Everything that changes the store goes through one inbox. The writer task takes
whatever has arrived (a burst of submissions, a host's report, a timer; ``inbox``:
how a batch waits a little for what is on its way), runs it
all (``batch.Batches.apply``, where there is no I/O) inside one ``BEGIN
IMMEDIATE`` transaction, each item in its own savepoint, commits once, and only
then answers the clients and sends the launches and signals it decided (group
commit: no answer before its commit is durable). After every change the
scheduler pass runs in the same batch, so work starts on the event that freed
its GPUs, not on a tick.

The writer's batches run on the event loop's own thread. A batch is about a
millisecond of work, and the only wait in it is the commit's fsync; handing it to
a thread cost more than that (two thread wake-ups a batch, each up to half a
millisecond on a busy two-core machine: see bench/sched.py). What may take longer
and writes nothing, the state pushed to consoles and the lookup of a log request,
reads a snapshot (a deferred transaction, which in WAL mode never holds the
writer up) on the reader thread. The pushes to subscribed consoles are a part the
head holds (``subscribers.Subscribers``), told after each commit that changed the
state, and of what other processes commit to a database they share (the store's
``changes()``: on PostgreSQL, the ``changes`` task listens).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gputui.common.i18n import N_
from gputui.common.locations import socket_dir_problem
from gputui.common.tasks import cancel_and_wait
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm.parse import node_names
from gputui.scheduler.head import lifecycle, usage_reads
from gputui.scheduler.head.batch import After, Batches, Item
from gputui.scheduler.head.chat import channels as chat_channels
from gputui.scheduler.head.chat.outbox import Outbox, in_group
from gputui.scheduler.head.forcefree import ForceFrees, TxCall, TxFn
from gputui.scheduler.head.hostops import HostOps
from gputui.scheduler.head.inbox import Inbox
from gputui.scheduler.head.liveness import HeadDied, Liveness
from gputui.scheduler.head.metrics_serve import HeadMetrics
from gputui.scheduler.head.metrics_state import FleetView, MetricsFeed
from gputui.scheduler.head.proc_signals import ProcessSignals
from gputui.scheduler.head.reader import SnapshotReads
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.head.slurm_relay import SlurmRelay
from gputui.scheduler.head.subscribers import Subscribers
from gputui.scheduler.head.telemetry import TelemetryHub
from gputui.scheduler.head.terminals import Terminals
from gputui.scheduler.head.watch.flags import ProcSignal
from gputui.scheduler.head.watch.health import HeadHealth
from gputui.scheduler.head.watch.history import HeadHistory
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.head.watch.meter import HeadMeter
from gputui.scheduler.head.watch.power import ClockLocks
from gputui.scheduler.head.watch.slurm_meter import SlurmEnergy
from gputui.scheduler.policy import model, passes
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection, SocketServer
from gputui.scheduler.store.api import Store, StoreFailure
from gputui.scheduler.store.changes import Change
from gputui.scheduler.store.tables import Host
from gputui.telemetry import HostSnapshot
from gputui.wire.words import say

log = logging.getLogger(__name__)

BATCH_MAX = 1024
INBOX_MAX = 20_000
READS = frozenset({"explain", "estimates", "quota", "usage", "report", "gpus", "history"})
"""Read-only requests answered from a snapshot on the reader thread."""
SWEEP_HOSTS_PER_S = 500.0
"""Hosts the timer's sweeps over every host (ownership, the health board's refresh
and write) cover a second at most: on a bigger fleet they come every hosts / this
many seconds (2 s at 1,000 hosts), not every tick, while samples are taken in as they
come. Each sweep judges what the hosts' latest samples say, so a process with no job
of its owner's is found at most one sweep after it appears."""


WRITER_OPS = frozenset(
    {"submit", "cancel", "kill", "preempt", "requeue", "hold", "release_hold", "claim"}
    | {"release", "show", "queue", "claims", "env", "audit", "whoami", "cluster", "wait"}
    | {"subscribe", "notices", "drain", "undrain", "unfence", "health_ack"}
    | {"book", "unbook", "bookings"}
)
"""Requests ``_on_line`` hands to the writer's batches (none of them answered on the
loop, on the reader thread or by a task of its own)."""


class Head:
    """The scheduler daemon over a store, a set of hosts and a socket."""

    def __init__(
        self,
        store: Store,
        hosts: HostOps,
        settings: HeadSettings,
        *,
        host_pools: dict[str, str],
        decide: model.Policy = passes.decide,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.hosts = hosts
        self.settings = settings
        self.host_pools = dict(host_pools)
        self.decide = decide
        self.clock = clock
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="gputui-head-read")
        self._inbox = Inbox(INBOX_MAX)
        sched = settings.rules.sched
        self.watch = HostWatch(
            host_pools,
            hosts.reports,
            clock=clock,
            thresholds=settings.health,
            placement=sched.placement,
            exempt_users=sched.ownership.exempt_users,
        )
        self._server = SocketServer(
            settings.socket,
            settings.admin_group,
            self._on_line,
            self._on_close,
            limits=settings.limits,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.liveness = Liveness()
        self._restored_sessions: set[str] = set()
        self._sweep_every_s = len(self.host_pools) / SWEEP_HOSTS_PER_S
        self._swept_at = -math.inf
        """``gputui run`` claims of the last head's connections: released unless their
        run reconnects (``claim`` with ``resume``) within ``settings.session_grace_s``."""
        self._closing = False
        self.health = HeadHealth(settings.health, host_pools, settings.expected_gpus, clock=clock)
        self.subscribers = Subscribers(
            store=store,
            settings=settings,
            watch=self.watch,
            flags=lambda: {
                **self.batch.flags.state(),
                **self.health.state(),
                **self.clock_locks.state(),
            },
            connections=lambda: self._server.connections,
            read=self._read,
            post=self._post,
            spawn=self._spawn,
            liveness=self.liveness,
        )
        self.batch = Batches(
            store,
            settings.rules,
            self.watch,
            self.host_pools,
            decide,
            logins=self._logins,
            state=self.subscribers.state,
            state_seq=lambda: self.subscribers.seq,
            run_as_login_user=settings.run_as_login_user,
            health=self.health,
        )
        self._background: set[asyncio.Task[Any]] = set()
        self.slurm_energy: SlurmEnergy | None = None
        """What Slurm's jobs drew on the watched hosts (``slurm:`` in hosts.yaml)."""
        self.slurm: SlurmRelay | None = None
        """Slurm's state for every console (``slurm:`` in hosts.yaml), else None."""
        if settings.slurm:
            self.slurm_energy = SlurmEnergy(
                self._offer,
                clock,
                host_of=settings.slurm.host_of,
                node_names=node_names,
                flush_s=settings.meter_flush_s,
            )
            self.slurm = SlurmRelay(
                settings.slurm,
                clock=clock,
                fences=self._fenced_hosts,
                on_poll=self.slurm_energy.polled,
            )
        self._started_at = clock()
        self.meter = HeadMeter(
            store,
            self._read,
            self._offer,
            clock,
            settings.meter_flush_s,
            power=lambda: self.settings.rules.sched.power,
        )
        self.reads = SnapshotReads(
            store=store,
            settings=settings,
            watch=self.watch,
            meter=self.meter,
            hosts=hosts,
            batch=self.batch,
            clock=clock,
            read=self._read,
        )
        self.readings = HeadHistory(
            self.watch.history,
            store,
            self._read,
            self.call_tx,
            clock,
            flush_s=settings.readings_flush_s,
            keep_s=settings.readings_keep_s,
        )
        self.batches = 0
        """Commits made (for tests and the benchmark)."""
        feed = MetricsFeed(store, self._read, self.meter.pending, clock)
        self.metrics = HeadMetrics(
            settings.metrics, feed, self._metrics_view, settings.metrics_refresh_s, clock
        )
        self.force_frees = ForceFrees(
            call_tx=self.call_tx,
            watch=self.watch,
            hosts=hosts,
            grace_s=lambda: self.settings.rules.kill_grace_s,
            allow_reset=settings.allow_gpu_reset,
            clock=clock,
        )
        self.telemetry = TelemetryHub(
            list(host_pools),
            private=lambda: self.settings.rules.sched.private_data,
            min_interval_s=lambda: self.settings.state_push_min_s,
            spawn=self._spawn,
            progress=lambda: self.liveness.progress("telemetry"),
        )
        """The consoles' telemetry subscriptions (``telemetry``), fed every snapshot."""
        self.signals = ProcessSignals(watch=self.watch, hosts=hosts, call_tx=self.call_tx)
        self.clock_locks = ClockLocks(
            hosts,
            self.call_tx,
            self._spawn,
            lambda: self.settings.rules.sched.power,
            clock=clock,
            changed=self.subscribers.changed,
        )
        """Held-but-idle cards' clocks locked low (``power.mode: lock``)."""
        self.terminals = Terminals(store, hosts, self._read, self.call_tx)
        """Connections attached to interactive jobs' terminals (``attach``)."""
        self.changes = store.changes()
        """Rows other processes commit (a database another process can write to)."""
        self.chat = Outbox(settings.notify, store, self._read, self.call_tx, clock)
        """The stored notices, sent to the users' and the team's chat channels."""
        self.chat_ops = chat_channels.ChatOps(
            config=settings.notify,
            outbox=self.chat,
            store=store,
            read=self._read,
            call_tx=self.call_tx,
            members=in_group,
        )

    # -- running ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; running jobs go on running on their hosts.
        ``HeadDied`` (once closed) when a task the head depends on ended."""
        await self.start()
        await self.serve(stop)

    async def serve(self, stop: asyncio.Event) -> None:
        """After ``start``: serve until ``stop`` is set or one of the head's tasks dies."""
        waits = [
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(self.liveness.dead.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            await self.close()
        if self.liveness.died is not None:
            raise HeadDied(self.liveness.died)

    @property
    def connections_served(self) -> int:
        """Client connections served since start (tests and the benchmark count them)."""
        return self._server.accepted

    async def start(self) -> None:
        problem = socket_dir_problem(self.settings.socket)
        if problem is not None:
            raise OSError(problem)
        self._load()
        self.metrics.start()  # a port in use is refused here, before the socket is taken
        await self._server.start()
        await self.hosts.start()
        live = self.liveness
        self._tasks = [
            live.start("writer", self._writer()),
            live.start("hosts", self._watch_hosts()),
            live.start("timer", self._ticker()),
            live.start("pusher", self.subscribers.run()),
            live.start("telemetry", self.telemetry.run()),
            live.start("chat", self.chat.run()),
        ]
        if self.slurm is not None:
            self._tasks.append(live.start("slurm", self.slurm.run()))
        if self.changes.shared:
            self._tasks.append(live.start("changes", self.changes.run(self._changed_elsewhere)))
        live.part("scheduler", within="writer")  # a pass ends every batch
        self._post(Item("resume"))

    async def close(self) -> None:
        self._closing = True
        self.liveness.closing()
        await self.metrics.close()
        await self._server.close()
        await cancel_and_wait(self._tasks)
        unapplied = self._inbox.drain()
        await self.meter.close(unapplied)
        if self.slurm_energy is not None:
            self.slurm_energy.close(self.store, unapplied)
        self._store_health()
        self.chat.close()
        await self.readings.close()
        await self.hosts.close()
        self._reader.shutdown(wait=True)
        self.store.close()

    def _store_health(self) -> None:
        """At shutdown, with the writer stopped: what changed on the health board."""
        try:
            with self.store.transaction() as tx:
                written = self.health.write(tx, self.clock())
        except (StoreFailure, OSError) as exc:
            log.error("head: could not store the health board: %s", exc)
            return
        self.health.committed(written)

    def _metrics_view(self) -> FleetView:
        """What ``/metrics`` shows now (on the loop; the HTTP thread renders it)."""
        gpus, drained = self.watch.inventory()
        return self.metrics.feed.view(self.watch.fleet(), gpus, drained, self.host_pools)

    async def _read(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (which reads through ``store.snapshot()``) on the reader thread."""
        return await asyncio.get_running_loop().run_in_executor(self._reader, fn)

    def _post(self, item: Item) -> None:
        if not self._offer(item):
            log.warning("head inbox full; dropped %s", item.kind)

    def _offer(self, item: Item) -> bool:
        return self._inbox.offer(item)

    def _load(self) -> None:
        team, problems = chat_channels.resolve_team(self.settings.notify, self.clock())
        if problems:  # (``gputui head`` says so first, naming the file and line)
            index, why = problems[0]
            raise OSError(f"notify.channels[{index}]: {why}")
        with self.store.transaction() as tx:
            for name, pool in self.host_pools.items():
                if tx.host(name) is None:
                    tx.put_host(Host(name=name, pool=pool))
            self.watch.load(tx.gpus(), tx.hosts())
            self._restored_sessions = {
                c.session for c in tx.claims(("active", "waiting")) if c.session is not None
            }
            self.meter.load(tx.usage.open_holders())
            self.health.load(*tx.health.rows())
            self.health.seen_gpus(tx.gpus())
            self.readings.load(tx)
            chat_channels.sync_team(tx, team)
            self.batch.standings.refresh(tx, self.clock())  # before the first pass

    # -- clients ------------------------------------------------------------------------

    async def _on_line(self, conn: Connection, line: bytes) -> None:
        self._inbox.heard(conn)
        try:
            request = wire.decode_request(line)
        except wire.Refusal as refusal:
            conn.send(wire.refused(refusal.request_id, refusal))
            return
        if request.op in WRITER_OPS:  # the common case first: for the writer's next batch
            conn.begin()
            item = Item("request", conn=conn, request=request)
            if not self._inbox.offer(item):
                await self._inbox.put(item)  # waits while the inbox is full
            return
        if request.op == "logs":
            self._spawn(conn.counted(self.reads.logs(conn, request)))
            return
        if request.op == "pty_in":  # a keystroke: forwarded at once, answered only if not
            self.terminals.write(conn, request)
            return
        if request.op == "attach":
            self._spawn(conn.counted(self.terminals.attach(conn, request)))
            return
        if request.op == "detach":
            self.terminals.detach(conn, request)
            return
        if request.op == "force_free":
            self._spawn(conn.counted(self.force_frees.run(conn, request)))
            return
        if request.op == "telemetry":  # answered from the last collection, then pushed
            try:
                gpu = request.args.gpu
                body = self.telemetry.subscribe(
                    conn,
                    request.id,
                    request.args.detail,
                    None if gpu is None else (gpu.host, gpu.index),
                )
            except wire.Refusal as refusal:
                conn.send(wire.refused(request.id, refusal))
                return
            conn.send(wire.response(request.id, body))
            return
        if request.op == "telemetry_view":  # what this console shows: those hosts in full
            self._telemetry_view(conn, request)
            return
        if request.op == "telemetry_stop":  # the console left the stream, not the head
            self.telemetry.drop(conn)
            conn.send(wire.response(request.id, {}))
            return
        if request.op in chat_channels.OPS:  # asks apprise on a thread; a test waits
            self._spawn(conn.counted(self.chat_ops.answer(conn, request)))
            return
        if request.op == "signal":
            self._spawn(conn.counted(self.signals.run(conn, request)))
            return
        if request.op == "incident":
            self._spawn(conn.counted(self.readings.answer(conn, request)))
            return
        if request.op in READS:
            self._spawn(conn.counted(self.reads.snapshot_read(conn, request)))
            return
        if request.op == "health":  # the board lives on this loop: answered from memory
            try:
                body = wire.response(request.id, self.health.answer(request.args.hosts))
            except wire.Refusal as refusal:
                body = wire.refused(request.id, refusal)
            conn.send(body)
            return
        if request.op == "hosts":  # which host a client's machine is (gputui env, run)
            conn.send(wire.response(request.id, {"hosts": self._host_table()}))
            return
        if request.op == "slurm":  # Slurm's state, polled once for every console
            try:
                answer = wire.response(request.id, self._slurm_relay().answer())
            except HeadError as exc:
                answer = wire.error(request.id, exc.code, exc.words or exc.message)
            conn.send(answer)
            return
        if request.op == "slurm_energy":  # Slurm's jobs' energy, from the store
            self._spawn(conn.counted(self._slurm_energy(conn, request)))
            return
        if request.op == "ping":
            answer = {
                "pong": True,
                "time": self.clock(),
                "tasks": self.liveness.report(),
                "telemetry": self.telemetry.stats(),
            }
            conn.send(wire.response(request.id, answer))
            return
        conn.begin()  # in flight until the writer takes it (``_writer``)
        await self._inbox.put(Item("request", conn=conn, request=request))

    async def _slurm_energy(self, conn: Connection, request: wire.Request) -> None:
        """``slurm_energy``: stored and still counted, read on the reader thread."""
        energy = self.slurm_energy
        if energy is None:
            conn.send(
                wire.error(
                    request.id, "unsupported", say(N_("slurm_energy: this head relays no Slurm"))
                )
            )
            return
        pending, now, sched = energy.pending(), self.clock(), self.settings.rules.sched

        def answer() -> dict[str, Any]:
            with self.store.snapshot() as tx:
                return usage_reads.slurm_energy(tx, request.args, sched, pending, now)

        try:
            body = await self._read(answer)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        except Exception:  # the store: say so, never leave the caller waiting
            log.exception("head: slurm_energy failed")
            conn.send(wire.error(request.id, "internal", say(N_("slurm_energy failed"))))
            return
        conn.send(wire.response(request.id, body))

    def _fenced_hosts(self) -> dict[str, str]:
        """Host -> why, for each host with a GPU the head fenced (Slurm drains it)."""
        out: dict[str, str] = {}
        for gpu in self.watch.present_gpus():
            if gpu.fenced and gpu.host not in out:
                out[gpu.host] = f"gpu{gpu.index} {gpu.fence_reason or gpu.fence_code}"
        return out

    def _slurm_relay(self) -> SlurmRelay:
        if self.slurm is None:
            raise HeadError.of(
                "unsupported", say(N_("slurm: this head has no slurm: section to relay"))
            )
        return self.slurm

    def _telemetry_view(self, conn: Connection, request: wire.Request) -> None:
        gpu = request.args.gpu
        try:
            where = None if gpu is None else (gpu.host, gpu.index)
            self.telemetry.view(conn, request.args.hosts, where)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        conn.send(wire.response(request.id, {}))

    def _host_table(self) -> list[dict[str, Any]]:
        places = self.settings.host_places
        return [
            {"name": name, "address": places.get(name, (name, False))[0],
             "local": places.get(name, (name, False))[1]}
            for name in sorted(self.host_pools)
        ]  # fmt: skip

    def _on_close(self, conn: Connection) -> None:
        self._inbox.gone(conn)
        self.telemetry.drop(conn)
        self.terminals.dropped(conn)
        self.batch.sessions_alive.discard(conn.session)
        for waiters in self.batch.waits.values():
            waiters[:] = [w for w in waiters if w[0] is not conn]
        if not self._closing:  # the head stopping ends no run: each reconnects to the next
            self._post(Item("session-closed", payload=conn.session))

    # -- the writer (group commit) ---------------------------------------------------------

    async def _writer(self) -> None:
        limit = BATCH_MAX if self.settings.group_commit else 1
        while True:
            self.write(await self._inbox.batch(limit))

    def write(self, batch: list[Item]) -> None:
        """Apply ``batch`` in one transaction, commit, then answer and act (the writer's
        one round; on the loop's thread)."""
        for item in batch:
            if item.conn is not None and item.request is not None:
                item.conn.end()
        slots = self.watch.slots()
        now = self.clock()
        self.watch.begin()
        try:
            answers, after = self.batch.apply(batch, slots, now)
        except (StoreFailure, OSError) as exc:
            self.watch.undo()
            self.liveness.failed(internal=False)
            log.error("head: could not commit %d items: %s", len(batch), exc)
            why = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            for item in batch:
                if item.conn is not None and item.request is not None:
                    item.conn.send(
                        wire.error(item.request.id, "store", say(N_("not stored: {why}"), why=why))
                    )
                _fail(item, wire.Refusal("store", say(N_("not stored: {why}"), why=why)))
            return
        except Exception:  # a bug met by one batch must not leave the head deaf for good
            self.watch.undo()
            log.exception("head: internal error; %d items not applied", len(batch))
            for item in batch:
                if item.conn is not None and item.request is not None:
                    item.conn.send(wire.error(item.request.id, "internal", say(N_("not stored"))))
                _fail(item, wire.Refusal("internal", say(N_("not stored"))))
            self.liveness.failed(internal=True)  # the writer ends when it always fails
            return
        self.liveness.committed()
        self.batches += 1
        answered = []
        for item, answer in zip(batch, answers, strict=True):
            if item.conn is not None and answer is not None:
                item.conn.send(answer)
                if not item.conn.inflight and not item.conn.closed:
                    answered.append(item.conn)  # its next request is likely on its way
            if item.done is not None and not item.done.done():
                item.done.set_result(answer)
        self._inbox.answered(answered)
        self._after_commit(after)

    async def call_tx(self, fn: TxFn) -> Any:
        """Run ``fn(tx, ctx)`` in the writer's next batch; its value once committed (a
        ``Refusal`` it raised, or the commit's failure, is raised here; what it did is
        undone)."""
        call = TxCall(fn)
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._inbox.put(Item("call", payload=call, done=done))
        await done
        return call.value()

    def _logins(self) -> dict[str, str | None]:
        return {host: self.hosts.login_user(host) for host in self.host_pools}

    # -- after a commit ---------------------------------------------------------------

    def _after_commit(self, after: After) -> None:
        for spec in after.launches:
            self._spawn(self._launch(spec))
        for host, key in after.stops:
            self._spawn(self._stop(host, key))
        for host, key in after.kills:
            self._spawn(self.hosts.signal_job(host, key, "KILL", None))
        for host, keys in after.forget.items():
            if keys:
                self._spawn(self.hosts.forget(host, keys))
        for sig in after.signals:
            self._spawn(self._signal_process(sig))
        for conn, rid, view in after.final_jobs:
            conn.send(wire.response(rid, {"job": view}))
        self.batch.commit_done(after)
        if after.moved:
            self.meter.ended(after.ended)
            self.meter.allocations_changed()
        if after.changed:
            self.subscribers.changed()
            self.metrics.changed()
            self.chat.changed()

    def _changed_elsewhere(self, _change: Change) -> None:
        """Another process committed a change a console is shown: push the state."""
        self.subscribers.changed()
        self.metrics.changed()
        self.chat.changed()

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` in the background, keeping a reference until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("head: background work failed: %r", task.exception())

    async def _launch(self, spec: lifecycle.Launch) -> None:
        if spec.key in self.batch.launching:
            return
        self.batch.launching.add(spec.key)
        try:
            answer = await self.hosts.launch(spec)
        finally:
            self.batch.launching.discard(spec.key)
        self._post(Item("launched", payload=(spec, answer)))

    async def _signal_process(self, sig: ProcSignal) -> None:
        answer = await self.hosts.signal_process(sig.host, sig.process, sig.signal)
        if not answer.ok:  # its audit row says so too
            pid, why = sig.process.pid, answer.message
            log.warning("head: SIG%s to pid %s on %s: %s", sig.signal, pid, sig.host, why)
        self._post(Item("signalled", payload=(sig, answer)))

    async def _stop(self, host: str, key: int) -> None:
        grace = self.settings.rules.kill_grace_s
        await self.hosts.signal_job(host, key, "TERM", grace)

    # -- hosts ------------------------------------------------------------------------

    async def _watch_hosts(self) -> None:
        async for snapshot in self.hosts.updates():
            try:
                self._on_snapshot(snapshot)
            except Exception:  # one bad snapshot must not stop the head watching hosts
                log.exception("head: snapshot of %s not handled", snapshot.name)
            self.liveness.progress("hosts")

    def _on_snapshot(self, snap: HostSnapshot) -> None:
        # The board first: placement reads its findings of the host's cards.
        self.health.observe(snap, self.clock())
        for kind, payload in self.watch.observe(snap, self.health.board.findings_of(snap.name)):
            self._post(Item(kind, payload=payload))
        self.meter.observe(snap)
        self.clock_locks.observe(snap, self.meter.meter, self.meter.holders)
        if self.slurm_energy is not None:
            self.slurm_energy.observe(snap)
        self.telemetry.observe(snap)
        self.metrics.observe(snap)
        self.force_frees.sampled()

    async def _ticker(self) -> None:
        serving_since = self.clock()  # the grace runs from when runs can reconnect
        while True:
            await asyncio.sleep(self.settings.tick_s)
            self.tick(serving_since)

    def tick(self, serving_since: float) -> None:
        """The timer's round: the tick, ownership and health items for the writer."""
        active = self.watch.active_users()
        orphans = set()
        grace = self.settings.session_grace_s
        if self._restored_sessions and self.clock() - serving_since > grace:
            orphans = self._restored_sessions - self.batch.sessions_alive
            self._restored_sessions = set()
        self._post(Item("tick", payload=(active, orphans)))
        now = self.clock()
        # (Half a tick early: a tick a little late must not push a sweep one more out.)
        if now - self._swept_at >= self._sweep_every_s - self.settings.tick_s / 2:
            self._swept_at = now
            self._post(Item("ownership"))
            self._post(Item("health"))
        self.meter.tick()
        if self.slurm_energy is not None:
            self.slurm_energy.tick()
        self.readings.tick()
        self.metrics.tick()
        self.chat.changed()  # a notice a commit wrote without a change shown
        self.liveness.progress("timer")


def _fail(item: Item, exc: BaseException) -> None:
    """A batch that was not committed: whoever awaits one of its items learns why."""
    if item.done is not None and not item.done.done():
        item.done.set_exception(exc)
