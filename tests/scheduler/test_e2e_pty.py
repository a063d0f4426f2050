"""Interactive jobs end to end: ``gputui run --pty`` and ``gputui attach`` through a real
pty, against a real head (``gputui head``, a process of its own) and the simulated GPU
host over real SSH. The job is a real ``bash`` on a terminal its supervisor keeps.

Nothing waits by sleeping: each step reads the client's terminal until the bytes it
expects arrive, with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import signal
import struct
import sys
import tempfile
import termios
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from realusers import as_user, made_users
from test_e2e_jobs import GPUTUI, Cluster, job, until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "remote"))
from jobkit import kill_jobs

BASH = ["bash", "--norc", "--noprofile", "-i"]
DEADLINE_S = 60.0
"""How long a step may take before the test fails (a deadline, never a wait: the
suite runs in parallel on small machines, where starting a job can take a while)."""


class Term:
    """A gputui CLI process on the slave side of a fresh pty; the test holds the master."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int, cooked: list[Any]) -> None:
        self.proc = proc
        self.master = master
        self.seen = bytearray()
        self.cooked = cooked
        """The terminal's modes before the client started."""

    @classmethod
    async def start(
        cls, env: dict[str, str], *argv: str, rows: int = 30, cols: int = 100, ahead: bytes = b""
    ) -> Term:
        """The client on a fresh terminal, where ``ahead`` was typed before it started."""
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        cooked = termios.tcgetattr(slave)
        if ahead:
            os.write(master, ahead)
        os.set_blocking(master, False)
        proc = await asyncio.create_subprocess_exec(
            *GPUTUI, *argv, stdin=slave, stdout=slave, stderr=slave, env=env,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        return cls(proc, master, cooked)

    def _take(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except (BlockingIOError, OSError):  # EIO: the client closed its side
                return
            if not chunk:
                return
            self.seen += chunk

    async def read_until(self, expected: bytes, timeout: float = DEADLINE_S) -> bytes:
        """Everything read so far once it holds ``expected`` (kept, for the next)."""
        deadline = time.monotonic() + timeout
        while True:
            self._take()
            if expected in self.seen:
                return bytes(self.seen)
            if time.monotonic() > deadline:
                raise AssertionError(f"{expected!r} not seen in {timeout} s: {bytes(self.seen)!r}")
            await asyncio.sleep(0.02)

    def resize(self, rows: int, cols: int) -> None:
        """The window changes size: the terminal says so, and its program is told."""
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc.send_signal(signal.SIGWINCH)

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    async def exit_code(self, timeout: float = DEADLINE_S) -> int:
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        self._take()
        return code

    def close(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        os.close(self.master)


@pytest.fixture
async def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    # Reachable by a second user (its socket's directory), as a head's is.
    tmp = Path(tempfile.mkdtemp(prefix="gputui-pty-", dir="/tmp"))
    tmp.chmod(0o755)
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp / "jobs"))
    c = Cluster(tmp, "ssh")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()
        kill_jobs(tmp / "jobs")  # a shell a failed test left (it is no process of tmp's)
        shutil.rmtree(tmp, ignore_errors=True)


def _env(cluster: Cluster) -> dict[str, str]:
    return dict(os.environ, GPUTUI_HEAD_SOCKET=str(cluster.sock), TERM="dumb")


def _job_id(seen: bytes) -> int:
    found = re.search(rb"attached to job (\d+)", seen)
    assert found is not None, seen
    return int(found.group(1))


async def _start(cluster: Cluster, **jobs: Any) -> Any:
    if jobs:
        cluster._data["jobs"] = jobs
    return await cluster.start_process()


async def _until_size(term: Term, size: bytes) -> None:
    """Ask the job's terminal its size until it says ``size`` (a new size reaches the
    job on its own way, not always before keys typed right after it), with a deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        term.type(b"stty size\n")
        try:
            await term.read_until(size, timeout=2.0)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


async def test_run_pty_types_into_the_job_detaches_reattaches_and_ends_with_the_shell(
    cluster: Cluster,
) -> None:
    client = await _start(cluster)
    env = _env(cluster)
    # Typed before the client started, let alone the job: the keys wait for the shell.
    ahead = b"echo hi$((1+1))\n"
    term = await Term.start(env, "run", "--pty", "-g", "1", "--", *BASH, ahead=ahead)
    try:
        job_id = _job_id(await term.read_until(b"Ctrl-] d detaches"))
        await term.read_until(b"hi2")
        term.type(b'echo "[$TERM]"\n')  # the client's terminal type is the job's
        await term.read_until(b"[dumb]")
        term.type(b"stty size\n")  # the client's window size reached the job's terminal
        await term.read_until(b"30 100")
        term.resize(50, 132)  # and so does a new one (SIGWINCH)
        await _until_size(term, b"50 132")
        term.type(b"\x1dd")  # Ctrl-] d
        assert await term.exit_code() == 0
        assert b"detached from job" in term.seen
        view = await job(client, job_id)
        assert view["state"] == "running" and view["interactive"] is True
    finally:
        term.close()
    # Back again, in a window of another size: the scrollback first, then the shell.
    again = await Term.start(env, "attach", str(job_id), rows=40, cols=120)
    try:
        seen = await again.read_until(b"hi2")
        assert b"echo hi$((1+1))" in seen
        again.type(b"stty size\n")
        await again.read_until(b"40 120")
        again.type(b"exit 3\n")
        assert await again.exit_code() == 3
        assert b"ended with exit code 3" in again.seen
    finally:
        again.close()

    async def ended() -> dict[str, Any] | None:
        view = await job(client, job_id)
        return view if view["state"] == "failed" else None

    view = await until(ended)
    assert view["exit_code"] == 3
    log = await client.call("logs", {"job_id": job_id})
    assert "hi2" in log["data"]  # the terminal's output is the job's log too


async def test_an_idle_interactive_job_is_ended_with_its_reason(cluster: Cluster) -> None:
    client = await _start(cluster, interactive_idle="2s")
    term = await Term.start(_env(cluster), "run", "--pty", "-g", "1", "--", *BASH)
    try:
        job_id = _job_id(await term.read_until(b"Ctrl-] d detaches"))
        started = time.monotonic()
        code = await term.exit_code()
        assert time.monotonic() - started >= 1.5  # not before its idle limit
        assert code == 128 + signal.SIGHUP
        assert b"at its idle limit" in term.seen
    finally:
        term.close()

    async def ended() -> dict[str, Any] | None:
        view = await job(client, job_id)
        return view if view["state"] == "timeout" else None

    view = await until(ended)
    assert "idle limit" in view["reason"] and "2 s" in view["reason"]


def _attach(path: str, job_id: int) -> str:
    """Attach to ``job_id`` on a connection of its own: ``attached``, or the refusal."""
    import socket

    from gputui.scheduler.client.errors import HeadError
    from gputui.scheduler.client.terminal import TerminalLink

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    try:
        TerminalLink(sock).attach(job_id, 24, 80)
    except HeadError as exc:
        return f"{exc.code}: {exc.message}"
    finally:
        sock.close()
    return "attached"


def _own_terminal(path: str) -> tuple[int, str]:
    """As another user: submit an interactive job of one's own, wait for it, attach."""
    from gputui.scheduler.client.sync import HeadClient

    with HeadClient(path) as client:
        job_id = int(client.call("submit", {"argv": BASH, "cwd": "/", "pty": True})["job"]["id"])
        deadline = time.monotonic() + 30
        while client.call("show", {"job_id": job_id})["job"]["state"] != "running":
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.05)
    return job_id, _attach(path, job_id)


