"""A job in a Python environment (``venv``, ``conda``): activated for exec, as the
job's user, through a real helper and real supervisors; no shell line is built.

The venv is a real one (``python3 -m venv``); the conda environments are prefixes
laid out as conda lays them out (``conda-meta`` and ``bin``) in the places conda
puts them, since conda itself is not installed on the test machines.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobkit import SPEC, Jobs, kill_jobs
from realusers import User, made_users

pytestmark = pytest.mark.root

PYTHON = "/usr/bin/python3"
SHOW = '#!/bin/sh\necho "$VIRTUAL_ENV|$CONDA_PREFIX|$CONDA_DEFAULT_ENV|$PATH|${PYTHONHOME-unset}"\n'
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture(scope="module")
def user() -> Iterator[User]:
    with made_users(1, "gte") as (made,):
        yield made


@pytest.fixture
def place(user: User) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gputui-env-"))
    path.chmod(0o755)
    yield path
    kill_jobs(path / "jobs")
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def jobs(start_helper: Callable[..., Any], place: Path) -> Jobs:
    env = dict(os.environ, GPUTUI_JOBS_ROOT=str(place / "jobs"))
    helper = start_helper(["--sim", SPEC], env)
    helper.expect(lambda m: m["type"] == "hello")
    return Jobs(helper)


def _owned(path: Path, user: User) -> None:
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files, "."]:
            os.chown(os.path.join(folder, name), user.uid, user.gid, follow_symlinks=False)


def _prefix(path: Path, user: User) -> Path:
    """A conda environment's prefix as conda lays it out, with a ``show`` command."""
    (path / "conda-meta").mkdir(parents=True)
    (path / "bin").mkdir()
    show = path / "bin" / "show"
    show.write_text(SHOW)
    show.chmod(0o755)
    _owned(path, user)
    return path


def _run(jobs: Jobs, job_id: int, argv: list[str], user: User, **fields: Any) -> str:
    res = jobs.launch(job_id, argv, user=user.name, uid=user.uid, **fields)
    assert res["ok"] is True, res
    assert jobs.wait_state(job_id, "exited")["exit_code"] == 0
    return jobs.log(job_id)


def test_a_real_venv_is_activated_for_the_job(jobs: Jobs, place: Path, user: User) -> None:
    venv = place / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    show = venv / "bin" / "show"
    show.write_text(SHOW)
    show.chmod(0o755)
    _owned(venv, user)
    # "python" is the venv's: found on the activated PATH, its sys.prefix the venv.
    code = "import sys, os; print(sys.prefix, os.getuid())"
    assert _run(jobs, 1, ["python", "-c", code], user, venv=str(venv)) == f"{venv} {user.uid}\n"
    got = _run(jobs, 2, ["show"], user, venv=str(venv) + "/", env={"PYTHONHOME": "/x"})
    assert got == f"{venv}|||{venv}/bin:{BASE_PATH}|unset\n"


def test_a_conda_env_is_found_where_conda_puts_it(jobs: Jobs, place: Path, user: User) -> None:
    in_home = _prefix(user.home / "miniconda3" / "envs" / "train", user)
    assert _run(jobs, 3, ["show"], user, conda="train") == (
        f"|{in_home}|train|{in_home}/bin:{BASE_PATH}|unset\n"
    )
    # One conda recorded elsewhere (~/.conda/environments.txt), and one by its path.
    elsewhere = _prefix(place / "envs" / "eval", user)
    listed = user.home / ".conda" / "environments.txt"
    listed.parent.mkdir()
    listed.write_text(f"{user.home}/miniconda3\n{elsewhere}\n")
    _owned(listed.parent, user)
    assert _run(jobs, 4, ["show"], user, conda="eval").startswith(f"|{elsewhere}|eval|")
    by_path = _run(jobs, 5, ["show"], user, conda=str(elsewhere))
    assert by_path.startswith(f"|{elsewhere}|eval|{elsewhere}/bin:")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"conda": "nope"}, "no conda environment 'nope' on this host"),
        ({"venv": "/usr"}, "/usr is not a virtual environment (no pyvenv.cfg there)"),
    ],
)
def test_a_missing_environment_is_one_line_and_nothing_runs(
    jobs: Jobs, user: User, fields: dict[str, Any], words: str
) -> None:
    res = jobs.launch(6, ["true"], user=user.name, **fields)
    assert (res["ok"], res["code"]) == (False, "exec-failed"), res
    assert res["error"].startswith(words) and "\n" not in res["error"]
    assert jobs.call("jobs", job_ids=[6])["value"]["jobs"] == []


@pytest.mark.parametrize(
    "fields",
    [
        {"conda": "x; rm -rf ~"},
        {"conda": "-n"},
        {"venv": "relative/venv"},
        {"venv": "/opt/a:/opt/b"},
        {"venv": "/opt/v", "conda": "base"},
    ],
)
def test_a_bad_environment_is_refused_before_anything_is_made(
    jobs: Jobs, user: User, fields: dict[str, Any]
) -> None:
    res = jobs.launch(7, ["true"], user=user.name, **fields)
    assert (res["ok"], res["code"]) == (False, "bad-request"), res
    assert "\n" not in res["error"]
