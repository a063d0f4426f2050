"""Two real ``gputui head`` processes on one real PostgreSQL database: one leads,
the other waits as standby, and takes over when the leader dies.

Each head runs its own helper for the one simulated host (``local: true``), and
every job is a real process under the helper's detached supervisor, which
records each start of its job in a file of the test's own. A client submits all
along, trying the heads in order (as a console does with ``head.host`` listing
both) and sending a request again to the next head with the same request id
until one acknowledges it. The leader is then SIGKILLed (or SIGSTOPped and
resumed once the standby has taken over).
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headthread import poll
from pgserver import PgServer

LEASE_S = 1.5
TICK_S = LEASE_S / 3
SIM = "4xa100-80gb,name=sim01"
RUNNING = (
    "import os, pathlib, sys, time\n"
    "with open(sys.argv[2], 'a') as f: f.write(f'{os.getpid()}\\n')\n"
    "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"
)
"""A job that records its start, then runs until the gate file exists."""


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg
    from sqlalchemy.engine import make_url

    parts = make_url(url)
    with psycopg.connect(
        host=str(parts.query["host"]), user=parts.username, dbname=parts.database
    ) as pg:
        return [tuple(r) for r in pg.execute(sql, params or None).fetchall()]


def lease(url: str) -> tuple[int, str]:
    found = rows(url, "SELECT epoch, holder FROM head_lease WHERE id = 1")
    return (int(found[0][0]), str(found[0][1])) if found else (0, "")


def ask(sock: Path, op: str, args: dict[str, Any], rid: str | None = None) -> dict[str, Any]:
    """One request on a fresh connection; the answer (``OSError`` when no head
    answers there)."""
    request: dict[str, Any] = {"id": 1, "op": op, "args": args}
    if rid is not None:
        request["rid"] = rid
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(sock))
        conn.sendall(json.dumps(request).encode() + b"\n")
        line = conn.makefile("rb").readline()
    if not line:
        raise ConnectionError("the head closed the connection")
    answer: dict[str, Any] = json.loads(line)
    return answer


class HeadProcess:
    """``gputui head`` with a socket of its own on the shared database."""

    def __init__(self, tmp: Path, name: str, url: str) -> None:
        self.name = name
        self.sock = tmp / f"{name}.sock"
        self.log = tmp / f"{name}.log"
        self.config = tmp / f"{name}.yaml"
        host = {"name": "sim01", "local": True, "pool": "sim", "sim": SIM}
        head = {"socket": str(self.sock), "database": url, "lease_s": LEASE_S}
        data = {"refresh_interval": 0.5, "hosts": [host], "head": head}
        self.config.write_text(json.dumps(data))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gputui", "head", "-v", "--hosts", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )

    @property
    def holder(self) -> str:
        """How the lease names this head (``host:pid:pidns:token``), as it said."""
        assert self.process is not None
        found = re.search(r"this head is (\S+) in the lease", self.log.read_text(errors="replace"))
        assert found is not None, "the head has not said its name"
        assert found[1].startswith(f"{socket.gethostname()}:{self.process.pid}:")
        return found[1]

    def said(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def serving(self) -> bool:
        """Whether it answers on its socket with its host live."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
        try:
            answer = ask(self.sock, "cluster", {})
            assert "result" in answer, answer
            hosts = answer["result"]["hosts"]
        except (OSError, ValueError):
            return False
        return any(h["live"] for h in hosts.values())

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


class Submitter:
    """Submits jobs all along, trying the heads in order, and sending each request
    again (same request id) to the next head until one acknowledges it."""

    def __init__(self, socks: list[Path], tmp: Path) -> None:
        self.socks = socks
        self.tmp = tmp
        self.acked: dict[str, int] = {}
        self.odd: list[dict[str, Any]] = []
        """Refusals other than a fenced head's (none expected)."""
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def _run(self) -> None:
        n = 0
        at = 0
        while not self.stop.is_set():
            n += 1
            marker = f"sub-{n}"
            args = {
                "argv": [sys.executable, "-c", "pass"],
                "name": marker,
                "gpus": 4,  # waits behind the running jobs: stays queued
                "cwd": "/",
            }
            while not self.stop.is_set():
                try:
                    answer = ask(self.socks[at], "submit", args, rid=marker)
                except (OSError, ValueError):
                    at = (at + 1) % len(self.socks)  # the next head
                    self.stop.wait(0.02)
                    continue
                if answer.get("ok"):
                    with self.lock:
                        self.acked[marker] = answer["result"]["job"]["id"]
                    break
                if answer["error"]["code"] != "store":  # else: a head that lost its lease
                    self.odd.append(answer)
                at = (at + 1) % len(self.socks)

    def __enter__(self) -> Submitter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        assert self.odd == []


