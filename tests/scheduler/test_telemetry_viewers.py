"""Viewers: a console says which hosts it shows and gets only those in full.

A real head (``ThreadedHead``: the head's loop, socket and hub, its hosts scripted)
and the console's own source (``HeadTelemetry`` on the head's socket): the hosts a
console shows come with their processes' detail and health readings, the others as
the grid's rows (each process's pid and user); a new view brings the detail of the
hosts that came into it. A view no console would send (too long, names the head does
not watch, wrong types) is refused in one line and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from headthread import ThreadedHead
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_telemetry_stream import Stream

from gputui.config.models import Config
from gputui.scheduler.client import telemetry
from gputui.scheduler.client.deltas import HostBook, diff, host_view, summary_view
from gputui.scheduler.client.ops import MAX_VIEWED_HOSTS
from gputui.scheduler.client.telemetry import HeadTelemetry
from gputui.scheduler.head import telemetry as head_telemetry
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import ProcessSample

KNOWN = ("gpu01", "gpu02")
ALICE = ProcessSample(
    pid=4242, uid=1000, user="alice", command="python train.py", gpu_mem_mib=4096,
    start_ticks=123456, start_time=1_700_000_000.0,
)  # fmt: skip
BOB = ProcessSample(
    pid=5151, uid=1001, user="bob", command="python eval.py", gpu_mem_mib=2048,
    start_ticks=654321, start_time=1_700_000_100.0,
)  # fmt: skip


def _load(th: ThreadedHead) -> None:
    """gpu01 GPU 0 runs alice's process; gpu02 GPU 1 bob's, with a health reading."""

    def put() -> None:
        hosts = th.hosts
        assert hosts is not None
        hosts.put_processes("gpu01", 0, (ALICE,), util=90)
        hosts.put_fault("gpu02", 1, health_read=True, remapped_correctable=3, pcie_replays=7)
        hosts.put_processes("gpu02", 1, (BOB,), util=40)

    th.in_loop(put)


def _full(snap: HostSnapshot | None, th: ThreadedHead) -> bool:
    assert th.head is not None
    latest = th.head.telemetry.latest(snap.name) if snap is not None else None
    return snap is not None and latest is not None and host_view(snap) == host_view(latest)


def _summary(snap: HostSnapshot | None, th: ThreadedHead) -> bool:
    assert th.head is not None
    latest = th.head.telemetry.latest(snap.name) if snap is not None else None
    if snap is None or latest is None:
        return False
    # The summary as a console decodes it (each process's other fields at their defaults).
    summary = HostBook().apply(diff(snap.name, None, summary_view(host_view(latest))))
    return host_view(snap) == host_view(summary) and host_view(snap) != host_view(latest)


async def _until(condition: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_the_console_gets_detail_only_for_the_hosts_it_shows(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2, "gpu02": 2}) as th:
        _load(th)
        config = Config.model_validate(
            {"hosts": [{"name": n} for n in KNOWN], "head": {"socket": str(th.sock)}}
        )
        source = HeadTelemetry(config)
        source.view(["gpu01"], ("gpu01", 0))
        await source.start()
        try:
            snaps = source.snapshots
            await _until(
                lambda: _full(snaps()["gpu01"], th) and _summary(snaps()["gpu02"], th),
                "gpu01 in full, gpu02 as its summary",
            )
            # The summary still draws gpu02's grid: readings, how many processes, whose.
            sample = snaps()["gpu02"].sample
            assert sample is not None
            gpu = sample.gpus[1]
            assert gpu.util_gpu == 40
            assert gpu.processes == (ProcessSample(pid=BOB.pid, user="bob"),)
            assert gpu.health_read is False and gpu.remapped_correctable is None
            assert source.view_problem is None

            source.view(["gpu02"], ("gpu02", 1))
            await _until(
                lambda: _full(snaps()["gpu02"], th) and _summary(snaps()["gpu01"], th),
                "the new view: gpu02 in full, gpu01 as its summary",
            )
            sample = snaps()["gpu02"].sample
            assert sample is not None
            assert sample.gpus[1].processes == (BOB,)
            assert sample.gpus[1].remapped_correctable == 3
            assert th.head is not None
            viewers: list[Any] = []
            th.in_loop(lambda: viewers.extend(th.head.telemetry.viewers()))  # type: ignore[union-attr]
            assert viewers == [(frozenset({"gpu02"}), ("gpu02", 1))]
        finally:
            await source.close()


def test_a_console_that_never_says_gets_every_host_in_full(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2, "gpu02": 2}) as th:
        _load(th)
        stream = Stream(th.sock)
        try:
            stream.subscribe()
            book = HostBook()
            assert th.head is not None
            while True:  # until both hosts carry the processes _load put there
                for delta in stream.push()["hosts"]:
                    book.apply(delta)
                views = [book.views(n) for n in KNOWN]
                latest = [th.head.telemetry.latest(n) for n in KNOWN]
                if all(v is not None and any(v.procs) for v in views):
                    break
            assert views == [host_view(s) for s in latest if s is not None]
        finally:
            stream.close()


_NAME = st.text(min_size=1, max_size=40)
_INT = st.integers(-(2**63), 2**63 - 1)
"""JSON numbers the head reads as numbers (a longer one makes the line not JSON)."""
_NOT_A_LIST = st.one_of(
    _INT, st.text(max_size=20), st.none(), st.booleans(),
    st.dictionaries(st.text(max_size=5), _INT, max_size=3),
)  # fmt: skip
_NOT_A_NAME = st.one_of(
    _INT, st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
    st.just(""), st.text(min_size=129, max_size=300),
    st.lists(_INT, max_size=2),
)  # fmt: skip
_BAD_GPU = st.one_of(
    _INT, st.text(max_size=10), st.lists(_INT, max_size=2),
    st.fixed_dictionaries({"host": st.sampled_from(KNOWN), "index": st.integers(64, 2**63 - 1)}),
    st.fixed_dictionaries({"host": st.sampled_from(KNOWN), "index": st.integers(-(2**63), -1)}),
    st.fixed_dictionaries({"host": st.sampled_from(KNOWN), "index": st.text(max_size=3)}),
    st.fixed_dictionaries({"host": _NAME.filter(lambda n: n not in KNOWN), "index": st.just(0)}),
)  # fmt: skip
HOSTILE = st.one_of(
    # a host the head does not watch, among ones it does
    st.builds(
        lambda known, bad, at: {"hosts": [*known[:at], bad, *known[at:]]},
        st.lists(st.sampled_from(KNOWN), max_size=4),
        _NAME.filter(lambda n: n not in KNOWN),
        st.integers(0, 4),
    ),
    # more names than a screen holds (the known ones, over and over)
    st.builds(lambda n: {"hosts": list(KNOWN) * n}, st.integers(MAX_VIEWED_HOSTS // 2 + 1, 5000)),
    st.builds(lambda bad: {"hosts": bad}, _NOT_A_LIST),
    st.builds(lambda bad: {"hosts": ["gpu01", bad]}, _NOT_A_NAME),
    st.builds(lambda gpu: {"hosts": ["gpu01"], "gpu": gpu}, _BAD_GPU),
    st.builds(
        lambda key: {"hosts": ["gpu01"], key: 1},
        st.text(min_size=1, max_size=20).filter(lambda k: k not in ("hosts", "gpu")),
    ),
    st.just({}),
)


def test_a_hostile_view_is_refused_in_one_line_and_changes_nothing(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2, "gpu02": 2}) as th:
        stream = Stream(th.sock)
        try:
            assert stream.subscribe({"detail": ["gpu01"]})["ok"] is True
            stream.push()
            assert th.head is not None
            hub = th.head.telemetry
            before: list[Any] = []
            th.in_loop(lambda: before.extend(hub.viewers()))
            assert before == [(frozenset({"gpu01"}), None)]
            ids = iter(range(100, 10_000_000))

            @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
            @given(args=HOSTILE)
            def refused(args: dict[str, Any]) -> None:
                request_id = next(ids)
                line = {"id": request_id, "op": "telemetry_view", "args": args}
                stream.sock.sendall(json.dumps(line).encode() + b"\n")
                answer = stream.next(lambda m: m.get("id") == request_id)
                assert answer["ok"] is False, args
                error = answer["error"]
                assert error["code"] == "bad-args"
                assert error["message"].startswith("telemetry_view: ")
                assert "\n" not in error["message"] and len(error["message"]) < 300
                after: list[Any] = []
                th.in_loop(lambda: after.extend(hub.viewers()))
                assert after == before

            refused()
            # Still subscribed, still served: a good view is taken.
            good = {"id": 7, "op": "telemetry_view", "args": {"hosts": ["gpu02"]}}
            stream.sock.sendall(json.dumps(good).encode() + b"\n")
            assert stream.next(lambda m: m.get("id") == 7)["ok"] is True
            after: list[Any] = []
            th.in_loop(lambda: after.extend(hub.viewers()))
            assert after == [(frozenset({"gpu02"}), None)]
        finally:
            stream.close()


def test_a_view_without_a_subscription_is_refused(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th:
        stream = Stream(th.sock)
        try:
            line = {"id": 3, "op": "telemetry_view", "args": {"hosts": ["gpu01"]}}
            stream.sock.sendall(json.dumps(line).encode() + b"\n")
            answer = stream.next(lambda m: m.get("id") == 3)
            assert answer["ok"] is False
            assert answer["error"]["code"] == "not-subscribed"
        finally:
            stream.close()


def test_summaries_come_once_a_turn_and_a_status_change_at_once(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 1, "gpu02": 1}) as th:
        assert th.head is not None and th.hosts is not None
        hub, hosts = th.head.telemetry, th.hosts

        def every(seconds: float) -> None:
            hub.summary_every_s = seconds

        th.in_loop(lambda: every(3600.0))
        stream = Stream(th.sock)
        try:
            stream.subscribe({"detail": ["gpu01"]})
            book = HostBook()
            for delta in stream.push()["hosts"]:
                book.apply(delta)
            # gpu02 (a summary) moves, then gpu01 (in full): gpu01's push leaves gpu02 out.
            th.in_loop(lambda: hosts.put_processes("gpu02", 0, (BOB,), util=55))
            th.in_loop(lambda: hosts.put_processes("gpu01", 0, (ALICE,), util=77))
            while True:
                deltas = {d["host"]: d for d in stream.push()["hosts"]}
                assert "gpu02" not in deltas, deltas
                if deltas.get("gpu01", {}).get("gpus", {}).get("0", {}).get("util_gpu") == 77:
                    break
            # Nor is a GPU's new state (a card fallen off the bus), its host still live.
            latest = hub.latest("gpu02")
            assert latest is not None and latest.sample is not None
            card = dataclasses.replace(latest.sample.gpus[0], state="lost")
            fallen = latest.with_changes(sample=latest.sample.model_copy(update={"gpus": (card,)}))
            th.in_loop(lambda: hub.observe(fallen))
            while True:
                deltas = {d["host"]: d for d in stream.push()["hosts"]}
                if "gpu02" in deltas:
                    break
            assert deltas["gpu02"]["gpus"]["0"]["state"] == "lost"
            assert "top" not in deltas["gpu02"] or "status" not in deltas["gpu02"]["top"]
            # A status change is not held back.
            latest = hub.latest("gpu02")
            assert latest is not None
            gone = latest.with_changes(status=HostStatus.UNREACHABLE, message="timed out")
            th.in_loop(lambda: hub.observe(gone))
            while True:
                deltas = {d["host"]: d for d in stream.push()["hosts"]}
                if "gpu02" in deltas:
                    break
            assert deltas["gpu02"]["top"]["status"] == "unreachable"
            # Its turn come, the summary is sent.
            th.in_loop(lambda: hosts.put_processes("gpu02", 0, (BOB,), util=66))
            th.in_loop(lambda: every(0.2))
            while True:
                deltas = {d["host"]: d for d in stream.push()["hosts"]}
                util = deltas.get("gpu02", {}).get("gpus", {}).get("0", {}).get("util_gpu")
                if util == 66:
                    break
            # And the next, its status unchanged, at its next turn.
            th.in_loop(lambda: hosts.put_processes("gpu02", 0, (BOB,), util=71))
            while True:
                deltas = {d["host"]: d for d in stream.push()["hosts"]}
                util = deltas.get("gpu02", {}).get("gpus", {}).get("0", {}).get("util_gpu")
                if util == 71:
                    break
        finally:
            stream.close()


def test_summaries_alone_wait_for_company_and_news_goes_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push that would hold only summaries waits (here: an hour) for a push of a
    host the console shows, and rides along with it; an alarm and a view change go
    at once. Every summary's turn comes at every round (a turn of a microsecond), and
    the test runs the rounds itself, so what a round sends is not left to timing."""
    monkeypatch.setattr(head_telemetry, "SUMMARY_BATCH_S", 3600.0)
    with ThreadedHead(tmp_path, {"gpu01": 1, "gpu02": 1}) as th:
        assert th.head is not None and th.hosts is not None
        hub, hosts = th.head.telemetry, th.hosts

        def limited() -> None:  # a limit of 3 s (a sampling interval of 1 s)
            hub.summary_every_s = 1e-6
            for name in ("gpu01", "gpu02"):
                latest = hub.latest(name)
                assert latest is not None
                hub.observe(latest.with_changes(stale_after_s=3.0))

        th.in_loop(limited)
        stream = Stream(th.sock)
        try:
            stream.subscribe({"detail": ["gpu01"]})
            first = {d["host"]: d for d in stream.push()["hosts"]}
            # A summary is a turn and a wait older at most: its stale limit says so.
            assert first["gpu01"]["top"]["stale_after_s"] == 3.0
            stale = first["gpu02"]["top"]["stale_after_s"]
            interval = th.head.settings.state_push_min_s
            wait = 1e-6 + head_telemetry.SUMMARY_BATCH_S + interval
            assert stale == pytest.approx(3.0 + wait, abs=1e-9)
            # gpu02 (not shown) moves, and rounds run: nothing is pushed for it alone.
            th.in_loop(lambda: hosts.put_processes("gpu02", 0, (BOB,), util=55))
            for _ in range(3):
                th.in_loop(hub.push)
            # gpu01 (shown) moves: its push comes, and gpu02's summary with it.
            th.in_loop(lambda: hosts.put_processes("gpu01", 0, (ALICE,), util=77))
            th.in_loop(hub.push)
            deltas = {d["host"]: d for d in stream.push()["hosts"]}
            assert deltas["gpu01"]["gpus"]["0"]["util_gpu"] == 77, deltas
            assert deltas["gpu02"]["gpus"]["0"]["util_gpu"] == 55, deltas
            # An alarm (gpu02 lost) is not held back.
            latest = hub.latest("gpu02")
            assert latest is not None
            gone = latest.with_changes(status=HostStatus.UNREACHABLE, message="timed out")
            th.in_loop(lambda: hub.observe(gone))
            th.in_loop(hub.push)
            deltas = {d["host"]: d for d in stream.push()["hosts"]}
            assert deltas["gpu02"]["top"]["status"] == "unreachable", deltas
            # Nor is a view change: gpu01 leaves the view and turns back to its summary.
            request = {"id": 2, "op": "telemetry_view", "args": {"hosts": []}}
            stream.sock.sendall(json.dumps(request).encode() + b"\n")
            assert "result" in stream.next(lambda m: m.get("id") == 2)
            th.in_loop(hub.push)
            deltas = {d["host"]: d for d in stream.push()["hosts"]}
            assert deltas["gpu01"]["procs"]["0"] == [{"pid": ALICE.pid, "user": "alice"}]
        finally:
            stream.close()


