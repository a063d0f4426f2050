"""Jobs in containers, through a real helper and real supervisors, with a fake runtime
first on the helper's PATH (``fakeruntime``: no Docker on the test machines).

A root helper starts each job as a real second user. The fake records the UUIDs, the
uid and gid and the label it was given, and runs the "container" in a session of its
own, outside the job's process group, as a real one is: so each way a job ends (a
kill, a preemption's TERM then KILL, the time limit) must remove the container
(``rm --force NAME``) or its process is left running.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import FakeRuntime, helper_env
from jobkit import NS, SPEC, Jobs, gone, kill_jobs, wait_until
from realusers import User, made_users

from gputui.remote.jobfs import JobStore

pytestmark = pytest.mark.root

PYTHON = "/usr/bin/python3"
UUIDS = [
    "GPU-11111111-2222-3333-4444-555555555555",
    "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
]


@pytest.fixture(scope="module")
def user() -> Iterator[User]:
    with made_users(1, "gtc") as (made,):
        yield made


@pytest.fixture
def place(user: User) -> Iterator[Path]:
    """A directory the job's user can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gputui-box-"))
    path.chmod(0o755)
    yield path
    kill_jobs(path / "jobs")
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def work(place: Path, user: User) -> Path:
    """The job's working directory, the user's own (bound into the container)."""
    path = place / "work"
    path.mkdir()
    os.chown(path, user.uid, user.gid)
    return path


@pytest.fixture
def fake(place: Path) -> FakeRuntime:
    return FakeRuntime(place / "fake")


@pytest.fixture
def jobs(start_helper: Callable[..., Any], fake: FakeRuntime, place: Path) -> Jobs:
    env = helper_env(fake, GPUTUI_JOBS_ROOT=str(place / "jobs"))
    helper = start_helper(["--sim", SPEC], env)
    helper.expect(lambda m: m["type"] == "hello")
    return Jobs(helper)


def _stubborn(work: Path) -> list[str]:
    """A container command that says it is up, ignores SIGTERM, and never ends."""
    ready = work / "ready"
    body = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(ready)!r}, 'w').write(str(os.getpid()))\n"
        "while True: time.sleep(60)\n"
    )
    return [PYTHON, "-c", body]


def _start_box(jobs: Jobs, work: Path, user: User, job_id: int, runtime: str, **kw: Any) -> int:
    """Launch a stubborn container job; the pid of the command inside, once it is up."""
    res = jobs.launch(
        job_id,
        _stubborn(work),
        user=user.name,
        uid=user.uid,
        cwd=str(work),
        image="registry.example.com/team/train:1.0",
        runtime=runtime,
        gpu_uuids=UUIDS,
        env={"GPUTUI_JOB_ID": "42", "WANDB_MODE": "offline", "PATH": "/nowhere"},
        **kw,
    )
    assert res["ok"] is True, res
    ready = work / "ready"
    wait_until(lambda: ready.exists() and ready.read_text(), what="the container's command")
    return int(ready.read_text())


def _ended(jobs: Jobs, fake: FakeRuntime, job_id: int, inside: int) -> dict[str, Any]:
    """Wait for the job's end; then the container was removed and its command is gone."""
    state = jobs.wait_state(job_id, "exited", timeout=20)
    # The end is told only after the container is removed: nothing is left by then.
    assert fake.running() == {}
    assert gone(inside)
    (rm,) = fake.calls("rm")
    (run,) = fake.calls("run")
    assert rm["name"] == run["name"] and rm["found"] is True
    return state


