"""The head's GPU readings (``gputui incident``) in its store: they survive a restart,
a ``kill -9`` loses at most the ones not flushed, old ones are pruned by count and by
age a bounded batch at a time, and a read gives the same answer whether or not a
flush happened in between (a hypothesis state machine against a plain model)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from headthread import LineClient, ThreadedHead, poll
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from sqlalchemy import Engine

from gputui.scheduler.head.watch.history import write
from gputui.scheduler.head.watch.readings import MIN_SHARE, PER_GPU, Flush, History, incident_view
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import GpuSample, Sample

T0 = time.time() - 3600.0
"""Readings an hour old: inside the head's default keep (14 days) by the wall clock."""
LOCAL_MOUNTS = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def snap(host: str, at: float, gpus: int = 2, util: int = 7, power: float = 99.5) -> HostSnapshot:
    sample = Sample(
        seq=1,
        time=at,
        gpus=tuple(
            GpuSample(index=i, uuid=f"GPU-{host}-{i}", util_gpu=util + i, power_w=power)
            for i in range(gpus)
        ),
    )
    return HostSnapshot(name=host, address=host, status=HostStatus.LIVE, sample=sample)


def incident(sock: Path, host: str = "gpu01", **args: Any) -> dict[str, Any]:
    with LineClient(sock) as client:
        return client.ok("incident", {"host": host, **args})


