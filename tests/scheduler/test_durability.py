"""What the head acknowledged survives ``kill -9``, and is stored exactly once.

A real ``gputui head`` process (its one host unreachable, so everything queues) is
fed by 16 client threads submitting jobs and queueing claims while the test
SIGKILLs it at random moments, 20 times, restarting it each time (on SQLite; 8
times on PostgreSQL, whose server lives on). After each kill a SQLite database
passes ``PRAGMA integrity_check``; after each restart every
acknowledged submission and claim is there, once. Requests resent with the same
request id (by the client's own retry, and by hand across a restart) get the
first answer and store nothing new.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from headkit import ScriptedHosts
from headthread import poll

from gputui.scheduler.client import HeadClient, HeadError
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.head.daemon import Head
from gputui.scheduler.head.settings import HeadSettings
from gputui.scheduler.policy import model, passes
from gputui.scheduler.store.engine import open_database
from gputui.scheduler.store.sqlstore import SqlStore

WaitFor = Callable[..., Awaitable[Any]]
CLIENTS = 16
KILLS = 20
KILLS_POSTGRES = 8
"""(The promise on PostgreSQL is synchronous commit's, not the file's: fewer kills.)"""


class HeadProcess:
    """``gputui head --hosts FILE`` as a child process, killed and restarted at will."""

    def __init__(self, tmp: Path, head: str = "", database: Path | str | None = None) -> None:
        """``head``: more lines of the ``head:`` section (each indented by two);
        ``database``: a PostgreSQL URL (else a SQLite file of its own)."""
        self.sock = tmp / "run" / "head.sock"
        self.db = tmp / "state" / "gputui.db" if database is None else database
        self.config = tmp / "hosts.yaml"
        self.config.write_text(
            "head:\n"
            f"  socket: {self.sock}\n"
            f"  database: {self.db}\n"
            f"{head}"
            "defaults:\n"
            "  ssh_config: null\n"
            "hosts:\n"
            "  - name: gone\n"  # nothing listens on port 1: every submission queues
            "    address: 127.0.0.1\n"
            "    port: 1\n"
        )
        self.log = tmp / "head.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gputui.entry", "head", "--hosts", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        poll(self._answers, timeout=30, what="gputui head to answer on its socket")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"gputui head exited: {self.log.read_text()[-2000:]}")
        try:
            with HeadClient(self.sock, timeout=5) as client:
                client.call("ping")
        except HeadError:
            return False
        return True

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if isinstance(self.db, str):  # PostgreSQL
            import psycopg
            from sqlalchemy.engine import make_url

            url = make_url(self.db)
            with psycopg.connect(
                host=str(url.query["host"]), user=url.username, dbname=url.database
            ) as pg:
                return [tuple(r) for r in pg.execute(sql.replace("?", "%s"), params).fetchall()]
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            return list(conn.execute(sql, params).fetchall())
        finally:
            conn.close()


@pytest.fixture
def head(tmp_path: Path, backend: str, database: Path | str) -> Iterator[HeadProcess]:
    process = HeadProcess(tmp_path, database=None if backend == "sqlite" else database)
    try:
        yield process
    finally:
        process.stop()


@dataclass
class Acks:
    """What the head acknowledged: marker -> id, for jobs (by name) and claims (by note)."""

    jobs: dict[str, int] = field(default_factory=dict)
    claims: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.jobs) + len(self.claims)


def client_thread(number: int, sock: Path, acks: Acks, stop: threading.Event) -> None:
    """Submit and claim until told to stop; keep what was acknowledged."""
    rng = random.Random(number)
    calls = 0
    while not stop.is_set():
        try:
            with HeadClient(sock, timeout=10) as client:
                while not stop.is_set():
                    calls += 1
                    marker = f"t{number}-{calls}"
                    if rng.random() < 0.25:
                        args = {"gpus": 1, "wait": True, "note": marker}
                        claim = client.call("claim", args)["claim"]
                        with acks.lock:
                            acks.claims[marker] = claim["id"]
                    else:
                        args = {"argv": ["train", marker], "name": marker}
                        job = client.call("submit", args)["job"]
                        with acks.lock:
                            acks.jobs[marker] = job["id"]
        except HeadError as exc:
            # The head went away (killed): not acknowledged; connect again shortly.
            assert exc.code in ("unreachable", "timeout"), (exc.code, exc.message)
            stop.wait(0.02)


def send_raw(sock: Path, request: dict[str, Any]) -> dict[str, Any]:
    """One request on a fresh connection, rid and all as given; its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(sock))
        conn.sendall(json.dumps(request).encode() + b"\n")
        answer: dict[str, Any] = json.loads(conn.makefile("rb").readline())
        return answer