def test_a_bigger_fleet_sends_each_console_no_more_summaries_a_second() -> None:
    """Off-screen hosts' summaries come every 5 s, or less often on a fleet too big for
    ``SUMMARY_HOSTS_PER_S`` of them a second: a console's cost stays that of a fleet
    of that size, however many hosts it does not show."""
    from gputui.scheduler.head.telemetry import SUMMARY_HOSTS_PER_S, TelemetryHub

    def hub(count: int) -> TelemetryHub:
        return TelemetryHub(
            _many(count), private=lambda: False, min_interval_s=lambda: 1.0, spawn=lambda c: None
        )

    assert hub(10).summary_every_s == 5.0
    assert hub(int(SUMMARY_HOSTS_PER_S * 5)).summary_every_s == 5.0
    assert hub(1000).summary_every_s == 1000 / SUMMARY_HOSTS_PER_S == 20.0


def _many(n: int) -> list[str]:
    return [f"node{i:03d}" for i in range(n)]


def test_the_cap_counts_the_hosts_and_the_selected_gpu_comes_besides(tmp_path: Path) -> None:
    """Up to ``MAX_VIEWED_HOSTS`` hosts in view, with the selected GPU on one more host,
    are taken (by ``telemetry`` and ``telemetry_view``); one host more is refused."""
    names = _many(MAX_VIEWED_HOSTS + 4)
    with ThreadedHead(tmp_path, dict.fromkeys(names, 1)) as th:
        stream = Stream(th.sock)
        try:
            assert stream.subscribe({"detail": []})["ok"] is True
            assert th.head is not None
            hub = th.head.telemetry
            ids = iter(range(100, 10_000_000))

            def ask(op: str, args: dict[str, Any]) -> dict[str, Any]:
                request_id = next(ids)
                line = {"id": request_id, "op": op, "args": args}
                stream.sock.sendall(json.dumps(line).encode() + b"\n")
                return stream.next(lambda m: m.get("id") == request_id)

            def viewers() -> list[Any]:
                got: list[Any] = []
                th.in_loop(lambda: got.extend(hub.viewers()))
                return got

            @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
            @given(
                # any size, and the ones about the cap every run
                n=st.one_of(
                    st.integers(0, MAX_VIEWED_HOSTS + 3),
                    st.sampled_from([MAX_VIEWED_HOSTS - 1, MAX_VIEWED_HOSTS, MAX_VIEWED_HOSTS + 1]),
                ),
                subscribe=st.booleans(),
                index=st.integers(0, 0),
                data=st.data(),
            )
            def check(n: int, subscribe: bool, index: int, data: st.DataObject) -> None:
                hosts = data.draw(st.permutations(names).map(lambda p: p[:n]))
                gpu_host = data.draw(st.sampled_from([h for h in names if h not in hosts]))
                gpu = {"host": gpu_host, "index": index}
                before = viewers()
                if subscribe:
                    answer = ask("telemetry", {"detail": hosts, "gpu": gpu})
                else:
                    answer = ask("telemetry_view", {"hosts": hosts, "gpu": gpu})
                if n <= MAX_VIEWED_HOSTS:
                    assert answer["ok"] is True, answer
                    assert viewers() == [(frozenset([*hosts, gpu_host]), (gpu_host, index))]
                else:
                    assert answer["ok"] is False
                    assert answer["error"]["code"] == "bad-args"
                    assert str(MAX_VIEWED_HOSTS) in answer["error"]["message"]
                    assert viewers() == before

            check()
        finally:
            stream.close()


