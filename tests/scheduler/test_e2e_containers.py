"""End to end: a job with ``--image`` through the real CLI and a real head, its host's
helper running the fake runtime (``fakeruntime``: no Docker on the test machines),
which runs the "container" as a real process outside the job's process group. Kill,
preemption and the time limit each leave no container behind; the GPUs the runtime
is given are the job's, by UUID, and the label is the head's job id."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fakeruntime import FakeRuntime
from test_e2e_jobs import GPUTUI, Cluster, job, state_is, until
from test_e2e_ownership import sched

STUBBORN = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "open(sys.argv[1], 'a').write(f'{os.getpid()}\\n')\n"
    "while True: time.sleep(60)\n"
)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRuntime:
    runtime = FakeRuntime(tmp_path / "fake")
    monkeypatch.setenv("PATH", f"{runtime.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    return runtime


@pytest.fixture
async def local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeRuntime
) -> AsyncIterator[Cluster]:
    monkeypatch.setenv("GPUTUI_JOBS_ROOT", str(tmp_path / "jobs"))
    c = Cluster(tmp_path, "local")
    try:
        await c.serve_host()
        yield c
    finally:
        await c.close()


async def gputui(sock: Path, *argv: str, **env: str) -> tuple[int, str, str]:
    environ = dict(os.environ, GPUTUI_HEAD_SOCKET=str(sock), **env)
    proc = await asyncio.create_subprocess_exec(
        *GPUTUI, *argv, env=environ, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


async def _submit_box(local: Cluster, *flags: str) -> tuple[int, Path]:
    ready = local.tmp / "ready"
    rc, out, err = await gputui(
        local.sock,
        "submit", "-g", "2", "--cwd", str(local.tmp), "--image", "team/train:1.0", *flags,
        "--", sys.executable, "-c", STUBBORN, str(ready),
        TEAM_TOKEN="from-the-submitter",
    )  # fmt: skip
    assert rc == 0, (out, err)
    return int(out.strip()), ready


async def _no_container_left(fake: FakeRuntime, inside: int) -> None:
    async def removed() -> bool:
        return fake.running() == {} and not _alive(inside)

    await until(removed, timeout=30)


async def test_kill_removes_the_container_given_the_jobs_uuids_and_label(
    local: Cluster, fake: FakeRuntime
) -> None:
    client = await local.start(grace=0.5)
    job_id, ready = await _submit_box(
        local, "--runtime", "docker", "--env", "WANDB_MODE=offline", "--export=TEAM_TOKEN"
    )

    async def up() -> list[int]:
        return _pids(ready)

    (inside,) = await until(up)
    view = await job(client, job_id)
    assert (view["image"], view["runtime"]) == ("team/train:1.0", "docker")
    (run,) = fake.calls("run")
    argv = run["argv"]
    assert argv[argv.index("--gpus") + 1] == '"device=' + ",".join(view["gpu_uuids"]) + '"'
    assert f"gputui.job={job_id}" in argv and run["name"].startswith(f"gputui-job-{job_id}-")
    assert (run["uid"], run["gid"]) == (os.getuid(), os.getgid())
    assert run["env"]["WANDB_MODE"] == "offline"
    assert run["env"]["TEAM_TOKEN"] == "from-the-submitter"
    assert run["env"]["GPUTUI_JOB_ID"] == str(job_id)

    async def linked() -> dict[str, Any] | None:
        shown = await job(client, job_id)
        return shown if shown["container_id"] == run["cid"][:12] else None

    await until(linked)  # the head knows the container its processes are in
    rc, out, err = await gputui(local.sock, "kill", str(job_id))
    assert rc == 0, (out, err)
    await until(lambda: state_is(client, job_id, "killed"), timeout=30)
    await _no_container_left(fake, inside)
    assert [c["name"] for c in fake.calls("rm")] == [run["name"]]


async def test_a_preempted_container_job_is_removed_and_runs_again_in_a_new_one(
    local: Cluster, fake: FakeRuntime
) -> None:
    client = await local.start(grace=0.5)
    job_id, ready = await _submit_box(local, "--preemptible")

    async def started(count: int) -> list[int] | None:
        pids = _pids(ready)
        return pids if len(pids) >= count else None

    (first,) = await until(lambda: started(1))
    rc, out, err = await gputui(local.sock, "preempt", str(job_id))
    assert rc == 0, (out, err)
    pids = await until(lambda: started(2), timeout=30)
    assert not _alive(first)
    first_run, second_run = fake.calls("run")
    assert first_run["name"] != second_run["name"]  # a run of its own, never a clash
    assert [c["name"] for c in fake.calls("rm")] == [first_run["name"]]
    await client.call("kill", {"job_id": job_id})
    await until(lambda: state_is(client, job_id, "killed"), timeout=30)
    await _no_container_left(fake, pids[1])


async def test_the_time_limit_removes_the_container(local: Cluster, fake: FakeRuntime) -> None:
    client = await local.start(grace=0.5)
    ready = local.tmp / "ready"
    argv = [sys.executable, "-c", STUBBORN, str(ready)]
    body: dict[str, Any] = {"argv": argv, "gpus": 1, "cwd": str(local.tmp), "time_limit_s": 1.0}
    submitted = await client.call("submit", {**body, "image": "team/train:1.0"})
    ended = await client.call("wait", {"job_id": submitted["job"]["id"]}, timeout=30)
    assert ended["job"]["state"] == "timeout"
    (inside,) = _pids(ready)
    await _no_container_left(fake, inside)
    assert len(fake.calls("rm")) == 1


async def test_an_image_without_a_runtime_takes_the_configured_one(
    local: Cluster, fake: FakeRuntime
) -> None:
    client = await local.start(runtime="podman")
    argv = [sys.executable, "-c", "print('in the box')"]
    submitted = await client.call(
        "submit", {"argv": argv, "gpus": 1, "cwd": str(local.tmp), "image": "team/eval:2"}
    )
    ended = await client.call("wait", {"job_id": submitted["job"]["id"]}, timeout=30)
    assert ended["job"]["state"] == "completed"
    (run,) = fake.calls("run")
    assert run["runtime"] == "podman" and run["image"] == "team/eval:2"
    view = await job(client, submitted["job"]["id"])
    assert [a for a in run["argv"] if a.startswith("nvidia.com/gpu=")] == [
        f"nvidia.com/gpu={u}" for u in view["gpu_uuids"]
    ]
    assert view["runtime"] == "podman"


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--image", "ubuntu;reboot"], "is not an image name"),
        (["--image", "ubuntu", "--venv", "/opt/v"], "--venv with --image"),
        (["--env", "1BAD=x"], "is not an environment variable name"),
        (["--env", "CUDA_VISIBLE_DEVICES=0"], "CUDA_VISIBLE_DEVICES is set by the head"),
        (["--export", "ALL,NONE"], "NONE stands alone"),
        (["--conda", "a b"], "conda must name an environment"),
        (["--runtime", "podman"], "--runtime needs --image"),
        (["--cwd", "/data/a,b", "--image", "ubuntu"], "cannot be bound into a container"),
    ],
)
async def test_a_bad_environment_or_image_is_one_line_and_nothing_is_queued(
    local: Cluster, flags: list[str], words: str
) -> None:
    client = await local.start()
    rc, out, err = await gputui(local.sock, "submit", *flags, "--", "true")
    assert rc != 0 and out == "", (out, err)
    assert words in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert (await client.call("queue", {"all": True}))["jobs"] == []


async def test_the_containers_process_on_the_jobs_gpu_is_the_jobs_not_flagged(
    local: Cluster, fake: FakeRuntime
) -> None:
    """The container runs as the submitter (``--user UID:GID``), outside the job's
    process group, on the job's GPU: the head counts it as the job's, not a stray."""
    client = await local.start(sched=sched("warn", grace_s=0.0))
    job_id, ready = await _submit_box(local, "--runtime", "docker")
    (inside,) = await until(lambda: _up(ready))
    view = await job(client, job_id)
    assert local.head is not None
    fleet = local.head.hosts.fleet  # type: ignore[attr-defined]

    async def on_its_gpu() -> bool:
        sample = fleet.links["sim01"].snapshot.sample
        return sample is not None and any(
            p.pid == inside for g in sample.gpus if g.uuid in view["gpu_uuids"] for p in g.processes
        )

    await until(on_its_gpu)
    seen = local.head.batch.flags.ticks

    async def judged() -> bool:
        return local.head is not None and local.head.batch.flags.ticks >= seen + 2

    await until(judged)
    flags = (await client.call("cluster"))["flags"]
    assert not [f for f in flags if f["pid"] == inside], flags
    await client.call("kill", {"job_id": job_id})
    await until(lambda: state_is(client, job_id, "killed"), timeout=30)
    await _no_container_left(fake, inside)


async def _up(path: Path) -> list[int]:
    return _pids(path)