def test_docker_gets_the_uuids_the_user_and_the_label_and_a_kill_removes_it(
    jobs: Jobs, fake: FakeRuntime, work: Path, user: User
) -> None:
    inside = _start_box(jobs, work, user, 7, "docker")
    (run,) = fake.calls("run")
    argv = run["argv"]
    assert (run["uid"], run["gid"]) == (user.uid, user.gid)
    assert argv[argv.index("--user") + 1] == f"{user.uid}:{user.gid}"
    assert argv[argv.index("--gpus") + 1] == f'"device={UUIDS[0]},{UUIDS[1]}"'
    labels = [argv[i + 1] for i, a in enumerate(argv) if a == "--label"]
    assert "gputui.job=42" in labels
    assert run["name"] == f"gputui-job-42-{NS}-7"
    assert "--rm" in argv and run["image"] == "registry.example.com/team/train:1.0"
    # Values reach the runtime through its environment, never its command line.
    assert run["env"]["WANDB_MODE"] == "offline" and run["env"]["GPUTUI_JOB_ID"] == "42"
    assert run["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(UUIDS)
    assert "PATH" not in run["env"] and not any("offline" in a for a in argv)
    assert os.stat(f"/proc/{inside}").st_uid == user.uid
    # The id the runtime wrote (--cidfile, as the user) links the container to the job.
    assert jobs.state(7)["container_id"] == run["cid"][:12]
    # The kill: SIGKILL to the job's group ends the runtime's client, not the container.
    assert jobs.ok("job_signal", job_id=7, signal="KILL")["delivered"] is True
    state = _ended(jobs, fake, 7, inside)
    assert state["signal"] == "KILL"
    assert fake.calls("rm")[0]["uid"] == user.uid


def test_podman_gets_one_cdi_device_per_gpu_and_a_preemption_removes_it(
    jobs: Jobs, fake: FakeRuntime, work: Path, user: User
) -> None:
    inside = _start_box(jobs, work, user, 8, "podman")
    (run,) = fake.calls("run")
    argv = run["argv"]
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "--device"]
    assert devices == [f"nvidia.com/gpu={u}" for u in UUIDS]
    assert "--gpus" not in argv and "--userns=keep-id" in argv
    assert (run["uid"], run["gid"]) == (user.uid, user.gid)
    # A preemption: TERM (passed into the container, which ignores it), then KILL
    # after the grace, as the head does it.
    assert jobs.ok("job_signal", job_id=8, signal="TERM", grace_s=0.3)["delivered"] is True
    _ended(jobs, fake, 8, inside)


def test_the_time_limit_removes_the_container(
    jobs: Jobs, fake: FakeRuntime, work: Path, user: User
) -> None:
    inside = _start_box(jobs, work, user, 9, "docker", time_limit_s=0.5, grace_s=0.2)
    state = _ended(jobs, fake, 9, inside)
    assert state["timed_out"] is True


def test_a_container_that_ends_by_itself_is_removed_by_the_runtime(
    jobs: Jobs, fake: FakeRuntime, work: Path, user: User
) -> None:
    res = jobs.launch(
        10,
        [PYTHON, "-c", "import os; print(os.getcwd(), os.getuid())"],
        user=user.name,
        cwd=str(work),
        image="ubuntu:24.04",
        runtime="docker",
    )
    assert res["ok"] is True, res
    assert jobs.wait_state(10, "exited")["exit_code"] == 0
    assert jobs.log(10) == f"{work} {user.uid}\n"
    (run,) = fake.calls("run")
    assert "--gpus" not in run["argv"]  # no GPUs asked: none passed
    # --rm removed it; the supervisor's rm found nothing left, which is fine.
    assert [c["found"] for c in fake.calls("rm")] == [False]


def test_apptainer_gets_the_uuids_in_nvidia_visible_devices_with_nvccli(
    jobs: Jobs, fake: FakeRuntime, work: Path, user: User
) -> None:
    res = jobs.launch(
        11,
        [PYTHON, "-c", "import os; print(os.environ['NVIDIA_VISIBLE_DEVICES'])"],
        user=user.name,
        cwd=str(work),
        image="/containers/train.sif",
        runtime="apptainer",
        gpu_uuids=UUIDS,
    )
    assert res["ok"] is True, res
    assert jobs.wait_state(11, "exited")["exit_code"] == 0
    (call,) = fake.calls("exec")
    assert call["nvidia"] == ",".join(UUIDS) and "--nvccli" in call["argv"]
    assert (call["uid"], call["gid"]) == (user.uid, user.gid)
    assert call["image"] == "/containers/train.sif"
    assert fake.calls("rm") == []  # its processes are the job's own: nothing to remove


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"image": "ubuntu; rm -rf /", "runtime": "docker"}, "is not an image name"),
        ({"image": "--privileged", "runtime": "docker"}, "is not an image name"),
        ({"image": "ubuntu", "runtime": "lxc"}, "runtime must be one of"),
        ({"runtime": "docker"}, "without an image"),
        ({"image": "ubuntu", "runtime": "docker", "venv": "/opt/v"}, "cannot also activate"),
    ],
)
def test_a_bad_container_request_is_refused_in_one_line_and_nothing_runs(
    jobs: Jobs, fake: FakeRuntime, fields: dict[str, Any], words: str
) -> None:
    res = jobs.launch(12, ["true"], **fields)
    assert (res["ok"], res["code"]) == (False, "bad-request"), res
    assert words in res["error"] and "\n" not in res["error"]
    assert fake.calls() == []