async def test_the_console_sends_a_full_screen_and_the_gpu_on_one_host_more(
    tmp_path: Path,
) -> None:
    names = _many(MAX_VIEWED_HOSTS + 1)
    with ThreadedHead(tmp_path, dict.fromkeys(names, 1)) as th:
        config = Config.model_validate(
            {"hosts": [{"name": n} for n in names], "head": {"socket": str(th.sock)}}
        )
        source = HeadTelemetry(config)
        await source.start()
        try:
            await _until(lambda: source.pushes > 0, "the first push")
            source.view(names[:MAX_VIEWED_HOSTS], (names[-1], 0))
            assert th.head is not None
            hub = th.head.telemetry
            wanted = [(frozenset(names), (names[-1], 0))]

            def taken() -> bool:
                got: list[Any] = []
                th.in_loop(lambda: got.extend(hub.viewers()))
                return got == wanted

            await _until(taken, "the head to take the view")
            assert source.view_problem is None
        finally:
            await source.close()


async def _lossy_relay(path: Path, head: Path, lost: list[bytes]) -> asyncio.AbstractServer:
    """A socket in front of the head's that passes everything both ways but the
    first ``telemetry_view`` request, which it drops (kept in ``lost``): a request
    lost on its way, which the console gets no answer to."""

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head_reader, head_writer = await asyncio.open_unix_connection(str(head))

        async def down() -> None:
            while data := await head_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        async def up() -> None:
            while line := await reader.readline():
                if not lost and b'"op":"telemetry_view"' in line:
                    lost.append(line)
                    continue
                head_writer.write(line)
                await head_writer.drain()
            head_writer.close()

        with contextlib.suppress(OSError):
            await asyncio.gather(down(), up())

    return await asyncio.start_unix_server(relay, path=str(path))


