"""Job requests the hard way: hostile launches, the ``jobs`` push, slow requests that
must not hold up samples, and symlinks planted in the jobs tree."""

from __future__ import annotations

import json
import os
import pwd
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobkit import NS, SPEC, Jobs, kill_jobs, launch_fields, script, wait_file, wait_until

from gputui.remote.dispatch import WORKERS
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Jobs as JobsMessage
from gputui.wire.ops import (
    HelperRequest,
    JobLogRequest,
    JobsForgetRequest,
    JobSignalRequest,
    JobsRequest,
    LaunchRequest,
)


@pytest.fixture
def jobs_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "jobs"
    yield root
    kill_jobs(root)


@pytest.fixture
def helper_env(jobs_root: Path) -> dict[str, str]:
    return dict(os.environ, GPUTUI_JOBS_ROOT=str(jobs_root))


def _no_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except (KeyError, ValueError):
        return True
    return False


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
NOT_NS = st.one_of(
    st.sampled_from(["../x", "..", "", "abc/defgh", "ABCDEFGHIJ", "a" * 33, "/etc", "ns\0ns0001"]),
    st.text(max_size=40).filter(lambda s: not re.fullmatch(r"[a-z0-9]{8,32}", s)),
    JUNK.filter(lambda v: not isinstance(v, str)),
)
NOT_JOB_ID = st.one_of(
    st.booleans(),
    st.integers(max_value=0),
    st.integers(min_value=2**53 + 1),
    st.floats(),
    st.text(max_size=10),
    st.none(),
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=2),
)
NON_STRINGS = JUNK.filter(lambda v: not isinstance(v, str))
NOT_ARGV = st.one_of(
    st.just([]),
    st.lists(NON_STRINGS, min_size=1, max_size=3),
    st.lists(st.text(max_size=5), max_size=3).map(lambda rest: ["", *rest]),
    st.lists(st.text(max_size=5), min_size=1, max_size=3).map(lambda a: [*a, "x\0y"]),
    st.text(max_size=10),
    st.none(),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)
