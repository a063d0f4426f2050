"""Interactive jobs on the host: the real helper forwarding a real supervisor's pty.

A slow client holds back only what is sent to it, never the job; what it was too slow
to take is skipped, and said. Bad input on the terminal's socket drops that client,
never the job. The ring keeps exactly the newest bytes.
"""

from __future__ import annotations

import base64
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobkit import SPEC, Jobs, kill_jobs, script, wait_until

from gputui.remote.ptyterm import PTY_SOCK, RING_MAX, WINDOW, Ring


@pytest.fixture
def jobs_root(tmp_path: Path) -> Any:
    root = tmp_path / "jobs"
    yield root
    kill_jobs(root)


@pytest.fixture
def jobs(start_helper: Callable[..., Any], jobs_root: Path) -> Jobs:
    env = dict(os.environ, GPUTUI_JOBS_ROOT=str(jobs_root))
    helper = start_helper(["--sim", SPEC, "--interval", "0.5"], env)
    helper.hello = helper.expect(lambda m: m["type"] == "hello")
    return Jobs(helper)


def _pty(aid: int, kind: str | None = None) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["type"] == "pty" and m["aid"] == aid and kind in (None, m["kind"])


def _data(message: dict[str, Any]) -> bytes:
    return base64.b64decode(message["data"])


def test_a_slow_client_holds_back_what_it_is_sent_never_the_job(jobs: Jobs, tmp_path: Path) -> None:
    done = tmp_path / "done"
    body = (
        "sys.stdout.write('a' * 200000); sys.stdout.flush()\n"
        "sys.stdin.readline()\n"
        "sys.stdout.write('b' * 1000000 + 'DONE'); sys.stdout.flush()\n"
        f"open({str(done)!r}, 'w').close()\n"
        "sys.stdin.readline()\n"
    )
    launched = jobs.call("launch", job_id=1, argv=script(body), env={}, pty=True)
    assert launched["ok"], launched
    helper = jobs.helper
    log = Path(launched["value"]["log_path"])
    wait_until(lambda: log.exists() and log.stat().st_size >= 200000, what="the first output")
    before = len(helper.seen)
    assert jobs.call("pty_open", job_id=1, aid=7, rows=24, cols=80)["ok"]
    # Output may come before the answer (the forwarding starts first): read it too.
    early = [m for m in helper.seen[before:] if _pty(7, "out")(m)]
    got = 0
    while got < WINDOW:  # the ring's newest 64 KiB: a full window, and no ack
        message = early.pop(0) if early else helper.expect(_pty(7, "out"))
        assert message["at"] == 200000 - RING_MAX + got
        got += len(_data(message))
    assert got == WINDOW
    # The job goes on writing a megabyte while nothing more may be sent: it never waits.
    helper.send({"type": "request", "id": 1, "op": "pty_send", "aid": 7, "data": "Z28K"})
    wait_until(done.exists, timeout=20, what="the job to write past the window")
    assert not any(m["type"] == "pty" and m.get("kind") == "out" for m in _drain(helper))
    # Shown at last: what was overwritten meanwhile is skipped, and said; then the rest.
    send = {"type": "request", "id": 2, "op": "pty_send", "aid": 7, "ack": 200000}
    helper.send(send)
    first = helper.expect(_pty(7, "out"))
    assert first["skipped"] > 900000 and first["at"] == 200000 + first["skipped"]
    seen, at = _data(first), first["at"] + len(_data(first))
    while b"DONE" not in seen:
        helper.send({"type": "request", "id": 3, "op": "pty_send", "aid": 7, "ack": at})
        message = helper.expect(_pty(7, "out"))
        assert message["at"] == at and "skipped" not in message
        seen += _data(message)
        at += len(_data(message))
    assert seen.endswith(b"DONE")


def _drain(helper: Any) -> list[dict[str, Any]]:
    """The messages already read from the helper (without waiting for more)."""
    out = []
    while not helper.lines.empty():
        message = helper.lines.get_nowait()
        if message is not None:
            out.append(message)
    return out


def test_terminal_requests_are_checked_and_refused_in_one_line(jobs: Jobs) -> None:
    assert jobs.call("launch", job_id=2, argv=script("time.sleep(60)"), env={})["ok"]
    jobs.wait_state(2, "running")
    plain = jobs.call("pty_open", job_id=2, aid=1)
    assert (plain["code"], plain["error"]) == (
        "no-terminal",
        "job 2 is not interactive (no --pty)",
    )
    assert jobs.call("pty_open", job_id=99, aid=1)["code"] == "unknown-job"
    for fields in ({"aid": 0}, {"aid": True}, {"aid": 1, "rows": 0}, {"aid": 1, "cols": 10**6}):
        answer = jobs.call("pty_open", job_id=2, **fields)
        assert answer["code"] == "bad-request" and "\n" not in answer["error"], answer
    assert jobs.call("pty_send", aid=5, data="aGk=")["code"] == "no-terminal"
    assert jobs.call("pty_close", aid=5)["value"] == {"aid": 5, "closed": False}