@pytest.fixture
def pair(
    tmp_path: Path, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[HeadProcess, HeadProcess, str]]:
    """A leader that serves, and a standby that waits for its lease."""
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))  # both heads' helpers
    url = pg_server.database()
    a, b = HeadProcess(tmp_path, "a", url), HeadProcess(tmp_path, "b", url)
    gate = tmp_path / "go"
    try:
        a.start()
        poll(a.serving, timeout=40, what="the first head to serve")
        b.start()
        poll(
            lambda: b.said(f"standby: waiting for the lease held by {a.holder}"),
            timeout=40,
            what="the second head to wait as standby",
        )
        assert not b.sock.exists(), "a standby does not serve its socket"
        yield a, b, url
    finally:
        gate.touch()  # every job the test started ends by itself
        a.stop()
        b.stop()


def start_jobs(sock: Path, tmp: Path, count: int) -> list[int]:
    ids = []
    for n in range(count):
        argv = [sys.executable, "-c", RUNNING, str(tmp / "go"), str(tmp / f"started-{n}")]
        answer = ask(sock, "submit", {"argv": argv, "gpus": 1, "cwd": "/"}, rid=f"run-{n}")
        ids.append(answer["result"]["job"]["id"])
    return ids


def running(sock: Path, job_id: int) -> dict[str, Any] | None:
    try:
        view: dict[str, Any] = ask(sock, "show", {"job_id": job_id})["result"]["job"]
    except (OSError, ValueError):
        return None
    return view if view["state"] == "running" and view.get("pid") else None


def check_exactly_once(url: str, acked: dict[str, int]) -> None:
    stored = dict(rows(url, "SELECT name, id FROM job WHERE name LIKE 'sub-%%'"))
    twice = rows(
        url, "SELECT name FROM job WHERE name LIKE 'sub-%%' GROUP BY name HAVING count(*) > 1"
    )
    assert twice == [], "a submission stored twice"
    lost = {m: i for m, i in acked.items() if stored.get(m) != i}
    assert lost == {}, "acknowledged submissions lost"


def test_the_standby_takes_over_a_killed_leader_within_the_lease_and_loses_nothing(
    pair: tuple[HeadProcess, HeadProcess, str], tmp_path: Path
) -> None:
    a, b, url = pair
    epoch, holder = lease(url)
    assert holder == a.holder
    jobs = start_jobs(a.sock, tmp_path, 2)
    before = {j: poll(lambda j=j: running(a.sock, j), what="a job to run") for j in jobs}
    with Submitter([a.sock, b.sock], tmp_path) as submitter:
        poll(lambda: submitter.count() >= 10, timeout=30, what="submissions acknowledged")
        a.signal(signal.SIGKILL)
        killed = time.monotonic()
        taken = poll(lambda: lease(url)[1] == b.holder, timeout=LEASE_S * 4, what="takeover")
        took_s = time.monotonic() - killed
        assert taken
        # The bound: the lease, then the standby's next look (a tick), plus what a
        # loaded machine adds to a poll.
        assert took_s <= LEASE_S + TICK_S + 1.0, f"took over after {took_s:.2f} s"
        assert lease(url)[0] == epoch + 1
        poll(b.serving, timeout=30, what="the new leader to serve")
        goal = submitter.count() + 10
        poll(lambda: submitter.count() >= goal, timeout=30, what="submissions to the new leader")
    check_exactly_once(url, submitter.acked)
    # The running jobs were re-attached, not launched again: same pid, one start each.
    for job_id, first in before.items():
        view = poll(lambda j=job_id: running(b.sock, j), what="the job re-attached")
        assert view["pid"] == first["pid"] and view["launches"] == 1
    (tmp_path / "go").touch()
    for job_id in jobs:
        poll(lambda j=job_id: ask(b.sock, "show", {"job_id": j})["result"]["job"]["state"]
             == "completed", timeout=30, what="the re-attached job to end")  # fmt: skip
    for n in range(len(jobs)):
        assert len((tmp_path / f"started-{n}").read_text().split()) == 1, "launched twice"
    assert rows(url, "SELECT count(*) FROM job WHERE launches > 1") == [(0,)]
    assert "Traceback" not in b.log.read_text()