NOT_ENV = st.one_of(
    st.dictionaries(st.text(min_size=1, max_size=8), NON_STRINGS, min_size=1, max_size=3),
    st.sampled_from([{"A=B": "x"}, {"": "x"}, {"X": "a\0b"}, {"X\0": "b"}]),
    st.lists(st.text(max_size=3), min_size=1, max_size=3),
    st.text(min_size=1, max_size=10),
    st.integers(),
)
NOT_CWD = st.one_of(
    st.text(max_size=20).filter(lambda s: not s.startswith("/")),
    NON_STRINGS.filter(lambda v: v is not None),
    st.sampled_from(["/no/such/dir", "/etc/passwd", "/tmp/\0x"]),
)
NOT_USER = st.one_of(
    st.text(max_size=20).filter(_no_user),
    st.sampled_from(["../root", "root;id", "-root", "nosuchuser-gputui", " root"]),
    NON_STRINGS.filter(lambda v: v is not None),
)
NOT_GPUS = st.one_of(
    st.lists(st.text(max_size=40), min_size=1, max_size=3).filter(
        lambda uuids: not all(re.fullmatch(r"(GPU|MIG)-[0-9A-Za-z/-]{1,96}", u) for u in uuids)
    ),
    st.lists(NON_STRINGS, min_size=1, max_size=2),
    st.sampled_from([["GPU-$(reboot)"], ["0"], ["GPU-a,GPU-b"], ["GPU-" + "a" * 97]]),
    st.just("GPU-12345678-1234-1234-1234-123456789abc"),
    st.text(min_size=1, max_size=5),
    st.integers(),
)
NOT_SECONDS = st.one_of(
    st.floats(max_value=-0.001),
    st.just(float("nan")),
    st.just(float("inf")),
    st.floats(min_value=1e12, allow_infinity=False),
    st.booleans(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)
HOSTILE = {
    "ns": NOT_NS,
    "job_id": NOT_JOB_ID,
    "argv": NOT_ARGV,
    "env": NOT_ENV,
    "cwd": NOT_CWD,
    "user": NOT_USER,
    "gpu_uuids": NOT_GPUS,
    "time_limit_s": st.one_of(NOT_SECONDS, st.just(0)),
    "grace_s": NOT_SECONDS,
}


def test_hostile_launch_requests_are_refused_and_create_nothing(
    start_helper: Callable[..., Any], helper_env: dict[str, str], jobs_root: Path, tmp_path: Path
) -> None:
    helper = start_helper(["--sim", SPEC, "--interval", "1"], helper_env)
    helper.expect(lambda m: m["type"] == "hello")
    jobs = Jobs(helper)
    marker = tmp_path / "ran"
    argv = script(f"open({str(marker)!r}, 'w').close()")

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        field = data.draw(st.sampled_from(sorted(HOSTILE)), label="field")
        value = data.draw(HOSTILE[field], label="value")
        req = launch_fields(5, argv)
        req[field] = value
        res = jobs.call("launch", **req)
        assert res["ok"] is False, (field, value, res)
        want = {"bad-request", "exec-failed"} if field == "cwd" else {"bad-request"}
        assert res["code"] in want, (field, value, res)
        assert isinstance(res["error"], str) and res["error"] and "\n" not in res["error"]
        assert len(res["error"]) <= 600
        assert not jobs_root.exists() and not marker.exists()

    check()
    ok = jobs.call("launch", **launch_fields(5, argv))  # the same request, made good
    assert ok["ok"] is True, ok
    assert jobs.wait_state(5, "exited")["exit_code"] == 0 and marker.exists()


def test_jobs_are_pushed_after_hello_and_on_change(
    start_helper: Callable[..., Any], helper_env: dict[str, str], tmp_path: Path
) -> None:
    helper = start_helper(["--sim", SPEC, "--interval", "0.1", "--jobs", NS], helper_env)
    assert helper.expect(lambda m: True)["type"] == "hello"
    assert helper.expect(lambda m: True) == {"type": "jobs", "jobs": []}
    go = tmp_path / "go"
    jobs = Jobs(helper)
    job = jobs.launch(1, script(wait_file(go)))["value"]

    def pushed(state: str) -> Callable[[dict[str, Any]], bool]:
        return lambda m: m["type"] == "jobs" and [j["state"] for j in m["jobs"]] == [state]

    running = helper.expect(pushed("running"))
    assert running["jobs"][0]["pid"] == job["pid"]
    go.touch()
    ended = helper.expect(pushed("exited"))["jobs"][0]
    assert ended["exit_code"] == 0
    # Nothing changes now: samples come, no more pushes.
    count: int = 0

    def five_samples(msg: dict[str, Any]) -> bool:
        nonlocal count
        assert msg["type"] != "jobs", msg
        count += 1 if msg["type"] == "sample" else 0
        return count >= 5

    helper.expect(five_samples)
    jobs.ok("jobs_forget", job_ids=[1])
    assert helper.expect(lambda m: m["type"] == "jobs")["jobs"] == []


def test_a_bad_jobs_argument_is_fatal(start_helper: Callable[..., Any]) -> None:
    helper = start_helper(["--sim", SPEC, "--jobs", "../etc"])
    err = helper.expect(lambda m: m["type"] == "error")
    assert err["fatal"] is True and "--jobs" in err["message"]
    assert helper.proc.wait(10) == 2


def test_samples_flow_while_every_worker_is_busy(
    start_helper: Callable[..., Any], helper_env: dict[str, str], jobs_root: Path
) -> None:
    """A job caught 'starting' makes each launch of its id wait up to 5 s: with all
    workers waiting so, samples and fast requests still go on; then 20 launches."""
    stuck = jobs_root / NS / "77"
    stuck.mkdir(parents=True)
    (stuck / "state.json").write_bytes(b"")  # a supervisor caught mid-write
    helper = start_helper(["--sim", SPEC, "--interval", "0.1"], helper_env)
    helper.expect(lambda m: m["type"] == "hello")
    jobs = Jobs(helper)
    waiting = [jobs.send("launch", **launch_fields(77, script("pass"))) for _ in range(WORKERS)]
    fresh = [jobs.send("launch", **launch_fields(100 + i, script("pass"))) for i in range(20)]
    first = helper.expect(lambda m: m["type"] == "sample")
    seqs = [first["seq"]]

    def sample_or_result(msg: dict[str, Any]) -> bool:
        assert msg["type"] != "result", f"a slow request answered before samples: {msg}"
        if msg["type"] == "sample":
            seqs.append(msg["seq"])
        return len(seqs) > 10

    helper.expect(sample_or_result)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    quick = jobs.send("interval", seconds=0.1)
    answer = helper.expect(lambda m: m["type"] == "result" and m["id"] in (quick, *waiting, *fresh))
    assert answer["id"] == quick  # the fast request first, while the workers wait
    answers = jobs.results(waiting + fresh, timeout=30)
    for res in answers[:WORKERS]:
        assert res["ok"] is True and res["value"]["already"] is True, res
        assert res["value"]["state"] == "starting"
    launched = [res["value"] for res in answers[WORKERS:]]
    assert all(v["already"] is False for v in launched)
    assert len({v["pid"] for v in launched}) == 20


def test_symlinks_in_the_jobs_tree_are_never_followed(
    jobs: Any, jobs_root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    jobs_root.mkdir()
    (jobs_root / NS).symlink_to(elsewhere)
    res = jobs.launch(1, script("pass"))
    assert (res["ok"], res["code"]) == (False, "internal"), res
    assert "symbolic link" in res["error"] or "Not a directory" in res["error"]
    assert list(elsewhere.iterdir()) == []
    (elsewhere / "1").mkdir()
    assert jobs.ok("jobs", job_ids=None) == {"jobs": []}
    (jobs_root / NS).unlink()
    (jobs_root / NS).mkdir()
    (jobs_root / NS / "2").symlink_to(elsewhere / "1")
    res = jobs.launch(2, script("pass"))
    assert (res["ok"], res["code"]) == (False, "internal"), res
    assert list((elsewhere / "1").iterdir()) == []
    assert jobs.ok("jobs", job_ids=[2]) == {"jobs": []}


@pytest.fixture
def jobs(start_helper: Callable[..., Any], helper_env: dict[str, str]) -> Jobs:
    helper = start_helper(["--sim", SPEC, "--interval", "0.5"], helper_env)
    helper.expect(lambda m: m["type"] == "hello")
    return Jobs(helper)


def test_the_client_models_read_every_job_answer(
    start_helper: Callable[..., Any], helper_env: dict[str, str], tmp_path: Path
) -> None:
    """The requests as the client builds them, the answers through the client's decoders:
    both sides of the job protocol agree."""
    helper = start_helper(["--sim", SPEC, "--interval", "0.2", "--jobs", NS], helper_env)
    hello = helper.expect(lambda m: m["type"] == "hello")
    uuid = hello["gpus"][0]["uuid"]
    rid = 0

    def ask(req: HelperRequest[Any]) -> Any:
        nonlocal rid
        rid += 1
        helper.send(req.line(rid).rstrip("\n"))
        res = helper.result(rid)
        assert res["ok"] is True, res
        return req.decode(res["value"])

    go = tmp_path / "go"
    argv = script('print("out", flush=True)\n' + wait_file(go))
    mig = "MIG-GPU-12345678-1234-1234-1234-123456789abc/1/0"
    launch = LaunchRequest(ns=NS, job_id=3, argv=argv, gpu_uuids=[uuid, mig], grace_s=1.0)
    started = ask(launch)
    assert (started.state, started.already, started.method) == ("running", False, "detached")
    assert ask(launch).already is True
    listed = ask(JobsRequest(ns=NS, job_ids=None)).jobs
    assert [(j.job_id, j.pid) for j in listed] == [(3, started.pid)]
    read = JobLogRequest(ns=NS, job_id=3, offset=0, max_bytes=100)
    wait_until(lambda: ask(read).data == "out\n", what="the job's first line")
    sent = ask(JobSignalRequest(ns=NS, job_id=3, signal="TERM", grace_s=1.0))
    assert sent.delivered is True
    ended = helper.expect(lambda m: m["type"] == "jobs" and m["jobs"][0]["state"] == "exited")
    decoded = decode_helper_line(json.dumps(ended))
    assert isinstance(decoded, JobsMessage) and decoded.jobs[0].signal == "TERM"
    log = ask(read)
    assert (log.data, log.ended) == ("out\n", True)
    assert ask(JobsForgetRequest(ns=NS, job_ids=[3])).forgotten == (3,)
