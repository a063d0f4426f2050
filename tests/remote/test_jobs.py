"""Supervised jobs through the real helper (shipped by the bundle): launch, exit,
exactly-once, surviving the helper, time limits, signals, logs, forgetting."""

from __future__ import annotations

import os
import pwd
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobkit import (
    NS,
    SPEC,
    Jobs,
    gone,
    helper_pids,
    kill_jobs,
    launch_fields,
    script,
    state_file,
    wait_file,
    wait_until,
)

from gputui.remote.procs import read_start_ticks

IGNORES_TERM = script(
    'signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint("ready", flush=True)\ntime.sleep(120)'
)


@pytest.fixture
def jobs_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "jobs"
    yield root
    kill_jobs(root)


@pytest.fixture
def helper_env(jobs_root: Path) -> dict[str, str]:
    return dict(os.environ, GPUTUI_JOBS_ROOT=str(jobs_root))


@pytest.fixture
def jobs(start_helper: Callable[..., Any], helper_env: dict[str, str]) -> Jobs:
    helper = start_helper(["--sim", SPEC, "--interval", "0.1"], helper_env)
    helper.hello = helper.expect(lambda m: m["type"] == "hello")
    return Jobs(helper)


def _on_gpu(msg: dict[str, Any], index: int, pid: int) -> bool:
    return any(p["pid"] == pid for p in msg["gpus"][index].get("processes", []))


def test_a_job_runs_on_its_gpu_and_exits_with_its_code(
    jobs: Jobs, jobs_root: Path, tmp_path: Path
) -> None:
    uuid1 = jobs.helper.hello["gpus"][1]["uuid"]
    go = tmp_path / "go"
    body = (
        "e = os.environ\n"
        'print("env", e["CUDA_VISIBLE_DEVICES"], e["CUDA_DEVICE_ORDER"], e["GPUTUI_JOB_ID"],'
        ' e["EXTRA"], e["USER"], e["LOGNAME"], flush=True)\n'
        'print("cwd", os.getcwd(), "own-group", os.getpgid(0) == os.getpid(), flush=True)\n'
        + wait_file(go)
        + 'print("bye", flush=True)\nsys.stderr.write("to stderr\\n")\nsys.exit(3)\n'
    )
    res = jobs.launch(1, script(body), gpu_uuids=[uuid1], env={"EXTRA": "x y"}, cwd=str(tmp_path))
    assert res["ok"] is True, res
    job = res["value"]
    assert (job["state"], job["already"], job["method"]) == ("running", False, "detached")
    pid = job["pid"]
    assert job["start_ticks"] == read_start_ticks(pid)
    assert job["log_path"] == str(jobs_root / NS / "1" / "output.log")
    assert job["exit_code"] is None and job["ended_at"] is None and job["timed_out"] is False

    # The simulated GPU it was given lists it; the other one does not.
    seen = jobs.helper.expect(lambda m: m["type"] == "sample" and _on_gpu(m, 1, pid))
    assert not _on_gpu(seen, 0, pid)

    go.touch()
    done = jobs.wait_state(1, "exited")
    assert (done["exit_code"], done["signal"], done["timed_out"]) == (3, None, False)
    assert done["pid"] == pid and done["ended_at"] >= done["started_at"]
    log = jobs.log(1)
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert f"env {uuid1} PCI_BUS_ID 1 x y {me} {me}\n" in log
    assert f"cwd {tmp_path} own-group True\n" in log
    assert "bye\n" in log and "to stderr\n" in log

    job_dir = jobs_root / NS / "1"
    mode = 0o755 if os.geteuid() == 0 else 0o700
    for folder in (jobs_root / NS, job_dir):
        assert stat.S_IMODE(folder.lstat().st_mode) == mode
    assert sorted(p.name for p in job_dir.iterdir()) == ["output.log", "state.json"]
    assert state_file(jobs_root, 1)["supervisor_pid"] != pid


def test_a_job_id_is_launched_once(jobs: Jobs, tmp_path: Path) -> None:
    go = tmp_path / "go"
    argv = script('print("started", flush=True)\n' + wait_file(go))
    first = jobs.launch(2, argv)["value"]
    again = jobs.launch(2, script('print("second")'))
    assert again["ok"] is True, again
    assert again["value"]["already"] is True
    assert (again["value"]["pid"], again["value"]["state"]) == (first["pid"], "running")

    # Many at once, for a fresh id: one process, every answer naming it.
    ids = [jobs.send("launch", **launch_fields(3, argv)) for _ in range(8)]
    answers = [res["value"] for res in jobs.results(ids)]
    assert len({a["pid"] for a in answers}) == 1
    assert sorted(a["already"] for a in answers) == [False] + [True] * 7
    go.touch()
    jobs.wait_state(3, "exited")
    assert jobs.log(3) == "started\n"
    jobs.wait_state(2, "exited")
    assert jobs.log(2) == "started\n"
    after = jobs.launch(2, argv)["value"]
    assert (after["already"], after["state"], after["pid"]) == (True, "exited", first["pid"])


