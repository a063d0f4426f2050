"""The head's health board: a fault on a host is on it, first seen, counts and acks
survive a restart of the head, an ack drops when the problem changes, and any
sequence of readings and restarts keeps the tracks an in-memory board keeps."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from headkit import ScriptedHosts, running_head
from headthread import LineClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.config.models import HealthThresholds
from gputui.health.board import HealthBoard, Track
from gputui.scheduler.head.watch.health import (
    LAST_SEEN_S,
    HeadHealth,
    HealthWrite,
    last_seen_due,
)
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import GpuInfo, GpuSample, Hello, ProcessSample, Sample

HOST = "gpu01"
KEY = f"{HOST}:1:throttle-hw_thermal"


def ask(sock: Path, op: str, args: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    with LineClient(sock) as client:
        return client.ask(op, args, **top)


async def problem(sock: Path, *, where: Any = lambda p: True, gone: bool = False) -> Any:
    """The board's problem ``KEY`` once it shows (and ``where`` holds), or None once gone."""
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        answer = await asyncio.to_thread(ask, sock, "health")
        assert answer["ok"], answer
        found = next((p for p in answer["result"]["problems"] if p["key"] == KEY), None)
        if (found is None) if gone else (found is not None and where(found)):
            return found
        assert asyncio.get_running_loop().time() < deadline, f"last: {answer['result']}"
        await asyncio.sleep(0.05)


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return list(conn.execute(sql).fetchall())
    finally:
        conn.close()


async def test_first_seen_counts_and_acks_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "db" / "gputui.db"
    async with running_head(tmp_path, {HOST: 2}) as (_, hosts, sock):
        hosts.put_fault(HOST, 1, throttle=("hw_thermal",))
        first = await problem(sock)
        assert (first["severity"], first["gpu"], first["count"]) == ("warn", 1, 1)
        assert first["acknowledged"] is None
        hosts.put_fault(HOST, 1)  # cleared ...
        await problem(sock, gone=True)
        hosts.put_fault(HOST, 1, throttle=("hw_thermal",))  # ... and back: twice now
        again = await problem(sock, where=lambda p: p["count"] == 2)
        assert again["first_seen"] > first["first_seen"]  # this time's start
        bad = await asyncio.to_thread(
            ask, sock, "health_ack", {"key": KEY, "note": "known\x1b[2J"}, rid="a0"
        )
        assert bad["error"]["code"] == "bad-args" and "note" in bad["error"]["message"]
        done = await asyncio.to_thread(
            ask, sock, "health_ack", {"key": KEY, "note": " known:  fan  RMA filed "}, rid="a1"
        )
        assert done["ok"] and done["result"]["acknowledged"]["note"] == "known: fan RMA filed"
        assert rows(db, "SELECT action, target, reason, outcome FROM audit") == [
            ("health-ack", f"{HOST}:1 throttle-hw_thermal", "known: fan RMA filed", "acknowledged")
        ]
        missing = await asyncio.to_thread(
            ask, sock, "health_ack", {"key": f"{HOST}:0:nothing", "note": "x"}, rid="a2"
        )
        assert missing["error"]["code"] == "unknown-problem"
    assert rows(db, f"SELECT count, active FROM healthtrack WHERE key = '{KEY}'") == [(2, 1)]
    still = ScriptedHosts({HOST: 2}, faults={HOST: {1: {"throttle": ("hw_thermal",)}}})
    async with running_head(tmp_path, {HOST: 2}, scripted=still) as (_, hosts, sock):
        kept = await problem(sock)
        assert (kept["first_seen"], kept["count"]) == (again["first_seen"], 2)
        assert kept["acknowledged"]["note"] == "known: fan RMA filed"
        hosts.put_fault(HOST, 1)
        await problem(sock, gone=True)
        hosts.put_fault(HOST, 1, throttle=("hw_thermal",))
        changed = await problem(sock, where=lambda p: p["count"] == 3)
        assert changed["acknowledged"] is None  # it came again: no longer acknowledged
        deadline = asyncio.get_running_loop().time() + 15
        while rows(db, "SELECT key FROM healthack"):
            assert asyncio.get_running_loop().time() < deadline, "the ack row stayed"
            await asyncio.sleep(0.05)
        only = await asyncio.to_thread(ask, sock, "health", {"hosts": ["nope"]})
        assert only["error"] == {
            "code": "unknown-host",
            "message": f"no host named 'nope' (hosts: {HOST})",
            # the line's template and args, for a client to show in its user's language
            "msg": "no host named {host} (hosts: {hosts})",
            "args": {"host": "'nope'", "hosts": HOST},
        }


# -- the persisted tracks against an in-memory board (hypothesis) ------------------------