def test_a_paused_leader_resumed_after_the_takeover_writes_nothing_and_stops(
    pair: tuple[HeadProcess, HeadProcess, str], tmp_path: Path
) -> None:
    a, b, url = pair
    epoch, _ = lease(url)
    [job_id] = start_jobs(a.sock, tmp_path, 1)
    first = poll(lambda: running(a.sock, job_id), what="the job to run")
    a.signal(signal.SIGSTOP)
    poll(lambda: lease(url)[1] == b.holder, timeout=LEASE_S * 4, what="the takeover")
    poll(b.serving, timeout=30, what="the new leader to serve")
    assert lease(url) == (epoch + 1, b.holder)
    # A request waits in the paused head's socket; it must not be stored when it wakes.
    late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    late.settimeout(20)
    late.connect(str(a.sock))
    request = {"id": 1, "op": "submit", "rid": "late", "args": {"argv": ["t"], "name": "late"}}
    late.sendall(json.dumps(request).encode() + b"\n")
    a.signal(signal.SIGCONT)
    answer = late.makefile("rb").readline()
    late.close()
    assert a.process is not None
    code = a.process.wait(30)
    assert code == 1, a.log.read_text()[-2000:]
    assert a.said(f"lost the lease to {b.holder} (epoch {epoch + 1}): stopped writing")
    if answer:  # refused (not stored), or the connection closed as the head stopped
        assert json.loads(answer)["ok"] is False, answer
    assert rows(url, "SELECT id FROM job WHERE name = 'late'") == []
    assert lease(url) == (epoch + 1, b.holder)
    view = poll(lambda: running(b.sock, job_id), what="the job re-attached")
    assert view["pid"] == first["pid"] and view["launches"] == 1
    (tmp_path / "go").touch()
    poll(lambda: ask(b.sock, "show", {"job_id": job_id})["result"]["job"]["state"]
         == "completed", timeout=30, what="the job to end")  # fmt: skip
    assert len((tmp_path / "started-0").read_text().split()) == 1, "launched twice"


def test_a_leader_stopped_cleanly_lets_the_standby_take_over_at_its_next_look(
    pair: tuple[HeadProcess, HeadProcess, str],
) -> None:
    """SIGTERM (``systemctl stop``): the leader lets its lease go as it stops, so the
    standby need not wait the lease out (it is still there to be waited: a zombie)."""
    a, b, url = pair
    epoch, _ = lease(url)
    a.signal(signal.SIGTERM)
    stopped = time.monotonic()
    poll(lambda: lease(url)[1] == b.holder, timeout=LEASE_S * 4, what="the takeover")
    took_s = time.monotonic() - stopped
    assert took_s < LEASE_S, f"took over after {took_s:.2f} s: the lease was waited out"
    assert lease(url)[0] == epoch + 1
    poll(b.serving, timeout=30, what="the new leader to serve")
    assert a.process is not None and a.process.wait(10) == 0
    assert a.said("stopped; running jobs go on running")


def tables(url: str) -> set[str]:
    found = rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {str(r[0]) for r in found}


def test_a_standby_leaves_the_schema_alone_and_the_leader_migrates_it(
    tmp_path: Path, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head starting on a database with no schema while another holds the lease:
    it waits without migrating (only the leader migrates, once it leads), then takes
    the lease, migrates and serves."""
    from gputui.scheduler.store.engine import make_engine
    from gputui.scheduler.store.lease import HeadLease

    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    url = pg_server.database(migrated=False)
    engine = make_engine(url)
    other = HeadLease(engine, "elsewhere:7:1:0b7e", 300.0)
    epoch = other.take()  # makes the lease's table, nothing else
    assert epoch is not None and tables(url) == {"head_lease"}
    b = HeadProcess(tmp_path, "b", url)
    try:
        b.start()
        poll(
            lambda: b.said("standby: waiting for the lease held by elsewhere:7:1:0b7e"),
            timeout=40,
            what="the head to wait as standby",
        )
        assert tables(url) == {"head_lease"}, "a standby migrated the database"
        other.release(epoch)
        poll(b.serving, timeout=40, what="the head to lead and serve")
        assert rows(url, "SELECT count(*) FROM alembic_version") == [(1,)]
        assert lease(url) == (epoch + 1, b.holder)
    finally:
        b.stop()
        other.close()
        engine.dispose()


def test_a_sqlite_url_is_served_without_a_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which database it is, the engine's dialect says: a ``sqlite://`` URL is a file
    of this head's own, with no lease to wait for."""
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    (tmp_path / "db").mkdir(mode=0o700)
    head = HeadProcess(tmp_path, "s", f"sqlite:///{tmp_path / 'db' / 'head.db'}")
    try:
        head.start()
        poll(head.serving, timeout=40, what="the head to serve")
        assert not head.said("in the lease") and not head.said("standby")
        assert (tmp_path / "db" / "head.db").stat().st_mode & 0o077 == 0
    finally:
        head.stop()