def test_a_job_outlives_a_killed_helper_and_sighup(
    start_helper: Callable[..., Any], helper_env: dict[str, str], jobs_root: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    first = start_helper(["--sim", SPEC, "--interval", "0.1"], helper_env)
    first.expect(lambda m: m["type"] == "hello")
    job = Jobs(first).launch(4, script(wait_file(go) + "sys.exit(7)"))["value"]
    for pid in reversed(helper_pids(first.proc.pid)):
        os.kill(pid, signal.SIGKILL)
    first.proc.wait(10)
    supervisor = state_file(jobs_root, 4)["supervisor_pid"]
    os.kill(supervisor, signal.SIGHUP)

    second = start_helper(["--sim", SPEC, "--interval", "0.1"], helper_env)
    second.expect(lambda m: m["type"] == "hello")
    jobs = Jobs(second)
    now = jobs.state(4)
    assert (now["state"], now["pid"]) == ("running", job["pid"])
    assert not gone(supervisor)
    go.touch()
    done = jobs.wait_state(4, "exited")
    assert (done["exit_code"], done["pid"]) == (7, job["pid"])


def test_a_killed_supervisor_means_lost_and_takes_its_job(jobs: Jobs, jobs_root: Path) -> None:
    job = jobs.launch(5, script("time.sleep(120)"))["value"]
    supervisor = state_file(jobs_root, 5)["supervisor_pid"]
    os.kill(supervisor, signal.SIGKILL)
    lost = jobs.wait_state(5, "lost")
    assert lost["pid"] == job["pid"] and "supervisor" in lost["error"]
    wait_until(lambda: gone(job["pid"]), what="the job to die with its supervisor")
    assert jobs.launch(5, script("pass"))["value"]["already"] is True


def test_time_limit_term_then_kill(jobs: Jobs) -> None:
    polite = jobs.launch(6, script("time.sleep(120)"), time_limit_s=0.5, grace_s=5)["value"]
    stubborn = jobs.launch(7, IGNORES_TERM, time_limit_s=0.5, grace_s=0.5)["value"]
    done = jobs.wait_state(6, "exited")
    assert (done["signal"], done["exit_code"], done["timed_out"]) == ("TERM", None, True)
    assert done["ended_at"] - polite["started_at"] >= 0.45
    done = jobs.wait_state(7, "exited")
    assert (done["signal"], done["timed_out"]) == ("KILL", True)
    assert done["ended_at"] - stubborn["started_at"] >= 0.95
    assert jobs.log(7) == "ready\n"


def test_job_signal_term_with_grace_ends_in_kill(jobs: Jobs) -> None:
    jobs.launch(8, IGNORES_TERM)
    wait_until(lambda: jobs.log(8) == "ready\n", what="the job to ignore TERM")
    sent = jobs.ok("job_signal", job_id=8, signal="TERM", grace_s=0.3)
    assert (sent["delivered"], sent["state"]) == (True, "running")
    done = jobs.wait_state(8, "exited")
    assert (done["signal"], done["timed_out"]) == ("KILL", False)
    late = jobs.ok("job_signal", job_id=8, signal="KILL", grace_s=None)
    assert (late["delivered"], late["state"]) == (False, "exited")

    body = 'print("ready", flush=True)\ntry:\n    time.sleep(120)\nexcept KeyboardInterrupt:\n'
    jobs.launch(9, script(body + "    sys.exit(5)\n"))
    wait_until(lambda: jobs.log(9) == "ready\n", what="Python's own SIGINT handler")
    assert jobs.ok("job_signal", job_id=9, signal="INT", grace_s=None)["delivered"] is True
    assert jobs.wait_state(9, "exited")["exit_code"] == 5  # it got the INT, as itself
    res = jobs.call("job_signal", job_id=99, signal="TERM", grace_s=None)
    assert (res["ok"], res["code"]) == (False, "unknown-job")
    res = jobs.call("job_signal", job_id=9, signal="STOP", grace_s=None)
    assert (res["ok"], res["code"]) == (False, "bad-request")


def test_job_log_offsets_and_whole_characters(jobs: Jobs, tmp_path: Path) -> None:
    text = "héllo wörld ✓ 🔥 日本\n" * 3000
    (tmp_path / "text").write_text(text, encoding="utf-8")
    go = tmp_path / "go"
    body = f"sys.stdout.buffer.write(open({str(tmp_path / 'text')!r}, 'rb').read())\n"
    jobs.launch(10, script(body + "sys.stdout.flush()\n" + wait_file(go)))
    size = len(text.encode())
    wait_until(lambda: jobs.ok("job_log", job_id=10, offset=0, max_bytes=1)["size"] == size)
    got, offset, chunks = "", 0, 0
    while offset < size:
        part = jobs.ok("job_log", job_id=10, offset=offset, max_bytes=7 if chunks < 20 else 4093)
        assert "\ufffd" not in part["data"] and part["offset"] > offset
        assert part["ended"] is False and part["size"] == size
        got, offset, chunks = got + part["data"], part["offset"], chunks + 1
    assert got == text
    go.touch()
    jobs.wait_state(10, "exited")
    end = jobs.ok("job_log", job_id=10, offset=offset, max_bytes=100)
    assert end == {"job_id": 10, "data": "", "offset": size, "size": size, "ended": True}
    past = jobs.ok("job_log", job_id=10, offset=size + 1000, max_bytes=100)
    assert (past["offset"], past["ended"]) == (size, True)
    for fields in (
        {"offset": -1, "max_bytes": 10},
        {"offset": 0, "max_bytes": 0},
        {"offset": 0, "max_bytes": 65537},
        {"offset": True, "max_bytes": 10},
        {"offset": 0, "max_bytes": "10"},
    ):
        res = jobs.call("job_log", job_id=10, **fields)
        assert (res["ok"], res["code"]) == (False, "bad-request"), fields
    res = jobs.call("job_log", job_id=11, offset=0, max_bytes=10)
    assert (res["ok"], res["code"]) == (False, "unknown-job")


def test_jobs_forget(jobs: Jobs, tmp_path: Path) -> None:
    go = tmp_path / "go"
    jobs.launch(12, script('print("twelve")'))
    jobs.launch(13, script("pass"))
    jobs.launch(14, script(wait_file(go)))
    jobs.wait_state(12, "exited")
    jobs.wait_state(13, "exited")
    gone_ = jobs.ok("jobs_forget", job_ids=[12, 14, 999])
    assert gone_ == {"forgotten": [12]}  # a running job and an unknown one are not
    listed = [j["job_id"] for j in jobs.ok("jobs", job_ids=None)["jobs"]]
    assert listed == [13, 14]
    assert jobs.state(12)["state"] == "exited"  # asked by id: still there
    assert jobs.log(12) == "twelve\n"
    assert jobs.launch(12, script("pass"))["value"]["already"] is True
    assert jobs.ok("jobs_forget", job_ids=[12, 13]) == {"forgotten": [12, 13]}
    assert [j["job_id"] for j in jobs.ok("jobs", job_ids=None)["jobs"]] == [14]
    go.touch()
    jobs.wait_state(14, "exited")
    assert jobs.ok("jobs", job_ids=[404])["jobs"] == []
    assert jobs.ok("jobs", ns="otherns0001", job_ids=None)["jobs"] == []


def test_bad_job_requests_are_one_line_each(jobs: Jobs, jobs_root: Path) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("jobs", {"ns": "../x", "job_ids": None}),
        ("jobs", {"ns": NS, "job_ids": "all"}),
        ("jobs", {"ns": NS, "job_ids": [1, True]}),
        ("jobs", {"ns": NS, "job_ids": list(range(1, 4098))}),
        ("jobs_forget", {"ns": NS, "job_ids": None}),
        ("job_log", {"ns": NS, "job_id": -1, "offset": 0, "max_bytes": 10}),
        ("job_signal", {"ns": NS.upper(), "job_id": 1, "signal": "TERM", "grace_s": None}),
        ("job_signal", {"ns": NS, "job_id": 1, "signal": "TERM", "grace_s": -1}),
    ]
    for op, fields in cases:
        res = jobs.call(op, **fields)
        assert (res["ok"], res["code"]) == (False, "bad-request"), (op, fields, res)
        assert res["error"] and "\n" not in res["error"]
    assert not jobs_root.exists()


def test_a_child_exec_failure_is_recorded_once(jobs: Jobs, tmp_path: Path) -> None:
    not_a_program = tmp_path / "notes.txt"
    not_a_program.write_text("just text\n")
    not_a_program.chmod(0o755)
    res = jobs.launch(15, [str(not_a_program)])
    assert (res["ok"], res["code"]) == (False, "exec-failed")
    assert res["error"] == f"cannot run {str(not_a_program)!r}: Exec format error"
    again = jobs.launch(15, [str(not_a_program)])["value"]
    assert (again["already"], again["state"], again["error"]) == (
        True,
        "failed-to-start",
        res["error"],
    )
    assert again["pid"] is None