def check_store(head: HeadProcess, acks: Acks, resent: dict[str, dict[str, Any]]) -> None:
    # What was acknowledged first, then the store: an answer comes only after its commit.
    with acks.lock:
        acked_jobs, acked_claims = dict(acks.jobs), dict(acks.claims)
    jobs = dict(head.rows("SELECT name, id FROM job"))
    claims = dict(head.rows("SELECT note, id FROM claim"))
    assert head.rows("SELECT name FROM job GROUP BY name HAVING count(*) > 1") == []
    assert head.rows("SELECT note FROM claim GROUP BY note HAVING count(*) > 1") == []
    lost_jobs = {m: i for m, i in acked_jobs.items() if jobs.get(m) != i}
    lost_claims = {m: i for m, i in acked_claims.items() if claims.get(m) != i}
    assert lost_jobs == {}, "acknowledged submissions lost"
    assert lost_claims == {}, "acknowledged claims lost"
    for marker, first in resent.items():
        assert jobs.get(marker) == first["result"]["job"]["id"]


@pytest.mark.timeout(360)  # some 30 s of CPU: on a loaded machine it needs more than 120 s
def test_acknowledged_work_survives_kill_9_exactly_once(head: HeadProcess) -> None:
    rng = random.Random(20)
    acks = Acks()
    resent: dict[str, dict[str, Any]] = {}
    head.start()
    stop = threading.Event()
    threads = [
        threading.Thread(target=client_thread, args=(n, head.sock, acks, stop), daemon=True)
        for n in range(CLIENTS)
    ]
    for thread in threads:
        thread.start()
    kills = KILLS if isinstance(head.db, Path) else KILLS_POSTGRES
    try:
        for round_ in range(kills):
            # The same request, by hand, before and after this round's kill.
            marker = f"resent-{round_}"
            request = {
                "id": 1,
                "op": "submit",
                "rid": marker,
                "args": {"argv": ["train"], "name": marker},
            }
            first = send_raw(head.sock, request)
            assert first["ok"] is True, first
            resent[marker] = first
            goal = acks.count() + rng.randint(5, 60)
            poll(lambda goal=goal: acks.count() >= goal, timeout=30, what="acknowledged work")
            head.kill()
            if isinstance(head.db, Path):
                done = head.rows("PRAGMA integrity_check")
                assert done == [("ok",)], done
            head.start()
            check_store(head, acks, resent)
            again = send_raw(head.sock, {**request, "id": 2})
            assert again == {**first, "id": 2}
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not any(t.is_alive() for t in threads)
    check_store(head, acks, resent)
    assert acks.count() >= kills * 5
    assert len(acks.claims) > 0 and len(acks.jobs) > 0
    log = head.log.read_text()
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


async def test_a_bug_met_by_one_batch_does_not_leave_the_head_deaf(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, wait: WaitFor, database: Path | str
) -> None:
    """Whatever escapes a batch (here: a policy that raises once) is rolled back,
    answered ``internal`` and logged; the writer goes on to the next batch."""
    broken = [True]

    def flaky(view: model.ClusterView) -> model.Decisions:
        if broken[0]:
            broken[0] = False
            raise RuntimeError("a bug in the policy")
        return passes.decide(view)

    hosts = ScriptedHosts({"gpu01": 2})
    head = Head(
        SqlStore(open_database(database)),
        hosts,
        HeadSettings(socket=tmp_path / "head.sock"),
        host_pools={"gpu01": "a100"},
        decide=flaky,
    )
    await head.start()
    client = await AsyncHeadClient.open_local(tmp_path / "head.sock")
    try:
        await wait(lambda: len(head.watch.present_gpus()) == 2, what="the head to see its GPUs")
        with pytest.raises(HeadError) as refused:
            await client.call("submit", {"argv": ["first"]})
        assert (refused.value.code, refused.value.message) == ("internal", "not stored")
        assert "internal error; 1 items not applied" in caplog.text
        job = (await client.call("submit", {"argv": ["second"]}))["job"]
        assert [j["name"] for j in (await client.call("queue"))["jobs"]] == ["second"]
        await wait(lambda: hosts.launches, what="the second job's launch")
        assert hosts.launches[0].job_id == job["id"]
    finally:
        await client.close()
        await head.close()


