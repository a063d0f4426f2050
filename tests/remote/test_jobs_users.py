"""Jobs and Unix users: a root helper starts a job as the user named; a helper that is
not root starts jobs only as itself. Needs root (useradd, setuid); skipped otherwise."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobkit import NS, SPEC, Jobs, kill_jobs
from privileged import account, accounts_lock, need_root

USER = "gputuijob"
SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def other_user() -> pwd.struct_passwd:
    """A real second user (made with useradd when missing)."""
    need_root("starting a job as another user means setuid")
    with accounts_lock():  # another test process may be making it
        try:
            return pwd.getpwnam(USER)
        except KeyError:
            pass
        if shutil.which("useradd") is None:
            pytest.skip("useradd is not installed, so no second user can be made")
        account("useradd", "--no-create-home", "--shell", "/bin/sh", USER)
        return pwd.getpwnam(USER)


@pytest.fixture
def shared_dir(other_user: pwd.struct_passwd) -> Iterator[Path]:
    """A directory the other user can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gputui-jobs-"))
    path.chmod(0o755)
    yield path
    kill_jobs(path / "jobs")
    shutil.rmtree(path, ignore_errors=True)


def _ids(pid: int, key: str) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def test_a_root_helper_runs_the_job_as_the_user(
    start_helper: Callable[..., Any], other_user: pwd.struct_passwd, shared_dir: Path
) -> None:
    root = shared_dir / "jobs"
    helper = start_helper(["--sim", SPEC], dict(os.environ, GPUTUI_JOBS_ROOT=str(root)))
    helper.expect(lambda m: m["type"] == "hello")
    jobs = Jobs(helper)
    go, out = shared_dir / "go", shared_dir / "out"
    out.mkdir()
    os.chown(out, other_user.pw_uid, other_user.pw_gid)
    shell = f'id -u; id -G; echo "$USER $LOGNAME $HOME"; pwd; touch {out}/mine; '
    shell += f"while [ ! -e {go} ]; do sleep 0.01; done"
    res = jobs.launch(1, ["/bin/sh", "-c", shell], user=USER, cwd=None)
    assert res["ok"] is True, res
    pid = res["value"]["pid"]
    uid, gid = other_user.pw_uid, other_user.pw_gid
    assert _ids(pid, "Uid") == [uid] * 4 and _ids(pid, "Gid") == [gid] * 4
    assert sorted(_ids(pid, "Groups")) == sorted(set(os.getgrouplist(USER, gid)))
    log = root / NS / "1" / "output.log"
    assert log.stat().st_uid == uid
    assert stat.S_IMODE((root / NS / "1").stat().st_mode) == 0o755
    go.touch()
    assert jobs.wait_state(1, "exited")["exit_code"] == 0
    assert (out / "mine").stat().st_uid == uid
    groups = " ".join(str(g) for g in os.getgrouplist(USER, gid))
    home = other_user.pw_dir
    cwd = home if os.path.isdir(home) else "/"
    assert jobs.log(1) == f"{uid}\n{groups}\n{USER} {USER} {home}\n{cwd}\n"


def test_a_helper_that_is_not_root_starts_jobs_only_as_itself(
    start_helper: Callable[..., Any], other_user: pwd.struct_passwd, shared_dir: Path
) -> None:
    if not Path(SYSTEM_PYTHON).exists() or shutil.which("setpriv") is None:
        pytest.skip(f"needs {SYSTEM_PYTHON} and setpriv to run a helper as {USER}")
    root = shared_dir / "jobs"
    root.mkdir()
    os.chown(root, other_user.pw_uid, other_user.pw_gid)
    drop = [
        "setpriv",
        f"--reuid={other_user.pw_uid}",
        f"--regid={other_user.pw_gid}",
        "--clear-groups",
    ]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(shared_dir), "GPUTUI_JOBS_ROOT": str(root)}
    helper = start_helper(["--sim", SPEC], env, python=SYSTEM_PYTHON, wrap=drop)
    helper.expect(lambda m: m["type"] == "hello")
    jobs = Jobs(helper)
    refused = jobs.launch(1, ["/bin/sh", "-c", "id -u"], user="root")
    assert (refused["ok"], refused["code"]) == (False, "not-permitted"), refused
    assert "cannot start jobs as root" in refused["error"]
    assert list(root.iterdir()) == []
    for job_id, user in ((2, None), (3, USER)):
        res = jobs.launch(job_id, ["/bin/sh", "-c", "id -u"], user=user)
        assert res["ok"] is True, res
        assert jobs.wait_state(job_id, "exited")["exit_code"] == 0
        assert jobs.log(job_id) == f"{other_user.pw_uid}\n"
    for path in (root / NS, root / NS / "2"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for name in ("state.json", "output.log"):
        info = (root / NS / "2" / name).stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o600, other_user.pw_uid)