def stored(db: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT host, gpu, time, util FROM reading ORDER BY id").fetchall()
    finally:
        conn.close()


def sample(th: ThreadedHead, at: float, util: int) -> None:
    hosts = th.hosts
    assert hosts is not None

    def put() -> None:
        hosts.util["gpu01"] = {0: util, 1: util + 1}
        hosts.power["gpu01"] = {0: 150.25, 1: 75.5}
        hosts.sample_at("gpu01", at)

    th.in_loop(put)


def held(th: ThreadedHead, count: int) -> dict[str, Any]:
    """The incident answer once it has ``count`` readings of gpu01."""

    def answer() -> dict[str, Any] | None:
        body = incident(th.sock, since=0.0)
        return body if len(body["readings"]) == count else None

    found: dict[str, Any] = poll(answer, what=f"{count} readings")
    return found


# -- through the running head ------------------------------------------------------------


def test_readings_survive_a_head_restart(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th:
        for minute in range(3):
            sample(th, T0 + 60 * minute, util=10 * minute)
        before = held(th, 6)
        assert stored(th.db) == []  # not flushed yet: the answer came from memory
    assert len(stored(th.db)) == 6  # a clean stop flushed them
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th:
        after = incident(th.sock, since=0.0)
        assert after == before
        assert [(r["gpu"], r["time"], r["util_gpu"], r["power_w"]) for r in after["readings"]] == [
            (0, T0, 0, 150.25),
            (0, T0 + 60, 10, 150.25),
            (0, T0 + 120, 20, 150.25),
            (1, T0, 1, 75.5),
            (1, T0 + 60, 11, 75.5),
            (1, T0 + 120, 21, 75.5),
        ]
        assert after["kept_since"] == T0
        only = incident(th.sock, gpu=1, since=T0 + 30)
        assert [r["time"] for r in only["readings"]] == [T0 + 60, T0 + 120]
        # The host's clock went back across the restart: that sample is not kept; the
        # next one, a minute on, is (after the three stored ones).
        sample(th, T0 + 100, util=50)
        sample(th, T0 + 180, util=60)
        latest = held(th, 8)
        assert [r["time"] for r in latest["readings"] if r["gpu"] == 0] == [
            T0 + 60 * m for m in range(4)
        ]


def test_a_kill_loses_only_what_was_not_flushed_and_a_flush_changes_no_answer(
    tmp_path: Path,
) -> None:
    """What ``kill -9`` leaves is what was committed: a consistent copy of the live
    head's database (SQLite's backup), taken with no close and no last flush."""
    clock = Clock(T0 + 600)
    with ThreadedHead(tmp_path / "a", {"gpu01": 2}, clock=clock, readings_flush_s=60.0) as th:
        for minute in range(3):
            sample(th, T0 + 60 * minute, util=minute)
        unflushed = held(th, 6)
        th.in_loop(lambda: setattr(clock, "t", T0 + 700))  # a flush is due
        poll(lambda: len(stored(th.db)) == 6, what="the flush")
        assert incident(th.sock, since=0.0) == unflushed  # the same, now from the store
        sample(th, T0 + 180, util=3)  # held, not flushed: lost to the kill
        held(th, 8)
        crashed = tmp_path / "b" / "db" / "gputui.db"
        crashed.parent.mkdir(parents=True)
        live, copy = sqlite3.connect(th.db), sqlite3.connect(crashed)
        live.backup(copy)
        live.close()
        copy.close()
    with ThreadedHead(tmp_path / "b", {"gpu01": 2}) as restarted:
        assert incident(restarted.sock, since=0.0) == unflushed


def test_a_bad_incident_request_is_refused_in_one_line(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th, LineClient(th.sock) as client:
        answer = client.ask("incident", {"host": "gpu01", "gpu": 99})
        assert answer["ok"] is False and "gpu" in answer["error"]["message"]
        assert incident(th.sock, host="nowhere")["readings"] == []


# -- retention on a real store -------------------------------------------------------------


def test_retention_prunes_by_count_and_age_a_bounded_batch_at_a_time(
    store_on_both: Engine,
) -> None:
    """On both databases (PostgreSQL before 16 wants the derived table named)."""
    jobs = SqlStore(store_on_both)
    h = History(every_s=0, budget=40)  # 2 GPUs: 20 readings each
    for t in range(50):
        h.record(snap("a", 1000.0 + t))
    assert h.share == 20

    def rows() -> list[tuple[int, float]]:
        with jobs.snapshot() as tx:
            return [(g, r[4]) for g in (0, 1) for r in tx.readings.of_gpu("a", g, 1000)]

    def flush(cutoff: float | None) -> int:
        before = len(rows())
        with jobs.transaction() as tx:
            write(tx, h.take(cutoff, turns=1), limit=7)  # the host's turn every flush
        h.stored_upto(h.seq)
        return before - len(rows())

    assert flush(None) == -40  # 20 a GPU held (the share): none to prune
    with jobs.snapshot() as tx:
        assert [r[4] for r in tx.readings.of_gpu("a", 0, 1000)] == [1030.0 + t for t in range(20)]
    for t in range(50, 80):  # 20 more a GPU held: 20 beyond the share each, 7 a flush go
        h.record(snap("a", 1000.0 + t))
    assert flush(None) == -(40 - 7)
    deleted = [flush(None) for _ in range(6)]
    assert deleted == [7, 7, 7, 7, 5, 0] and len(rows()) == 40
    assert rows()[0] == (0, 1060.0) and rows()[-1] == (1, 1079.0)  # the newest 20 each
    deleted = [flush(1075.0) for _ in range(6)]  # older than 1075 go, 7 a flush
    assert deleted == [7, 7, 7, 7, 2, 0]
    assert sorted({t for _, t in rows()}) == [1075.0 + t for t in range(5)]


def test_every_host_has_its_turn_to_be_cut_to_its_share_once_in_16_turns() -> None:
    h = History(every_s=0)
    for i in range(40):
        h.record(snap(f"h{i:02d}", 1.0, gpus=1))
    turns = [h.take(None, turns=16).hosts for _ in range(32)]
    everyone = sorted(f"h{i:02d}" for i in range(40))
    assert sorted(h for t in turns[:16] for h in t) == everyone
    assert sorted(h for t in turns[16:] for h in t) == everyone
    assert max(len(t) for t in turns) == 3


def test_a_flush_is_stored_once_even_when_handed_over_again(store: Engine) -> None:
    jobs = SqlStore(store)
    h = History(every_s=0)
    h.record(snap("a", 5.0))
    first = h.take(None)
    with jobs.transaction() as tx:
        assert write(tx, first) == 2
    h.resend()  # its answer was lost: the writer is handed the same readings again
    h.record(snap("a", 6.0))
    with jobs.transaction() as tx:
        assert write(tx, h.take(None)) == 2  # only the new ones
        assert tx.readings.seq() == 4
    with jobs.snapshot() as tx:
        assert [r[0] for r in tx.readings.of_gpu("a", 0, 10)] == [1, 3]


def test_a_read_between_the_commit_and_its_acknowledgement_counts_each_reading_once(
    store: Engine,
) -> None:
    """The writer committed a flush, the loop has not heard yet: the readings are in
    the snapshot and still held here; the answer has each once."""
    jobs = SqlStore(store)
    h = History(every_s=0)
    h.record(snap("a", 5.0))
    with jobs.transaction() as tx:
        write(tx, h.take(None))
    h.record(snap("a", 6.0))
    with jobs.snapshot() as tx:
        view = incident_view(h, "a", 0, 0.0, stored=tx.readings)
    assert [(r["time"], r["power_w"]) for r in view["readings"]] == [(5.0, 99.5), (6.0, 99.5)]


def test_the_share_of_each_gpu_shrinks_as_gpus_come() -> None:
    h = History(every_s=0, budget=PER_GPU * 2)
    h.record(snap("a", 1.0, gpus=2))
    assert h.share == PER_GPU
    h.record(snap("b", 2.0, gpus=4))
    assert h.share == PER_GPU * 2 // 6
    h.load(0, [(f"c{i}", 0, 1.0, 1.0) for i in range(10_000)])
    assert h.share == MIN_SHARE


# -- any history of records, flushes and reads ---------------------------------------------

BUDGET = 30
KEEP_S = 900.0
HOSTS = ("h1", "h2")


class Model:
    """What the head should keep: per host its last kept time, per GPU every reading
    kept in order; a read shows each GPU's newest ``share`` no older than the cutoff."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.gpus: dict[tuple[str, int], list[tuple[float, int]]] = {}
        self.first: float | None = None

    @property
    def share(self) -> int:
        return max(MIN_SHARE, min(PER_GPU, BUDGET // max(len(self.gpus), 1)))

    def record(self, host: str, at: float, gpus: int, util: int) -> None:
        last = self.last.get(host)
        if last is not None and at - last < 60:
            return
        self.last[host] = at
        self.first = at if self.first is None else self.first
        for index in range(gpus):
            self.gpus.setdefault((host, index), []).append((at, util + index))

    def view(self, host: str, gpu: int | None, since: float, cutoff: float) -> list[Any]:
        out = []
        for (name, index), kept in sorted(self.gpus.items()):
            if name == host and gpu in (None, index):
                newest = kept[-self.share :]
                out += [(index, t, u) for t, u in newest if t >= max(since, cutoff)]
        return out


class ReadingsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="gputui-readings-"))
        (self.dir / "mountinfo").write_text(LOCAL_MOUNTS)
        self.path = self.dir / "state" / "gputui.db"
        self.store = self._open()
        self.history = History(budget=BUDGET)
        self.model = Model()
        self.now = 10_000.0
        self.host_time = dict.fromkeys(HOSTS, 10_000.0)
        self.in_flight: Flush | None = None
        self.restarted = False

    def _open(self) -> SqlStore:
        return SqlStore(open_store(self.path, mountinfo=self.dir / "mountinfo"))

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def cutoff(self) -> float:
        return self.now - KEEP_S

    @rule(
        host=st.sampled_from(HOSTS),
        step=st.integers(-40, 200),
        gpus=st.integers(1, 3),
        util=st.integers(0, 90),
    )
    def sample(self, host: str, step: int, gpus: int, util: int) -> None:
        """A host's sample, its clock moved by ``step`` (back, too); h1 always has 2 GPUs."""
        gpus = 2 if host == "h1" else gpus
        at = self.host_time[host] = self.host_time[host] + step
        self.history.record(snap(host, at, gpus=gpus, util=util))
        self.model.record(host, at, gpus, util)

    @rule(host=st.sampled_from(HOSTS), count=st.integers(1, 15), util=st.integers(0, 90))
    def minutes(self, host: str, count: int, util: int) -> None:
        """``count`` samples a minute apart: more than a GPU's share, soon."""
        for _ in range(count):
            self.sample(host, 60, 3, util)

    @rule(seconds=st.integers(0, 400))
    def time_passes(self, seconds: int) -> None:
        self.now += seconds

    @precondition(lambda self: self.in_flight is None)
    @rule()
    def hand_to_the_writer(self) -> None:
        self.in_flight = self.history.take(self.cutoff())

    @precondition(lambda self: self.in_flight is not None)
    @rule(
        outcome=st.sampled_from(["stored", "failed", "stored, answer lost"]),
        limit=st.integers(1, 9),
    )
    def writer_done(self, outcome: str, limit: int) -> None:
        flush, self.in_flight = self.in_flight, None
        assert flush is not None
        if outcome != "failed":
            with self.store.transaction() as tx:
                write(tx, flush, limit=limit)
        if outcome == "stored":
            self.history.stored_upto(flush.upto)
        else:
            self.history.resend()

    @precondition(
        lambda self: (
            self.in_flight is None
            and all(kept[-1][0] >= self.cutoff() for kept in self.model.gpus.values())
        )
    )
    @rule()
    def clean_restart(self) -> None:
        """Everything held stored, the store closed and opened again, the history loaded."""
        with self.store.transaction() as tx:
            self.history.resend()
            write(tx, self.history.take(self.cutoff()))
        self.store.close()
        self.store = self._open()
        self.history = History(budget=BUDGET)
        with self.store.snapshot() as tx:
            self.history.load(tx.readings.seq(), tx.readings.gpus())
        self.restarted = True

    @rule(
        host=st.sampled_from(HOSTS), gpu=st.sampled_from([None, 0, 1, 2]), back=st.integers(0, 2000)
    )
    def read(self, host: str, gpu: int | None, back: int) -> None:
        since = self.now - back
        kept = self.history.kept(host, gpu)
        with self.store.snapshot() as tx:
            view = incident_view(kept, host, gpu, since, stored=tx.readings, cutoff=self.cutoff())
        got = [(r["gpu"], r["time"], r["util_gpu"]) for r in view["readings"]]
        assert got == self.model.view(host, gpu, since, self.cutoff())
        if not self.restarted and self.model.first is not None:
            assert view["kept_since"] == max(self.model.first, self.cutoff())

    @invariant()
    def memory_is_bounded(self) -> None:
        assert self.history.share == self.model.share
        for kept in self.history.kept("h1", None).unstored.values():
            assert len(kept) <= self.history.share


ReadingsMachine.TestCase.settings = settings(
    max_examples=40,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestReadingHistories = ReadingsMachine.TestCase