def _snap(faults: frozenset[int], at: float, host: str = HOST, gpus: int = 3) -> HostSnapshot:
    samples = tuple(
        GpuSample(index=i, uuid=f"GPU-{host}-{i}", throttle=("hw_thermal",) if i in faults else ())
        for i in range(gpus)
    )
    infos = tuple(GpuInfo(index=i, uuid=f"GPU-{host}-{i}") for i in range(gpus))
    return HostSnapshot(
        name=host,
        address=host,
        status=HostStatus.LIVE,
        hello=Hello(protocol=1, helper_version="t", hostname=host, gpus=infos),
        sample=Sample(seq=1, time=at, gpus=samples),
        received_at=at,
    )


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("observe"), st.frozensets(st.integers(0, 2)), st.floats(0.5, 200)),
        st.tuples(st.just("tick"), st.just(frozenset()), st.just(0.0)),
        st.tuples(st.just("restart"), st.just(frozenset()), st.just(0.0)),
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_STEPS)
def test_any_observe_and_restart_sequence_keeps_the_in_memory_tracks(
    tmp_path_factory: Any, steps: list[tuple[str, frozenset[int] | None, float]]
) -> None:
    store = SqlStore(open_store(tmp_path_factory.mktemp("h") / "gputui.db"))
    thresholds = HealthThresholds(stale_after_s=3600)
    now = 1_800_000_000.0

    def started() -> HeadHealth:
        head = HeadHealth(thresholds, [HOST], clock=lambda: now)
        with store.transaction() as tx:
            head.load(*tx.health.rows())
        return head

    def flush(head: HeadHealth) -> None:
        with store.transaction() as tx:
            written = head.write(tx, now)
        head.committed(written)

    memory = HealthBoard(thresholds)
    head = started()
    last: frozenset[int] = frozenset()
    try:
        for kind, faults, dt in [*steps, ("observe", None, 1.0)]:
            if kind == "observe":
                now += dt
                last = last if faults is None else faults  # the end: the last faults again
                memory.observe(_snap(last, now), now)
                head.observe(_snap(last, now), now)
            elif kind == "tick":
                flush(head)
            else:  # a clean restart: the head stores its board as it closes
                flush(head)
                head = started()
        seen = {p.key: (p.first_seen, p.count) for p in memory.problems()}
        assert {p.key: (p.first_seen, p.count) for p in head.board.problems()} == seen
        flush(head)
        with store.transaction() as tx:  # nothing changed since: nothing to write
            again = head.write(tx, now)
        assert (again.tracks, again.acks) == ({}, {})
        with store.snapshot() as tx:
            stored = {t.key: (t.first_seen, t.count, t.active) for t in tx.health.rows()[0]}
        assert stored == {k: (t.first, t.count, t.active) for k, t in memory.tracks().items()}
        # Last seen is written once a minute, at a mark of its own: never further behind.
        with store.snapshot() as tx:
            for row in tx.health.rows()[0]:
                assert memory.tracks()[row.key].last - row.last_seen < LAST_SEEN_S
    finally:
        store.close()


def test_tracks_that_began_together_have_their_last_seen_written_spread_over_the_minute(
    tmp_path: Path,
) -> None:
    """Every GPU's track begins in the same tick (a head starting on a fleet with a
    fault everywhere): each is written again once a minute, never a minute behind, and
    not all in one tick, a burst of every row at once each minute."""
    hosts = [f"gpu{i:03d}" for i in range(100)]
    store = SqlStore(open_store(tmp_path / "gputui.db"))
    head = HeadHealth(HealthThresholds(stale_after_s=3600), hosts, clock=lambda: 0.0)
    faults = frozenset(range(4))
    now = 1_800_000_000.0
    per_tick: list[int] = []
    writes: dict[str, int] = {}
    try:
        for _ in range(int(2 * LAST_SEEN_S) + 11):
            now += 1.0
            for host in hosts:
                head.observe(_snap(faults, now, host, gpus=4), now)
            with store.transaction() as tx:
                written = head.write(tx, now)
            head.committed(written)
            per_tick.append(len(written.tracks))
            for key in written.tracks:
                writes[key] = writes.get(key, 0) + 1
        tracks = len(hosts) * len(faults)
        assert per_tick[0] == tracks  # all new
        assert max(per_tick[1:]) <= 3 * tracks / LAST_SEEN_S  # spread, not all at once
        assert set(writes.values()) <= {3, 4}  # the first, then once each minute
        with store.snapshot() as tx:
            seen = [row.last_seen for row in tx.health.rows()[0]]
        assert len(seen) == tracks
        assert all(now - last < LAST_SEEN_S for last in seen)
    finally:
        store.close()


