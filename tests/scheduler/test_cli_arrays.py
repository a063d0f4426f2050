"""``gputui submit SCRIPT`` and job arrays through the CLI, on a real head (its hosts
scripted): the script's directives, a warning for what has no meaning here, the
copy the head keeps, the queue's folded line, and ``cancel ARRAY_TASK`` / ``ARRAY``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import LineClient, ThreadedHead, poll

from gputui.cli import verbs
from gputui.scheduler.head.actions import run_key

SCRIPT = """#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --gres=gpu:1
#SBATCH --array=0-9%2
#SBATCH --mem=4G
#SBATCH --time=30
#SBATCH --mem=8G -N 1
#GPUTUI --project nlp
echo "task $SLURM_ARRAY_TASK_ID"
"""


@pytest.fixture
def th(tmp_path: Path) -> Iterator[ThreadedHead]:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as head:
        yield head
        assert head.problems == []


def cli(th: ThreadedHead, *argv: str) -> list[str]:
    return ["--socket", str(th.sock), *argv]


def _queue(th: ThreadedHead, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert verbs.main(cli(th, "queue")) == 0
    return capsys.readouterr().out.splitlines()


def test_a_script_is_read_copied_and_its_array_folds_in_the_queue(
    th: ThreadedHead,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train.sh"
    path.write_text(SCRIPT)
    assert verbs.main(cli(th, "submit", "train.sh", "--lr", "3e-4")) == 0
    done = capsys.readouterr()
    array_id = int(done.out.strip())
    # One warning line for each #SBATCH option with no meaning here, once each.
    assert done.err.splitlines() == [
        "gputui submit: warning: #SBATCH --mem has no meaning here; ignored",
        "gputui submit: warning: #SBATCH -N has no meaning here; ignored",
    ]
    path.write_text("#!/bin/bash\necho edited\n")  # later edits change nothing queued
    rows = th.rows(
        "SELECT id, array_id, array_task, array_throttle, name, gpus, time_limit_s, project,"
        " argv, script_id FROM job ORDER BY id"
    )
    assert [r[2] for r in rows] == list(range(10))
    assert {(r[1], r[3], r[4], r[5], r[6], r[7]) for r in rows} == {
        (array_id, 2, "sweep", 1, 1800.0, "nlp")
    }
    assert rows[0][0] == array_id
    assert all(json.loads(r[8]) == ["train.sh", "--lr", "3e-4"] for r in rows)
    (script_id,) = {r[9] for r in rows}
    assert th.rows("SELECT text FROM job_script WHERE id = ?", script_id) == [(SCRIPT,)]

    def folded() -> list[str] | None:
        lines = _queue(th, capsys)
        return lines if any(line.startswith(f"{array_id}_[2-9] ") for line in lines) else None

    lines = poll(folded, what="two tasks started and the rest folded")
    waiting = next(line for line in lines if line.startswith(f"{array_id}_[2-9] "))
    assert "JobArrayTaskLimit" in waiting and "sweep" in waiting
    assert len(lines) == 4  # the header, two started tasks, the folded rest
    assert {line.split()[0] for line in lines[1:3]} == {f"{array_id}_0", f"{array_id}_1"}

    with LineClient(th.sock) as client:  # why a task past the line's few waits
        why = client.ok("explain", {"job_id": rows[5][0]})["estimate"]["why"]
    assert why.startswith(f"array {array_id} has 2 tasks holding GPUs, as many as its %N")

    assert verbs.main(cli(th, "show", str(rows[5][0]))) == 0
    shown = capsys.readouterr().out
    assert f"array: {array_id}_5: task 5 of array {array_id} (at most 2 at once)" in shown
    assert "script: copied at submit (argv[0] names it)" in shown

    assert verbs.main(cli(th, "cancel", f"{array_id}_5")) == 0
    assert re.fullmatch(r"job \d+: cancelled: cancelled before it ran\n", capsys.readouterr().out)
    assert any(line.startswith(f"{array_id}_[2-4,6-9] ") for line in _queue(th, capsys))
    assert verbs.main(cli(th, "cancel", f"{array_id}_5")) == 1
    assert "already ended (cancelled)" in capsys.readouterr().err
    assert verbs.main(cli(th, "cancel", f"{array_id}_99")) == 1
    assert capsys.readouterr().err == f"gputui cancel: no job {array_id}_99\n"

    assert verbs.main(cli(th, "cancel", str(array_id))) == 0
    out = capsys.readouterr().out
    assert f"9 task(s) of array {array_id} cancelled (2 running:" in out
    states = {s for (s,) in th.rows("SELECT state FROM job")}
    assert states <= {"cancelled", "killing"}


def test_flags_override_directives_and_hostile_directives_are_one_line(
    th: ThreadedHead,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.sh").write_text(SCRIPT)
    code = verbs.main(cli(th, "submit", "--array", "3,5", "--name", "mine", "-g", "2", "train.sh"))
    assert code == 0
    capsys.readouterr()
    rows = th.rows("SELECT array_task, array_throttle, name, gpus FROM job ORDER BY id")
    assert rows == [(3, None, "mine", 2), (5, None, "mine", 2)]

    (tmp_path / "bad.sh").write_text("#!/bin/sh\n#GPUTUI --name \x1b]0;pwned\x07x\necho\n")
    assert verbs.main(cli(th, "submit", "bad.sh")) == 2
    err = capsys.readouterr().err
    assert err == "gputui submit: bad.sh:2: a control character in a directive\n"
    (tmp_path / "big.sh").write_text("#!/bin/sh\n#SBATCH --array=0-99999\n")
    assert verbs.main(cli(th, "submit", "big.sh")) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui submit: big.sh:2: #SBATCH: argument --array: more than 10000")
    assert err.count("\n") == 1
    assert th.rows("SELECT COUNT(*) FROM job") == [(2,)]


def test_an_array_after_ok_a_job_that_failed_is_cancelled_whole_and_one_after_it_waits(
    th: ThreadedHead,
) -> None:
    with LineClient(th.sock) as client:
        first = client.ok("submit", {"argv": ["prep"], "gpus": 2, "cwd": "/"})["job"]["id"]
        sweep = client.ok(
            "submit",
            {"argv": ["t"], "gpus": 1, "cwd": "/", "array": "0-39%2", "after": [first],
             "after_ok": True},
        )["array"]["id"]  # fmt: skip
        after_sweep = client.ok("submit", {"argv": ["report"], "cwd": "/", "after": [sweep]})[
            "job"
        ]["id"]

        def running(job_id: int) -> bool:
            return client.ok("show", {"job_id": job_id})["job"]["state"] == "running"

        poll(lambda: running(first), what="the first job running")
        th.in_loop(lambda: th.hosts.finish("gpu01", run_key(first, 1), exit_code=3))

        def states() -> set[str] | None:
            got = {s for (s,) in th.rows("SELECT state FROM job WHERE array_id = ?", sweep)}
            return got if got == {"cancelled"} else None

        poll(states, what="all 40 tasks cancelled")
        reasons = {r for (r,) in th.rows("SELECT reason FROM job WHERE array_id = ?", sweep)}
        assert reasons == {f"dependency job {first} failed"}
        # In one pass, not a few tasks a pass: the array is judged once, as a whole.
        ends = th.rows("SELECT DISTINCT ended_at FROM job WHERE array_id = ?", sweep)
        assert len(ends) == 1
        # A job after the whole array runs once all of it has ended.
        poll(lambda: running(after_sweep), what="the job after the array")