def test_the_job_ends_with_its_shell_and_the_attached_client_hears_how(jobs: Jobs) -> None:
    launched = jobs.call("launch", job_id=3, argv=["sh", "-i"], env={}, pty=True)
    assert launched["ok"], launched
    helper = jobs.helper
    assert jobs.call("pty_open", job_id=3, aid=9, rows=24, cols=80)["ok"]
    text = base64.b64encode(b"echo $((6*7)); exit 5\n").decode()
    helper.send({"type": "request", "id": 1, "op": "pty_send", "aid": 9, "data": text})
    ended = helper.expect(_pty(9, "end"), timeout=20)
    assert (ended["exit_code"], ended["signal"], ended["why"]) == (5, None, None)
    assert b"42" in b"".join(_data(m) for m in helper.seen if _pty(9, "out")(m))
    assert jobs.wait_state(3, "exited")["exit_code"] == 5


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=4))
def test_junk_on_the_terminal_socket_drops_that_client_never_the_job(
    jobs: Jobs, junk: list[bytes]
) -> None:
    job = _shell_job(jobs)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(job)
        for chunk in junk:
            try:
                sock.sendall(chunk + b"\n")
            except OSError:
                break  # dropped already: what the test wants
    # The job is there, and a proper client is served by it.
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(job)
        sock.settimeout(10)
        line = json.dumps({"k": "in", "d": base64.b64encode(b"echo ok$((1+1))\n").decode()})
        sock.sendall(line.encode() + b"\n")
        seen = b""
        reader = sock.makefile("rb")
        while b"ok2" not in seen:
            message = json.loads(reader.readline())
            if message["k"] == "out":
                seen += base64.b64decode(message["d"])
                sock.sendall(json.dumps({"k": "ack", "at": message["at"]}).encode() + b"\n")


_SHELLS: dict[int, str] = {}


def _shell_job(jobs: Jobs) -> str:
    """One interactive shell per helper, shared by a test's examples: its socket."""
    key = id(jobs)
    if key not in _SHELLS:
        launched = jobs.call("launch", job_id=4, argv=["sh", "-i"], env={}, pty=True)
        assert launched["ok"], launched
        _SHELLS[key] = str(Path(launched["value"]["log_path"]).parent / PTY_SOCK)
    return _SHELLS[key]


@given(
    cap=st.integers(min_value=1, max_value=64),
    chunks=st.lists(st.binary(max_size=100), max_size=30),
    at=st.integers(min_value=0, max_value=3000),
    limit=st.integers(min_value=0, max_value=100),
)
def test_the_ring_keeps_exactly_the_newest_bytes(
    cap: int, chunks: list[bytes], at: int, limit: int
) -> None:
    ring = Ring(cap)
    for chunk in chunks:
        ring.add(chunk)
    stream = b"".join(chunks)
    assert ring.end == len(stream)
    assert bytes(ring.buf) == stream[max(0, len(stream) - cap) :]
    assert ring.start == max(0, len(stream) - cap)
    start, data = ring.since(at, limit)
    assert start == max(at, ring.start)
    assert data == stream[start : start + limit]


def test_input_a_job_does_not_read_is_refused_past_a_bound_without_holding_the_helper(
    jobs: Jobs,
) -> None:
    launched = jobs.call("launch", job_id=5, argv=script("time.sleep(120)"), env={}, pty=True)
    assert launched["ok"], launched
    assert jobs.call("pty_open", job_id=5, aid=3)["ok"]
    chunk = base64.b64encode(b"y" * 49152).decode()
    ids = [jobs.send("pty_send", aid=3, data=chunk) for _ in range(60)]  # ~3 MiB
    results = jobs.results(ids, timeout=20)  # every one answered: none waits on the job
    codes = [r["code"] for r in results]
    assert codes[0] is None and "busy" in codes, codes
    first = codes.index("busy")
    assert "not read" in results[first]["error"] and "dropped" in results[first]["error"]
    # The helper samples on, and the terminal is still there to detach from.
    jobs.helper.expect(lambda m: m["type"] == "sample")
    assert jobs.call("pty_close", aid=3)["value"] == {"aid": 3, "closed": True}