@given(st.text(max_size=40), st.floats(0, 1e10), st.floats(0.001, 1e6))
def test_a_clock_stepped_back_never_writes_an_earlier_last_seen(
    key: str, stored: float, back: float
) -> None:
    assert not last_seen_due(key, stored, stored - back)
    assert not last_seen_due(key, stored, stored)
    assert last_seen_due(key, stored, stored + LAST_SEEN_S)  # a mark passed, surely


@given(
    st.text(max_size=40),
    st.floats(0, 1e9),
    st.lists(st.tuples(st.floats(-200, 200), st.booleans()), min_size=1, max_size=12),
)
def test_the_kept_minute_marks_decide_as_last_seen_due_does(
    key: str, first: float, steps: list[tuple[float, bool]]
) -> None:
    """Each tick the head asks, of every track, whether its last seen is due; it keeps
    the stored side's mark between ticks. Moved by whatever ticks and commits, the
    answer is ``last_seen_due``'s on what is stored (red if a commit leaves the old
    mark)."""
    health = HeadHealth(HealthThresholds(), [], clock=lambda: 0.0)
    stored = Track(first, first, 1, True, "h", 0, "xid-79")
    health.committed(HealthWrite(tracks={key: stored}))
    last = first
    for step, commit in steps:
        last = max(0.0, last + step)
        now = Track(first, last, 1, True, "h", 0, "xid-79")
        assert health._differs(key, now) == last_seen_due(key, stored.last, last)
        if commit:
            health.committed(HealthWrite(tracks={key: now}))
            stored = now


async def test_an_idle_claim_is_on_the_board_and_in_the_pushed_state(tmp_path: Path) -> None:
    quick = HealthThresholds(claim_idle_minutes=0.01)  # 0.6 s
    async with running_head(tmp_path, {HOST: 2}, health=quick) as (_, hosts, sock):
        claimed = await asyncio.to_thread(ask, sock, "claim", {"gpus": 1}, rid="c1")
        claim_id = claimed["result"]["claim"]["id"]
        deadline = asyncio.get_running_loop().time() + 15
        while True:
            found = [
                p
                for p in (await asyncio.to_thread(ask, sock, "health"))["result"]["problems"]
                if p["code"] == "idle-claim"
            ]
            if found:
                break
            assert asyncio.get_running_loop().time() < deadline, "no idle claim on the board"
            await asyncio.sleep(0.05)
        assert [(p["severity"], p["key"]) for p in found] == [
            ("info", f"{HOST}::idle-claim:{claim_id}")
        ]
        assert "released in" in found[0]["title"]
        assert found[0]["action"] == f"nothing, or free the GPUs now: gputui release c{claim_id}"
        state = (await asyncio.to_thread(ask, sock, "cluster"))["result"]
        assert [c["id"] for c in state["idle_claims"]] == [claim_id]
        assert state["claim_idle_after_s"] == 0.6
        # A process of its owner on its GPU: busy again, off the board.
        index = int(claimed["result"]["claim"]["gpu_uuids"][0].rsplit("-", 1)[1])
        hosts.put_processes(HOST, index, (ProcessSample(pid=4242, uid=os.getuid()),))
        while any(
            p["code"] == "idle-claim"
            for p in (await asyncio.to_thread(ask, sock, "health"))["result"]["problems"]
        ):
            assert asyncio.get_running_loop().time() < deadline + 15, "the busy claim stayed idle"
            await asyncio.sleep(0.05)
        assert (await asyncio.to_thread(ask, sock, "cluster"))["result"]["idle_claims"] == []


def test_a_hosts_own_problem_changes_the_pushed_count_at_the_next_refresh(
    tmp_path: Path,
) -> None:
    """The hosts' problems come in between refreshes: the refresh after one says the
    state changed (so it is pushed) and the state counts it; one with nothing new does
    not."""
    store = SqlStore(open_store(tmp_path / "gputui.db"))
    head = HeadHealth(HealthThresholds(stale_after_s=3600), [HOST], clock=lambda: 0.0)
    watch = HostWatch({HOST: "default"}, lambda snap: None)
    try:
        with store.transaction() as tx:
            assert not head.refresh(tx, 1.0, watch, (), 3600.0)
        assert head.state()["board_problems"] == 0
        head.observe(_snap(frozenset({1}), 2.0), 2.0)
        with store.transaction() as tx:
            assert head.refresh(tx, 3.0, watch, (), 3600.0)
        assert head.state()["board_problems"] == len(head.board.problems()) == 1
        with store.transaction() as tx:
            assert not head.refresh(tx, 4.0, watch, (), 3600.0)
    finally:
        store.close()