@pytest.mark.root  # real Unix users (useradd): in the privileged tests' worker
async def test_only_the_owner_or_an_admin_attaches_and_an_admin_is_audited(
    cluster: Cluster,
) -> None:
    cluster.head_options["kill_grace_s"] = 3600  # a kill must not need SIGKILL (below)
    client = await _start(cluster)
    path = str(cluster.sock)
    submitted = await client.call("submit", {"argv": BASH, "gpus": 1, "cwd": "/", "pty": True})
    job_id = submitted["job"]["id"]

    async def running() -> bool:
        return (await job(client, job_id))["state"] == "running"

    await until(running)
    with made_users(1) as (other,):
        # (In threads: this loop serves the simulated host's SSH.)
        ran = await asyncio.to_thread(as_user, other, _attach, path, job_id, env={})
        assert ran.value == f"denied: job {job_id} belongs to root"
        theirs = await asyncio.to_thread(as_user, other, _own_terminal, path, env={})
        their_job, outcome = theirs.value
        assert outcome == "attached"  # the owner is let in
        # An admin (root) is let in too, and that is on the record, for the owner to see.
        assert await asyncio.to_thread(_attach, path, their_job) == "attached"
        rows = (await client.call("audit"))["rows"]
        row = next(r for r in rows if r["action"] == "attach")
        assert (row["target"], row["owner"], row["user"]) == (
            f"job {their_job}",
            other.name,
            "root",
        )
        await client.call("kill", {"job_id": their_job, "reason": "test over"})
    assert await asyncio.to_thread(_attach, path, job_id) == "attached"  # root's own: no row
    assert len([r for r in (await client.call("audit"))["rows"] if r["action"] == "attach"]) == 1
    # A job without a terminal has nothing to attach to.
    plain = await client.call("submit", {"argv": [sys.executable, "-c", "pass"], "cwd": "/"})
    refused = await asyncio.to_thread(_attach, path, plain["job"]["id"])
    assert refused.startswith(("no-terminal:", "not-running:")), refused
    # A kill ends the shell at once: it gets SIGHUP too (it ignores SIGTERM).
    await client.call("kill", {"job_id": job_id})

    async def killed() -> bool:
        return (await job(client, job_id))["state"] == "killed"

    await until(killed, timeout=30)


async def test_a_head_that_goes_away_leaves_the_job_to_attach_to_again(cluster: Cluster) -> None:
    await _start(cluster)
    env = _env(cluster)
    term = await Term.start(env, "run", "--pty", "-g", "1", "--", *BASH)
    try:
        job_id = _job_id(await term.read_until(b"Ctrl-] d detaches"))
        term.type(b"echo before$((2+3))\n")
        await term.read_until(b"before5")
        await cluster.kill_process()  # kill -9 of the head, with the client attached
        assert await term.exit_code() == 3
        assert f"goes on: gputui attach {job_id}".encode() in term.seen
    finally:
        term.close()
    client = await cluster.start_process()

    async def running() -> bool:
        return (await job(client, job_id))["state"] == "running"

    await until(running)  # read back from its host, not started again
    # The window closes (SIGHUP): the client leaves its terminal as it found it.
    closing = await Term.start(env, "attach", str(job_id))
    try:
        await closing.read_until(b"before5")  # the scrollback, kept on the host
        assert termios.tcgetattr(closing.master) != closing.cooked  # raw while attached
        closing.proc.send_signal(signal.SIGHUP)
        assert await closing.exit_code() == 128 + signal.SIGHUP
        assert termios.tcgetattr(closing.master) == closing.cooked
    finally:
        closing.close()
    again = await Term.start(env, "attach", str(job_id))
    try:
        await again.read_until(b"before5")
        again.type(b"exit\n")
        assert await again.exit_code() == 0
    finally:
        again.close()