async def test_a_burst_shares_one_commit_and_each_answer_names_its_own_job(
    tmp_path: Path, database: Path | str
) -> None:
    """Forty submissions written at once are one batch (one commit, one multi-row
    insert); each answer carries the id of the job that request made."""
    sock = tmp_path / "head.sock"
    # Its one host has not answered yet: every job stays queued, nothing else commits.
    head = Head(
        SqlStore(open_database(database)),
        ScriptedHosts({}),
        HeadSettings(socket=sock),
        host_pools={"gpu01": "a100"},
    )
    await head.start()
    reader, writer = await asyncio.open_unix_connection(str(sock))
    try:
        before = head.batches
        names = [f"job-{n:02d}" for n in range(40)]
        writer.write(
            b"".join(
                json.dumps(
                    {"id": n, "op": "submit", "rid": name, "args": {"argv": ["t"], "name": name}}
                ).encode()
                + b"\n"
                for n, name in enumerate(names)
            )
        )
        answers = [json.loads(await reader.readline()) for _ in names]
        # One commit (two if the head's once-a-second tick fell in between), not 40.
        assert head.batches - before in (1, 2)
        made = {a["id"]: a["result"]["job"] for a in answers}
        assert [made[n]["name"] for n in range(40)] == names
        ids = [made[n]["id"] for n in range(40)]
        assert ids == sorted(ids) and len(set(ids)) == 40
        with head.store.snapshot() as tx:
            for n, job_id in enumerate(ids):
                job = tx.job(job_id)
                assert job is not None and job.name == names[n]
    finally:
        writer.close()
        await head.close()


async def test_a_wait_in_a_batch_that_fails_is_answered_once_and_not_kept(
    tmp_path: Path, wait: WaitFor, database: Path | str
) -> None:
    """A ``wait`` whose batch fails is answered 'internal' and forgotten: when the
    job ends later, only the wait sent again is answered."""
    broken = [False]

    def flaky(view: model.ClusterView) -> model.Decisions:
        if broken[0]:
            broken[0] = False
            raise RuntimeError("a bug in the policy")
        return passes.decide(view)

    hosts = ScriptedHosts({"gpu01": 2})
    sock = tmp_path / "head.sock"
    head = Head(
        SqlStore(open_database(database)),
        hosts,
        HeadSettings(socket=sock),
        host_pools={"gpu01": "a100"},
        decide=flaky,
    )
    await head.start()
    reader, writer = await asyncio.open_unix_connection(str(sock))

    async def send(request: dict[str, Any]) -> dict[str, Any]:
        writer.write(json.dumps(request).encode() + b"\n")
        return dict(json.loads(await asyncio.wait_for(reader.readline(), 10)))

    try:
        await wait(lambda: len(head.watch.present_gpus()) == 2, what="the head's GPUs")
        job = (await send({"id": 1, "op": "submit", "rid": "j", "args": {"argv": ["t"]}}))[
            "result"
        ]["job"]
        await wait(lambda: hosts.launches, what="the job's launch")
        # A job that waits for both GPUs: every batch now asks the policy.
        big = {"id": 5, "op": "submit", "rid": "b", "args": {"argv": ["t"], "gpus": 2}}
        assert (await send(big))["ok"] is True
        broken[0] = True
        first = await send({"id": 2, "op": "wait", "args": {"job_id": job["id"]}})
        assert first["ok"] is False and first["error"]["code"] == "internal"
        writer.write(json.dumps({"id": 3, "op": "wait", "args": {"job_id": job["id"]}}).encode())
        writer.write(b"\n")
        await wait(lambda: any(head.batch.waits.values()), what="the second wait registered")
        hosts.finish("gpu01", hosts.launches[0].key, exit_code=0)
        answer = json.loads(await asyncio.wait_for(reader.readline(), 10))
        assert answer["id"] == 3 and answer["result"]["job"]["state"] == "completed"
        assert head.batch.waits == {}
        # Nothing more comes for request 2.
        writer.write(b'{"id": 4, "op": "ping", "args": {}}\n')
        assert json.loads(await asyncio.wait_for(reader.readline(), 10))["id"] == 4
    finally:
        writer.close()
        await head.close()