async def test_a_view_the_head_did_not_answer_is_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telemetry, "SUBSCRIBE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(telemetry, "VIEW_RETRY_S", 0.05)
    with ThreadedHead(tmp_path, {"gpu01": 2, "gpu02": 2}) as th:
        lost: list[bytes] = []
        relay = await _lossy_relay(tmp_path / "relay.sock", th.sock, lost)
        config = Config.model_validate(
            {
                "hosts": [{"name": n} for n in KNOWN],
                "head": {"socket": str(tmp_path / "relay.sock")},
            }
        )
        source = HeadTelemetry(config)
        await source.start()
        try:
            await _until(lambda: source.pushes > 0, "the first push")
            source.view(["gpu02"], ("gpu02", 1))
            await _until(lambda: lost, "the view to be lost on the way")
            assert th.head is not None
            hub = th.head.telemetry

            def taken() -> bool:
                got: list[Any] = []
                th.in_loop(lambda: got.extend(hub.viewers()))
                return got == [(frozenset({"gpu02"}), ("gpu02", 1))]

            await _until(taken, "the view sent again and taken")
            await _until(lambda: source.view_problem is None, "the view's problem cleared")
        finally:
            await source.close()
            relay.close()


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(1, 300),
    every=st.floats(0.05, 100.0),
    since=st.floats(0.0, 1e6),
    span=st.floats(0.0, 150.0),
)
def test_the_hosts_whose_turn_came_between_two_pushes_are_all_found(
    count: int, every: float, since: float, span: float
) -> None:
    """A push looks only at the hosts whose summary turn came since the console's last
    push (not the fleet): none whose turn came may be missed."""
    from gputui.scheduler.head.telemetry import TelemetryHub

    names = _many(count)
    hub = TelemetryHub(names, private=lambda: False, min_interval_s=lambda: 1.0, spawn=print)
    hub.summary_every_s = every
    now = since + span
    turned = set(hub._turned(since, now))
    for name in names:
        phase = hub._phase[name]
        if int((now + phase) // every) != int((since + phase) // every):
            assert name in turned, (name, phase)


def test_a_push_to_a_console_looks_at_what_it_shows_not_at_the_fleet() -> None:
    """At 1,000 hosts a console showing 5 is looked at for those, the turns come since
    its last push and the alarms: a few dozen hosts a push, not a thousand."""
    from gputui.scheduler.head.telemetry import TelemetryHub, _Subscriber

    names = _many(1000)
    hub = TelemetryHub(names, private=lambda: False, min_interval_s=lambda: 1.0, spawn=print)
    for name in names:
        hub.observe(HostSnapshot(name=name, address="a", status=HostStatus.LIVE))
    sub = _Subscriber(conn=None, request_id=1, detail=frozenset(names[:5]))  # type: ignore[arg-type]
    sub.pushes, sub.pushed_at = 3, 100.0
    due = set(hub._due(sub, 100.1))  # a tenth of a second later (pushes come that often)
    assert set(names[:5]) <= due
    assert len(due) <= 5 + 1000 * 0.1 / hub.summary_every_s + 2


@settings(max_examples=20, deadline=None)
@given(flaps=st.integers(min_value=0, max_value=3000), hosts=st.integers(1, 40))
@example(flaps=3000, hosts=40)
def test_a_stalled_console_holds_a_bounded_alarm_log_and_misses_no_host(
    flaps: int, hosts: int
) -> None:
    """A console that takes no push while every host comes and then one flaps (status
    up, down) keeps the log of alarms bounded; whatever was dropped, every host whose
    alarm it was not sent is due at its next push."""
    from gputui.scheduler.head.telemetry import ALARMS_KEPT, TelemetryHub, _Subscriber

    names = _many(hosts)
    hub = TelemetryHub(names, private=lambda: False, min_interval_s=lambda: 1.0, spawn=print)
    stalled = _Subscriber(conn=None, request_id=1, detail=frozenset())  # type: ignore[arg-type]
    stalled.pushes, stalled.pushed_at = 1, 100.0
    hub._subs[None] = stalled  # type: ignore[index]
    statuses = (HostStatus.LIVE, HostStatus.UNREACHABLE)
    for i, name in enumerate(names + [names[0]] * flaps):
        hub.observe(HostSnapshot(name=name, address="a", status=statuses[i % 2]))
        hub._forget_alarms()
        assert len(hub._alarm_log) <= ALARMS_KEPT + 2 * hosts + 1
    assert set(names) <= set(hub._due(stalled, 100.0))
