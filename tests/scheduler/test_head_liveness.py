"""The head never goes deaf: a drain and a release in one batch (the writer once died
of it, silently), rapid drains while the head works, and no ORM row kept past its
transaction (a leak fails loudly, at once, wherever it is); a run the head did not
hear of (it was down, or the launch's answer was lost) keeps its start time.

Real head over a real SQLite file and a real socket; the hosts scripted.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from headkit import ScriptedHosts
from headthread import LineClient, ThreadedHead, poll
from sqlalchemy.orm.exc import DetachedInstanceError

from gputui.scheduler.client import HeadError
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.gpufacts import COLUMNS, GpuFacts
from gputui.scheduler.head.hostops import HostAnswer
from gputui.scheduler.head.lifecycle import HostJob, Launch
from gputui.scheduler.head.liveness import Liveness, problems
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.policy import model, passes
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Gpu

HOST = "gpu01"


def _line(request_id: int, op: str, args: dict[str, object], rid: str) -> bytes:
    return json.dumps({"id": request_id, "op": op, "args": args, "rid": rid}).encode() + b"\n"


def _answers(c: LineClient, ids: set[int]) -> dict[int, dict[str, object]]:
    got: dict[int, dict[str, object]] = {}
    while set(got) != ids:
        answer = c.read()
        got[int(answer["id"])] = answer
    return got


def test_a_drain_and_a_release_in_one_batch_leave_the_head_answering(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {HOST: 4}) as th, LineClient(th.sock) as c:
        claim = c.ok("claim", {"gpus": 1, "wait": False})["claim"]["id"]
        # One write: both lines reach the head together and share one batch.
        c.send(
            _line(1, "drain", {"target": f"{HOST}:3", "reason": "fan"}, "d1")
            + _line(2, "release", {"claim_ids": [claim]}, "r1")
        )
        answers = _answers(c, {1, 2})
        assert answers[1]["ok"] is True, answers[1]
        assert answers[2]["ok"] is True, answers[2]
        # The writer lives on: the next requests are applied and answered at once.
        c.sock.settimeout(5)
        job = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        poll(lambda: c.ok("show", {"job_id": job})["job"]["state"] == "running", 5)
        assert c.ok("undrain", {"target": f"{HOST}:3"})["outcome"] == "undrained"
        assert c.ok("queue", {})["unavailable"] == []
        assert not [p for p in th.problems if "traceback" in p or "Error" in p], th.problems


def test_drains_and_releases_every_few_milliseconds_never_stop_the_writer(
    tmp_path: Path,
) -> None:
    """Drain, undrain, claim and release as fast as the head answers, for 3 s, with
    other work going on: every request is answered, and the head still works after."""
    with ThreadedHead(tmp_path, {HOST: 4}) as th, LineClient(th.sock) as c:
        c.sock.settimeout(10)
        deadline = time.monotonic() + 3.0
        rounds = 0
        while time.monotonic() < deadline:
            rounds += 1
            claim = c.ok("claim", {"gpus": 1, "wait": False})["claim"]["id"]
            base = rounds * 10
            c.send(
                _line(
                    base + 1,
                    "drain",
                    {"target": f"{HOST}:{rounds % 4}", "reason": "x"},
                    f"d{rounds}",
                )
                + _line(base + 2, "release", {"claim_ids": [claim]}, f"r{rounds}")
                + _line(base + 3, "undrain", {"target": f"{HOST}:{rounds % 4}"}, f"u{rounds}")
                + _line(base + 4, "drain", {"target": HOST, "reason": "y"}, f"h{rounds}")
                + _line(base + 5, "undrain", {"target": HOST}, f"hu{rounds}")
            )
            # The host's samples go on meanwhile (fence news, inventory, reports).
            th.in_loop(lambda: th.hosts.sample_again(HOST) if th.hosts else None)
            answers = _answers(c, {base + i for i in range(1, 6)})
            assert all(a["ok"] is True for a in answers.values()), answers
        assert rounds > 5
        job = c.ok("submit", {"argv": ["train"], "gpus": 4})["job"]["id"]
        poll(lambda: c.ok("show", {"job_id": job})["job"]["state"] == "running", 5)
        assert not [p for p in th.problems if "traceback" in p], th.problems


def test_a_row_kept_past_its_transaction_fails_at_its_first_use(tmp_path: Path) -> None:
    """The guard: every row is expired as its transaction ends, so keeping one (rather
    than a ``GpuFacts`` copy) fails in the first test that uses it, not by chance."""
    store = SqlStore(open_store(tmp_path / "gputui.db"))
    try:
        with store.transaction() as tx:
            tx.put_gpu(Gpu(uuid="GPU-a", host="h", index=0))
        with store.transaction() as tx:
            (kept,) = tx.gpus()
            copy = GpuFacts.of(kept)
        with pytest.raises(DetachedInstanceError):
            _ = kept.present
        assert (copy.uuid, copy.present, copy.state) == ("GPU-a", True, "ok")
        with store.snapshot() as tx:
            (read,) = tx.gpus()
        with pytest.raises(DetachedInstanceError):
            _ = read.host
    finally:
        store.close()


def test_gpu_facts_copy_every_column_of_the_gpu_row() -> None:
    assert set(COLUMNS) == set(Gpu.model_fields)


def test_the_host_watch_keeps_no_row_of_any_session(tmp_path: Path) -> None:
    """After a batch of drains, fences and inventories, nothing the head keeps between
    batches belongs to a session."""
    with ThreadedHead(tmp_path, {HOST: 2}) as th, LineClient(th.sock) as c:
        c.ok("drain", {"target": HOST, "reason": "x"})
        c.ok("drain", {"target": f"{HOST}:1", "reason": "x"})
        assert th.head is not None
        kept = th.head.watch.present_gpus()
        assert kept and all(isinstance(g, GpuFacts) for g in kept), kept
        assert [g.state for g in kept] == ["ok", "drained"]


def test_ping_reports_each_task_and_check_judges_it() -> None:
    now = [100.0]
    live = Liveness(clock=lambda: now[0])

    async def forever() -> None:
        await asyncio.Event().wait()

    async def scenario() -> None:
        writer = live.start("writer", forever())
        live.part("scheduler", within="writer")
        live.start("hosts", forever())
        now[0] += 31.0
        live.progress("writer")
        report = live.report()
        assert report["writer"] == {"alive": True, "idle_s": 0.0, "stale_after_s": 30.0}
        assert problems(report) == ["scheduler: no progress for 31 s (limit 30 s)"]
        live.progress("scheduler")
        assert problems(live.report()) == []
        writer.cancel()  # a task that ends while the head is not closing
        await asyncio.wait_for(live.dead.wait(), 5)
        assert live.died == "the writer task ended (it was cancelled)"
        assert problems(live.report()) == ["scheduler: dead", "writer: dead"]
        live.closing()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()

    asyncio.run(scenario())
    # A writer whose every batch fails with an internal error ends after 30 s of it.
    live = Liveness(clock=lambda: now[0])
    live.failed(internal=True)
    now[0] += 30.0
    live.failed(internal=False)  # the store's own failure: said to clients, not fatal
    live.failed(internal=True)
    live.committed()  # one commit starts the count again
    now[0] += 31.0
    live.failed(internal=True)
    now[0] += 31.0
    with pytest.raises(RuntimeError, match="every batch failed for 30 s"):
        live.failed(internal=True)
    assert problems({}) == ["the head does not report its tasks (a head older than this client?)"]
    assert problems({"w\x1b[31m": {"alive": True}}) == ["w: unreadable report"]


class UnheardRuns(ScriptedHosts):
    """Hosts whose runs start and end unheard: the launch's answer is lost, and the
    host's list then says the run came and went (its supervisor's state file)."""

    async def launch(self, spec: Launch) -> HostAnswer:
        self.launches.append(spec)
        self.runs[spec.host][spec.key] = HostJob(
            key=spec.key, state="exited", exit_code=0, started_at=1000.5, ended_at=1010.25
        )
        self._publish(spec.host)
        return HostAnswer(False, code="timeout", message="no answer from the host")


def test_a_job_that_ended_unheard_gets_its_start_from_the_supervisor(tmp_path: Path) -> None:
    hosts = UnheardRuns({HOST: 1})
    with ThreadedHead(tmp_path, {HOST: 1}, scripted=hosts) as th, LineClient(th.sock) as c:
        job_id = c.ok("submit", {"argv": ["train"], "gpus": 1})["job"]["id"]
        done = poll(
            lambda: (j := c.ok("show", {"job_id": job_id})["job"])["state"] == "completed" and j,
            what="the job completed",
        )
        assert (done["started_at"], done["ended_at"]) == (1000.5, 1010.25)


async def test_a_drain_in_a_batch_that_is_not_committed_leaves_no_trace_in_the_watch(
    tmp_path: Path, wait: Callable[..., Awaitable[Any]]
) -> None:
    """The watch's copy of the GPUs follows what is committed: a drain whose batch
    fails (here: the scheduling pass at its end raises once) is undone there too."""
    armed = [False]

    def flaky(view: model.ClusterView) -> model.Decisions:
        if armed[0]:
            armed[0] = False
            raise RuntimeError("a bug in the policy")
        return passes.decide(view)

    hosts = ScriptedHosts({HOST: 2})
    head = Head(
        SqlStore(open_store(tmp_path / "db" / "gputui.db")),
        hosts,
        HeadSettings(socket=tmp_path / "head.sock"),
        host_pools={HOST: "a100"},
        decide=flaky,
    )
    await head.start()
    client = await AsyncHeadClient.open_local(tmp_path / "head.sock")
    try:
        await wait(lambda: len(head.watch.present_gpus()) == 2, what="the head to see its GPUs")
        await client.call("submit", {"argv": ["one"], "gpus": 1})
        await wait(lambda: hosts.launches, what="the first job's launch")
        await client.call("submit", {"argv": ["two"], "gpus": 2})  # waits: each pass decides
        armed[0] = True
        with pytest.raises(HeadError) as refused:
            await client.call("drain", {"target": f"{HOST}:1", "reason": "fan"})
        assert refused.value.code == "internal"
        assert [g.drained for g in head.watch.present_gpus()] == [False, False]
        assert not any(s.drained for s in head.watch.slots())
        assert (await client.call("queue"))["unavailable"] == []
        drained = await client.call("drain", {"target": f"{HOST}:1", "reason": "fan"})
        assert drained["outcome"] == "drained"
        assert [g.drained for g in head.watch.present_gpus()] == [False, True]
    finally:
        await client.close()
        await head.close()
