"""A root helper launches a job as its owner's uid, and checks as that user.

Jobs belong to a uid; the launch names the user and the uid. After the name moved
to another uid (``usermod -u``, or ``userdel`` and ``useradd`` again) the helper
refuses with one reason and creates nothing, never running the job as whoever holds
the name now. The launch's pre-check runs as the job's user, so it answers the same
for a path that exists under another user's 0700 directory and for one that does
not. Real users (useradd, usermod, userdel), the real helper as root.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobkit import NS, SPEC, Jobs, kill_jobs
from privileged import account
from realusers import User, made_users

pytestmark = pytest.mark.root


@pytest.fixture
def shared() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gputui-launch-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    kill_jobs(path / "jobs")
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def jobs(start_helper: Callable[..., Any], shared: Path) -> Jobs:
    helper = start_helper(["--sim", SPEC], dict(os.environ, GPUTUI_JOBS_ROOT=str(shared / "jobs")))
    helper.expect(lambda m: m["type"] == "hello")
    return Jobs(helper)


def _run(*cmd: str) -> None:
    account(*cmd)


def test_a_name_that_moved_to_another_uid_is_refused_and_nothing_runs(
    jobs: Jobs, shared: Path
) -> None:
    with made_users(1, "gtu") as (alice,):
        started = jobs.launch(1, ["/bin/sh", "-c", "id -u"], user=alice.name, uid=alice.uid)
        assert started["ok"] is True, started
        assert jobs.wait_state(1, "exited")["exit_code"] == 0
        assert jobs.log(1) == f"{alice.uid}\n"
        # The name now belongs to another uid: the job of the old uid is refused.
        new_uid = alice.uid + 1000
        _run("usermod", "-u", str(new_uid), alice.name)
        assert pwd.getpwnam(alice.name).pw_uid == new_uid
        refused = jobs.launch(2, ["/bin/sh", "-c", "id -u"], user=alice.name, uid=alice.uid)
        assert (refused["ok"], refused["code"], refused["error"]) == (
            False,
            "user-changed",
            f"user {alice.name} is uid {new_uid} on this host, not uid {alice.uid} who"
            " submitted the job: not started",
        )
        assert not (shared / "jobs" / NS / "2").exists()
        # Deleted and made again (a fresh uid): the same.
        _run("userdel", "-f", alice.name)
        _run("useradd", "-M", "-u", str(alice.uid + 2000), "-s", "/bin/sh", alice.name)
        again = pwd.getpwnam(alice.name).pw_uid
        assert again != alice.uid
        refused = jobs.launch(3, ["/bin/sh", "-c", "id -u"], user=alice.name, uid=alice.uid)
        assert (refused["ok"], refused["code"]) == (False, "user-changed"), refused
        assert f"is uid {again} on this host, not uid {alice.uid}" in refused["error"]
        assert not (shared / "jobs" / NS / "3").exists()
        # The name's own uid still runs.
        ok = jobs.launch(4, ["/bin/sh", "-c", "id -u"], user=alice.name, uid=again)
        assert ok["ok"] is True, ok
        assert jobs.wait_state(4, "exited")["exit_code"] == 0
        assert jobs.log(4) == f"{again}\n"


@pytest.fixture
def two(shared: Path) -> Iterator[tuple[User, User, Path]]:
    with made_users(2, "gtp") as (alice, bob):
        private = shared / "alice"
        (private / "exists").mkdir(parents=True)
        tool = private / "tool"
        tool.write_text("#!/bin/sh\necho hi\n")
        tool.chmod(0o755)
        for path in (private, private / "exists", tool):
            os.chown(path, alice.uid, alice.gid)
        private.chmod(0o700)
        yield alice, bob, private


def test_the_pre_check_says_the_same_for_paths_the_user_cannot_see(
    jobs: Jobs, two: tuple[User, User, Path]
) -> None:
    _, bob, private = two
    answers = []
    for job_id, cwd in ((10, private / "exists"), (11, private / "missing")):
        res = jobs.launch(job_id, ["/bin/true"], user=bob.name, uid=bob.uid, cwd=str(cwd))
        assert (res["ok"], res["code"]) == (False, "exec-failed"), res
        answers.append(res["error"].replace(str(cwd), "CWD"))
    assert answers == ["cannot enter cwd CWD: not a directory on this host"] * 2
    answers = []
    for job_id, command in ((12, private / "tool"), (13, private / "none")):
        res = jobs.launch(job_id, [str(command)], user=bob.name, uid=bob.uid, cwd="/")
        assert (res["ok"], res["code"]) == (False, "exec-failed"), res
        answers.append(res["error"].replace(str(command), "CMD"))
    assert answers == ["cannot run 'CMD': no such command"] * 2
    assert not any((private.parent / "jobs" / NS / str(n)).exists() for n in range(10, 14))


def test_the_owner_passes_the_same_pre_check(jobs: Jobs, two: tuple[User, User, Path]) -> None:
    alice, _, private = two
    res = jobs.launch(
        20, [str(private / "tool")], user=alice.name, uid=alice.uid, cwd=str(private / "exists")
    )
    assert res["ok"] is True, res
    assert jobs.wait_state(20, "exited")["exit_code"] == 0
    assert jobs.log(20) == "hi\n"


def test_a_script_runs_as_its_owner_and_its_output_file_is_opened_as_them(
    jobs: Jobs, shared: Path
) -> None:
    """The script's copy is its owner's (0700); ``--output`` is opened by the job's
    own process, as its user: a place only root may write is refused, not written."""
    with made_users(1, "gtu") as (alice,):
        home = shared / "alice"
        home.mkdir()
        os.chown(home, alice.uid, alice.uid)
        script = '#!/bin/sh\necho "script as $(id -u) with $1"\n'
        started = jobs.launch(
            1,
            ["train.sh", "x"],
            user=alice.name,
            uid=alice.uid,
            cwd=str(home),
            script=script,
            output="out-1.log",
        )
        assert started["ok"] is True, started
        assert jobs.wait_state(1, "exited")["exit_code"] == 0
        assert (home / "out-1.log").read_text() == f"script as {alice.uid} with x\n"
        assert (home / "out-1.log").stat().st_uid == alice.uid
        assert jobs.log(1) == "gputui: output goes to out-1.log (--output)\n"
        copy = next((shared / "jobs").glob("*/1/script"))
        assert copy.read_text() == script
        assert (copy.stat().st_uid, copy.stat().st_mode & 0o777) == (alice.uid, 0o700)
        # Root's own directory: the job's user cannot create the file there.
        locked = shared / "root-only"
        locked.mkdir(mode=0o755)
        refused = jobs.launch(
            2,
            ["train.sh"],
            user=alice.name,
            uid=alice.uid,
            cwd=str(home),
            script=script,
            output=str(locked / "out.log"),
        )
        assert refused["ok"] is False, refused  # the supervisor's start failed: it says so
        error = str(refused.get("message", refused.get("error")))
        assert "cannot open the output file" in error and "Permission denied" in error
        assert not (locked / "out.log").exists()