def test_a_missing_runtime_is_one_line(start_helper: Callable[..., Any], place: Path) -> None:
    env = dict(os.environ, GPUTUI_JOBS_ROOT=str(place / "jobs"), PATH="/nonexistent")
    helper = start_helper(["--sim", SPEC], env)
    helper.expect(lambda m: m["type"] == "hello")
    res = Jobs(helper).launch(13, ["true"], image="ubuntu", runtime="podman")
    assert (res["ok"], res["code"]) == (False, "exec-failed"), res
    assert res["error"] == "cannot run podman: not installed on this host"


def _store_with(tmp: Path, cid: Callable[[Path], None] | None) -> dict[str, Any]:
    job = tmp / NS / "1"
    (job / "box").mkdir(parents=True)
    state = {"state": "exited", "container": {"name": "gputui-job-1"}, "exit_code": 0}
    (job / "state.json").write_text(json.dumps(state))
    if cid is not None:
        cid(job / "box" / "cid")
    (found,) = JobStore(str(tmp)).jobs(NS)
    return found


@pytest.mark.parametrize(
    ("plant", "wanted"),
    [
        (lambda p: p.write_text("ab" * 32 + "\n"), "ab" * 6),
        (lambda p: p.write_text("not an id"), None),
        (lambda p: p.write_text("AB" * 32), None),
        (lambda p: p.write_text("ab" * 33), None),
        (lambda p: os.symlink("/etc/machine-id", p), None),
        (os.mkfifo, None),
        (None, None),
    ],
)
def test_the_container_id_is_read_only_from_a_regular_file_of_64_hex(
    tmp_path: Path, plant: Callable[[Path], None] | None, wanted: str | None
) -> None:
    """``box/cid`` is the job's user's to write: a link, a FIFO (never blocks) or
    anything but 64 lowercase hex digits gives no container id."""
    assert _store_with(tmp_path, plant).get("container_id") == wanted


@pytest.mark.parametrize("runtime", ["docker", "apptainer"])
def test_a_submitted_script_runs_in_the_image_bound_read_only(
    jobs: Jobs, fake: FakeRuntime, work: Path, user: User, runtime: str
) -> None:
    """``gputui submit --image IMG train.sh``: the script's copy in the job's directory
    is bound into the container at its own path, read-only, and run there."""
    res = jobs.launch(
        12,
        ["train.sh", "--epochs", "3"],
        user=user.name,
        cwd=str(work),
        image="registry.example.com/team/train:1.0",
        runtime=runtime,
        script=f"#!{PYTHON}\nimport sys; print('args', sys.argv[1:])\n",
    )
    assert res["ok"] is True, res
    assert jobs.wait_state(12, "exited")["exit_code"] == 0
    assert jobs.log(12).endswith("args ['--epochs', '3']\n")
    (run,) = fake.calls("run" if runtime == "docker" else "exec")
    argv = run["argv"]
    script = argv[argv.index(run["image"]) + 1]
    assert script.endswith("/12/script") and argv[-2:] == ["--epochs", "3"]
    if runtime == "docker":
        assert f"type=bind,source={script},target={script},readonly" in argv
    else:
        assert argv[argv.index("--bind") + 1] == f"{script}:{script}:ro"
