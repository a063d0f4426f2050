"""The CLI as a new user meets it on a real head: ``--user`` with a typo, an empty
list, ``whoami --json``, ``show`` in words a person reads, and ``gputui run``
interrupted while it waits. Real Unix users where the users matter."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import LineClient, ThreadedHead, poll
from realusers import User, add_user, need_root, remove_user

from gputui.cli import verbs
from gputui.cli.run import _wait_for_grant
from gputui.scheduler.client.session import HeadSession
from gputui.scheduler.client.sync import HeadClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def th(tmp_path: Path) -> Iterator[ThreadedHead]:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as head:
        yield head
        assert head.problems == []


@pytest.fixture
def newcomer() -> Iterator[User]:
    """A real account that has never asked the head for anything."""
    need_root()
    user = add_user("gtn")
    try:
        yield user
    finally:
        remove_user(user.name)


def cli(th: ThreadedHead, *argv: str) -> list[str]:
    return ["--socket", str(th.sock), *argv]


@pytest.mark.parametrize("verb", ["queue", "claims"])
def test_a_user_that_does_not_exist_is_a_usage_error(
    th: ThreadedHead, verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert verbs.main(cli(th, verb, "--user", "nosuchuser")) == 2
    done = capsys.readouterr()
    assert done.err == f"gputui {verb}: no such user: nosuchuser\n" and done.out == ""


@pytest.mark.parametrize(("verb", "noun"), [("queue", "jobs"), ("claims", "claims")])
def test_a_real_user_with_nothing_gets_the_table_and_a_line_saying_so(
    th: ThreadedHead,
    newcomer: User,
    verb: str,
    noun: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert verbs.main(cli(th, verb, "--user", newcomer.name)) == 0
    lines = capsys.readouterr().out.splitlines()
    kind = "queued or running" if verb == "queue" else "waiting or active"
    assert lines[1] == f"no {kind} {noun} of {newcomer.name} (--all: finished ones too)"
    assert lines[0].split()[0] in ("JOBID", "CLAIM")
    assert verbs.main(cli(th, verb, "--all", "--user", newcomer.name)) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"no {noun} of {newcomer.name}"
    assert verbs.main(cli(th, verb, "--user", newcomer.name, "--json")) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_whoami_as_json(th: ThreadedHead, capsys: pytest.CaptureFixture[str]) -> None:
    assert verbs.main(cli(th, "whoami", "--json")) == 0
    me = json.loads(capsys.readouterr().out)
    assert me["uid"] == os.geteuid() and me["user"] == "root" and me["admin"] in (True, False)


def test_show_prints_what_a_person_reads(
    th: ThreadedHead, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["python3", "train.py", "--msg", "hello world", "--x=$HOME"]
    code = verbs.main(cli(th, "submit", "--json", "--time", "10m", "--host", "gpu01", "--", *argv))
    assert code == 0
    job_id = json.loads(capsys.readouterr().out)["id"]
    assert verbs.main(cli(th, "show", str(job_id))) == 0
    out = capsys.readouterr().out
    fields = {
        line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in out.splitlines()
    }
    assert fields["name"] == "train.py"
    assert fields["time limit"] == "10m" and fields["preemptible"] == "no"
    assert fields["host wanted"] == "gpu01"
    assert fields["argv"] == "python3 train.py --msg 'hello world' '--x=$HOME'"
    assert "False" not in out and "True" not in out and "600.0" not in out


def _line(stream: subprocess.Popen[str], within: float = 20.0) -> str:
    """The next line the process writes on stderr, waiting at most ``within`` s."""
    assert stream.stderr is not None
    ready, _, _ = select.select([stream.stderr], [], [], within)
    assert ready, "no line from gputui run"
    return stream.stderr.readline()


def test_run_interrupted_while_waiting_gives_its_claim_up_and_says_so(
    th: ThreadedHead, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # into a pipe: rows whole, whatever ran before
    with LineClient(th.sock) as holder:
        holder.ok("claim", {"gpus": 2, "host": "gpu01"})  # nothing left: run must wait
        run = subprocess.Popen(
            [sys.executable, "-m", "gputui", *cli(th, "run", "--host", "gpu01", "--", "true")],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT: where it is, on stderr
        )
        try:
            assert "waiting for 1 GPU(s) on gpu01" in _line(run)
            run.send_signal(signal.SIGINT)
            try:
                rest = run.communicate(timeout=20)[1]
            except subprocess.TimeoutExpired:
                run.send_signal(signal.SIGABRT)
                where = run.communicate(timeout=10)[1]
                pytest.fail(f"gputui run went on 20 s after ^C; it was at:\n{where[-4000:]}")
        finally:
            if run.poll() is None:
                run.kill()
        assert run.returncode == 130
        assert rest.endswith("\n") and rest.splitlines()[-1].startswith("gputui run: interrupted")
        assert "cancelled while waiting" in rest and "Traceback" not in rest
        claims = holder.ok("claims", {"all": True})["claims"]
    ended = [c for c in claims if c["state"] != "active"]
    assert len(ended) == 1 and ended[0]["release_reason"] == "cancelled while waiting"
    assert ended[0]["reason"] == ""
    assert verbs.main(cli(th, "claims", "--all")) == 0
    out = capsys.readouterr().out
    assert "released (cancelled while waiting)" in out and "Resources" not in out


def test_a_run_waits_out_a_quiet_head_longer_than_an_answer_may_take(
    th: ThreadedHead, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gputui run`` waits for GPUs on the head's pushes: a quiet head (nothing to
    push for longer than an answer may take) is not a late one. It once gave up
    after 30 s with "the head did not answer in time"."""
    with LineClient(th.sock) as holder, HeadClient(th.sock, timeout=0.1) as client:
        held = holder.ok("claim", {"gpus": 2, "host": "gpu01"})["claim"]["id"]
        backend = HeadSession(client)
        claim = backend.hold_claim(gpus=1, host="gpu01", note="waits", timeout=10)["claim"]
        # An answer may take 0.1 s here (30 s by default): the subscription's too.
        monkeypatch.setattr(
            backend, "subscribe", lambda: HeadSession.subscribe(backend, timeout=0.1)
        )
        assert claim["state"] != "active"
        got: dict[str, object] = {}
        waiting = threading.Thread(
            target=lambda: got.update(claim=_wait_for_grant(backend, claim)), daemon=True
        )
        waiting.start()
        waiting.join(1.0)  # ten times the answer deadline, and nothing pushed
        assert waiting.is_alive(), "the wait ended with nothing granted"
        holder.ok("release", {"claim_ids": [held]})
        waiting.join(20)
        granted = got.get("claim")
        assert isinstance(granted, dict) and granted["state"] == "active", got


def test_a_run_that_dies_while_waiting_is_not_called_released_for_resources(
    th: ThreadedHead,
) -> None:
    with LineClient(th.sock) as holder:
        holder.ok("claim", {"gpus": 2, "host": "gpu01"})
        with LineClient(th.sock) as session:
            body = {"gpus": 1, "host": "gpu01", "wait": True, "session": True, "note": "x"}
            waiting = session.ok("claim", body)["claim"]
            assert waiting["state"] == "waiting"
        deadline = time.monotonic() + 15

        def gone() -> dict[str, object] | None:
            assert time.monotonic() < deadline
            for c in holder.ok("claims", {"all": True})["claims"]:
                if c["id"] == waiting["id"] and c["state"] == "released":
                    return dict(c)
            return None

        ended = poll(gone, what="the waiting claim to end with its connection")
    assert ended["reason"] == ""
    assert ended["release_reason"] == "cancelled while waiting (its gputui run session ended)"


def test_queue_format_on_a_real_head(th: ThreadedHead, capsys: pytest.CaptureFixture[str]) -> None:
    assert verbs.main(cli(th, "submit", "--time", "10m", "--", "python3", "train.py")) == 0
    capsys.readouterr()
    assert verbs.main(cli(th, "queue", "-o", "%.4i %.10j %.2t %l %R")) == 0
    head, row = capsys.readouterr().out.splitlines()
    assert head == "JOBI       NAME ST TIME_LIMIT REASON"
    assert row.split() == ["1", "train.py", "R", "10:00", "gpu01"]
    assert verbs.main(cli(th, "queue", "--format", "%i %Y")) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui queue: --format: unknown field %Y") and err.count("\n") == 1
